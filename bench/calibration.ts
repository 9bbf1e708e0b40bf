/**
 * Confidence calibrated, not asserted: the thresholds that mark a field confident are chosen on the
 * tuning corpora (per source and field, the least confidence above which the tuning fields are
 * right often enough) and reported on the held-out ones, where nothing was chosen. `npm run eval`
 * collects one point per scored field (bench/source-eval.ts), calls {@link chooseThresholds}, writes
 * them to worker/src/contract/confidence-thresholds.json for the worker, and {@link calibrationReport}
 * into bench/results.json and docs/analysis.md.
 */
import type { FieldSource } from '../worker/src/contract/analysis';
import {
  CONFIDENCE_FIELDS,
  type ConfidenceField,
  type Thresholds,
  type ThresholdsOf,
} from '../worker/src/core/review';
import { percent } from './e-invoice-eval';
import { figuresBlock } from './results-file';

/** The goal: confident fields right at least this often on the held-out sets... */
export const CONFIDENT_ACCURACY_GOAL = 0.98;
/** ...while at least this share of the fields are marked confident. */
export const CONFIDENT_SHARE_GOAL = 0.7;

/** The sources that are calibrated: the XML states its values, the others are read. */
export const CALIBRATED_SOURCES = ['text_layer', 'ocr', 'gemini'] as const satisfies readonly FieldSource[];
export type CalibratedSource = (typeof CALIBRATED_SOURCES)[number];

/** The corpora the thresholds are chosen on, and the ones they are reported on. */
export type CalibrationRole = 'tuning' | 'heldOut';

/** One scored field: what the analyzer said of it, and whether it was right. */
export interface ConfidencePoint {
  /** The source of the field's value (the analyzer's own, or what it was given for a missing one). */
  source: CalibratedSource;
  /** The corpus, and the way the document reached the analyzer (bench/source-eval.ts `Source`). */
  corpus: string;
  input: string;
  role: CalibrationRole;
  document: string;
  field: ConfidenceField;
  /** null: the analyzer gave no value (never confident). */
  confidence: number | null;
  /** How the value was found (core/review.ts `FieldConfidence.how`), for a look at the calibration. */
  how?: string;
  right: boolean;
}

/**
 * The fewest tuning fields a threshold may rest on: four right SIRETs say nothing of a 98 % rate (the
 * FNFE-MPE examples' SIRETs, all invented, fail their check digit and are right against their XML, and
 * alone they set the text layer's SIRET threshold at the confidence of a failed check).
 */
export const MIN_TUNING_FIELDS = 10;

/**
 * The least confidence `t` such that at least {@link MIN_TUNING_FIELDS} tuning fields have a
 * confidence ≥ t and they are right at least `goal` of the time; null when no `t` does (that source
 * never marks that field confident). A field with fewer tuning fields than that takes the threshold
 * chosen over all the source's fields together.
 */
export function chooseThresholds(
  points: readonly ConfidencePoint[],
  goal = CONFIDENT_ACCURACY_GOAL,
  minFields = MIN_TUNING_FIELDS,
): Partial<Record<CalibratedSource, ThresholdsOf>> {
  const tuning = points.filter((p) => p.role === 'tuning' && p.confidence !== null);
  const chosen: Partial<Record<CalibratedSource, Record<string, number | null>>> = {};
  for (const source of CALIBRATED_SOURCES) {
    const ofSource = tuning.filter((p) => p.source === source);
    if (ofSource.length === 0) continue;
    const pooled = leastThreshold(ofSource, goal, minFields);
    const thresholds: Record<string, number | null> = {};
    for (const field of CONFIDENCE_FIELDS) {
      const ofField = ofSource.filter((p) => p.field === field);
      thresholds[field] = ofField.length < minFields ? pooled : leastThreshold(ofField, goal, minFields);
    }
    chosen[source] = thresholds;
  }
  return chosen;
}

function leastThreshold(points: readonly ConfidencePoint[], goal: number, minFields: number): number | null {
  const candidates = [...new Set(points.map((p) => p.confidence!))].sort((a, b) => a - b);
  for (const t of candidates) {
    const above = points.filter((p) => p.confidence! >= t);
    // Higher thresholds keep fewer fields still: none of them rests on enough.
    if (above.length < minFields) return null;
    const right = above.filter((p) => p.right).length;
    if (right / above.length >= goal) return t;
  }
  return null;
}

/** How the thresholds do on one set of fields. */
export interface ConfidenceScores {
  documents: number;
  /** Fields the truth states. */
  fields: number;
  /** ...marked confident, and of those, right. */
  confident: number;
  confidentRight: number;
  /** confident / fields, confidentRight / confident (1 when none is confident). */
  confidentShare: number;
  confidentAccuracy: number;
  /** Documents none of whose fields is doubted (confident, or absent and not stated). */
  documentsAllConfident: number;
}

/** The `eval.calibration` section of bench/results.json. */
export interface CalibrationSection {
  goals: { confidentAccuracy: number; confidentShare: number };
  thresholds: Partial<Record<CalibratedSource, ThresholdsOf>>;
  /** Per source, per role (tuning, held-out), then per input (text-pdf, scan...) of each role. */
  bySource: Partial<
    Record<
      CalibratedSource,
      Partial<Record<CalibrationRole, ConfidenceScores & { byInput: Record<string, ConfidenceScores> }>>
    >
  >;
  /** Per source: the held-out goal met (undefined: not measured on held-out). */
  met: Partial<Record<CalibratedSource, boolean>>;
}

const confidentUnder =
  (thresholds: Partial<Record<CalibratedSource, ThresholdsOf>>) =>
  (p: ConfidencePoint): boolean => {
    if (p.confidence === null) return false;
    const t = thresholds[p.source]?.[p.field];
    return t !== null && t !== undefined && p.confidence >= t;
  };

function scoresOf(points: readonly ConfidencePoint[], confident: (p: ConfidencePoint) => boolean) {
  const marked = points.filter(confident);
  const right = marked.filter((p) => p.right).length;
  const documents = new Set(points.map((p) => `${p.corpus}/${p.input}/${p.document}`));
  const doubted = new Set(
    points.filter((p) => !confident(p)).map((p) => `${p.corpus}/${p.input}/${p.document}`),
  );
  const ratio = (a: number, b: number, none: number) =>
    b === 0 ? none : Math.round((a / b) * 10_000) / 10_000;
  return {
    documents: documents.size,
    fields: points.length,
    confident: marked.length,
    confidentRight: right,
    confidentShare: ratio(marked.length, points.length, 0),
    confidentAccuracy: ratio(right, marked.length, 1),
    documentsAllConfident: documents.size - doubted.size,
  };
}

/** The thresholds' scores per source and role, and whether the held-out goal is met. */
export function calibrationReport(
  points: readonly ConfidencePoint[],
  thresholds: Partial<Record<CalibratedSource, ThresholdsOf>>,
): CalibrationSection {
  const confident = confidentUnder(thresholds);
  const section: CalibrationSection = {
    goals: { confidentAccuracy: CONFIDENT_ACCURACY_GOAL, confidentShare: CONFIDENT_SHARE_GOAL },
    thresholds,
    bySource: {},
    met: {},
  };
  for (const source of CALIBRATED_SOURCES) {
    for (const role of ['tuning', 'heldOut'] as const) {
      const of = points.filter((p) => p.source === source && p.role === role);
      if (of.length === 0) continue;
      const byInput: Record<string, ConfidenceScores> = {};
      for (const input of [...new Set(of.map((p) => p.input))])
        byInput[input] = scoresOf(
          of.filter((p) => p.input === input),
          confident,
        );
      section.bySource[source] = {
        ...section.bySource[source],
        [role]: { ...scoresOf(of, confident), byInput },
      };
    }
    const heldOut = section.bySource[source]?.heldOut;
    if (heldOut)
      section.met[source] =
        heldOut.confidentAccuracy >= CONFIDENT_ACCURACY_GOAL &&
        heldOut.confidentShare >= CONFIDENT_SHARE_GOAL;
  }
  return section;
}

/**
 * The thresholds file the worker reads: the sources measured now take their new thresholds, the
 * others keep theirs (Gemini is measured only with GEMINI_API_KEY set).
 */
export function thresholdsFile(
  previous: { thresholds: Thresholds; calibrated: Record<CalibratedSource, boolean> },
  chosen: Partial<Record<CalibratedSource, ThresholdsOf>>,
  date: string,
): string {
  const thresholds = { ...previous.thresholds };
  const calibrated = { ...previous.calibrated };
  for (const source of CALIBRATED_SOURCES) {
    const of = chosen[source];
    if (!of) continue;
    thresholds[source] = of;
    calibrated[source] = true;
  }
  const file = {
    about:
      'Generated by npm run eval (bench/calibration.ts) from the tuning corpora; do not edit. Per source and field, the least confidence marked confident; null: never.',
    date,
    calibrated,
    thresholds,
  };
  return `${JSON.stringify(file, null, 2)}\n`;
}

const SOURCE_NAMES: Record<CalibratedSource, string> = {
  text_layer: 'text layer',
  ocr: 'OCR',
  gemini: 'Gemini',
};
const ROLE_NAMES: Record<CalibrationRole, string> = { tuning: 'tuning', heldOut: 'held-out' };

/** The markdown docs/analysis.md shows between its confidence-figures markers. */
export function renderCalibrationFigures(section: CalibrationSection, date: string): string {
  const rows: string[] = [];
  for (const source of CALIBRATED_SOURCES) {
    for (const role of ['tuning', 'heldOut'] as const) {
      const scores = section.bySource[source]?.[role];
      if (!scores) continue;
      const inputs = Object.entries(scores.byInput)
        .map(([input, s]) => `${input} ${percent(s.confidentShare)} / ${percent(s.confidentAccuracy)}`)
        .join('; ');
      rows.push(
        `| ${SOURCE_NAMES[source]} | ${ROLE_NAMES[role]} | ${scores.fields} | ${scores.confident} (${percent(scores.confidentShare)}) | ${scores.confidentRight}/${scores.confident} (${percent(scores.confidentAccuracy)}) | ${scores.documentsAllConfident}/${scores.documents} | ${inputs} |`,
      );
    }
  }
  const verdicts = CALIBRATED_SOURCES.map((source) => {
    const met = section.met[source];
    const heldOut = section.bySource[source]?.heldOut;
    if (met === undefined || !heldOut) return `${SOURCE_NAMES[source]}: not measured`;
    return `${SOURCE_NAMES[source]}: ${percent(heldOut.confidentAccuracy)} right among ${percent(heldOut.confidentShare)} marked confident, ${met ? 'met' : '**missed**'}`;
  });
  const thresholdRows = CONFIDENCE_FIELDS.map((field) => {
    const cells = CALIBRATED_SOURCES.map((source) => {
      const of = section.thresholds[source];
      if (!of) return 'not measured';
      const t = of[field];
      return t === null || t === undefined ? 'never' : `≥ ${t}`;
    });
    return `| \`${field}\` | ${cells.join(' | ')} |`;
  });
  return [
    `Measured ${date.slice(0, 10)}; thresholds chosen on the tuning corpora, goal on held-out: ≥ ${percent(section.goals.confidentAccuracy)} of the confident fields right while ≥ ${percent(section.goals.confidentShare)} are marked confident. ${verdicts.join('. ')}.`,
    '',
    '| source | corpus | fields | marked confident | right among confident | documents with nothing doubted | per input (confident / right) |',
    '|---|---|---|---|---|---|---|',
    ...rows,
    '',
    'Thresholds (confidence at or above which a field is confident; `never`: no confidence of that source was right often enough on the tuning corpora):',
    '',
    `| field | ${CALIBRATED_SOURCES.map((s) => SOURCE_NAMES[s]).join(' | ')} |`,
    `|---|${CALIBRATED_SOURCES.map(() => '---').join('|')}|`,
    ...thresholdRows,
  ].join('\n');
}

/** The block of docs/analysis.md that shows the calibration's figures. */
export const CALIBRATION_FIGURES = figuresBlock('confidence-figures', 'npm run eval', 'docs/analysis.md');
