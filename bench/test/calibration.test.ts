import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  CALIBRATION_FIGURES,
  type ConfidencePoint,
  calibrationReport,
  chooseThresholds,
  renderCalibrationFigures,
} from '../calibration';

const REPO_ROOT = path.join(__dirname, '..', '..');

const point = (confidence: number | null, right: boolean, overrides: Partial<ConfidencePoint> = {}) =>
  ({
    source: 'text_layer',
    corpus: 'tuning',
    input: 'text-pdf',
    role: 'tuning',
    document: `d${Math.random()}`,
    field: 'invoice_number',
    confidence,
    right,
    ...overrides,
  }) as ConfidencePoint;

describe('the confidence calibration', () => {
  it('chooses the least confidence above which the tuning fields are right often enough, never when none is', () => {
    const points = [
      ...Array.from({ length: 60 }, () => point(0.9, true)),
      point(0.5, false),
      point(0.5, false),
      point(0.5, true),
      point(0.75, true),
      ...Array.from({ length: 9 }, () => point(0.9, true, { field: 'supplier_name' })),
      point(0.9, false, { field: 'supplier_name' }),
      point(0.5, true, { field: 'supplier_name' }),
    ];
    const chosen = chooseThresholds(points);
    expect(chosen.text_layer?.invoice_number).toBe(0.75);
    expect(chosen.text_layer?.supplier_name).toBeNull();
    // A field with no tuning point takes the source's pooled threshold.
    expect(chosen.text_layer?.due_date).toBe(0.75);
    expect(chosen.ocr).toBeUndefined();
  });

  it('rests no threshold on fewer than ten tuning fields', () => {
    const points = [
      ...Array.from({ length: 40 }, () => point(0.9, true)),
      point(0.5, false),
      // Four SIRETs that fail their check digit and are right: too few to make 0.27 confident.
      ...Array.from({ length: 4 }, () => point(0.27, true, { field: 'supplier_siret' })),
      // Nine right names above 0.95, one wrong below: 0.95 would rest on nine fields.
      ...Array.from({ length: 9 }, () => point(0.95, true, { field: 'supplier_name' })),
      ...Array.from({ length: 3 }, () => point(0.8, false, { field: 'supplier_name' })),
    ];
    const chosen = chooseThresholds(points);
    expect(chosen.text_layer?.supplier_siret).toBe(0.9);
    expect(chosen.text_layer?.supplier_name).toBeNull();
    expect(chosen.text_layer?.invoice_number).toBe(0.9);
    expect(chooseThresholds(points, 0.98, 1).text_layer?.supplier_siret).toBe(0.27);
  });

  it('reports on held-out fields what the tuning ones chose, a missing value never confident', () => {
    const tuning = Array.from({ length: 50 }, () => point(0.9, true));
    const heldOut = [
      point(0.9, true, { role: 'heldOut', corpus: 'heldOut' }),
      point(0.9, false, { role: 'heldOut', corpus: 'heldOut' }),
      point(null, false, { role: 'heldOut', corpus: 'heldOut' }),
      point(0.5, true, { role: 'heldOut', corpus: 'heldOut' }),
    ];
    const report = calibrationReport([...tuning, ...heldOut], chooseThresholds(tuning));
    expect(report.bySource.text_layer?.heldOut).toMatchObject({
      fields: 4,
      confident: 2,
      confidentRight: 1,
      confidentShare: 0.5,
      confidentAccuracy: 0.5,
    });
    expect(report.met.text_layer).toBe(false);
  });

  it('gives the worker the thresholds npm run eval chose, and docs/analysis.md its figures', () => {
    const results = JSON.parse(readFileSync(path.join(REPO_ROOT, 'bench', 'results.json'), 'utf8'));
    const file = JSON.parse(
      readFileSync(path.join(REPO_ROOT, 'worker', 'src', 'contract', 'confidence-thresholds.json'), 'utf8'),
    );
    const calibration = results.eval.calibration;
    for (const source of Object.keys(calibration.thresholds))
      expect(file.thresholds[source]).toEqual(calibration.thresholds[source]);
    const doc = readFileSync(path.join(REPO_ROOT, 'docs', 'analysis.md'), 'utf8');
    expect(CALIBRATION_FIGURES.in(doc)).toBe(renderCalibrationFigures(calibration, results.eval.date));
  });
});
