import { readFileSync } from 'node:fs';
import path from 'node:path';
import { emptyAnalysis } from '../../worker/src/adapters/analyzers/offline/invoice';
import type { Analysis } from '../../worker/src/contract/analysis';
import type { Analyzer } from '../../worker/src/core/ports';
import {
  type BySource,
  CORPUS_INFO,
  invoice2dataTruth,
  renderSourceFigures,
  SOURCE_FIGURES,
  SOURCE_GOALS,
  sampleTexts,
  scoreSource,
  tuningCorpus,
} from '../source-eval';

const REPO_ROOT = path.join(__dirname, '..', '..');

/** An analyzer that answers the same analysis for every document. */
const answering = (analysis: Analysis, model = 'fixed'): Analyzer => ({
  analyze: async () => ({ analysis, model, usage: { promptTokens: 0, outputTokens: 0, totalTokens: 0 } }),
});

describe('the eval corpora', () => {
  it('maps invoice2data’s expected values onto the analysis, and scores only what they state', () => {
    expect(
      invoice2dataTruth({
        issuer: 'Flipkart',
        amount: 319,
        date: '2015-10-20',
        invoice_number: '#BLR_1',
        currency: 'INR',
        vat: 'NL 810433941B01',
        lines: [],
      }),
    ).toEqual({
      invoice_number: 'BLR_1',
      issue_date: '2015-10-20',
      currency: 'INR',
      total_amount: 319,
      supplier_vat_id: 'NL810433941B01',
    });
  });

  it('holds the eleven invoice2data PDFs with their expectations, and the samples’ text files', () => {
    expect(tuningCorpus().map((t) => t.document)).toHaveLength(11);
    expect(sampleTexts().length).toBeGreaterThanOrEqual(6);
  });
});

describe('scoreSource', () => {
  const truth = {
    document: 'a.txt',
    text: Buffer.from('x'),
    stated: { invoice_number: 'F-1', total_amount: 12, due_date: null } as Partial<Analysis>,
  };

  it('counts each stated field once, right or wrong, and skips fields not stated', async () => {
    const right = await scoreSource(
      answering({ ...emptyAnalysis(), invoice_number: 'F-1', total_amount: 12, due_date: '2026-01-01' }),
      [truth],
      'text-file',
    );
    expect(right).toMatchObject({ documents: 1, fields: 2, correct: 2, accuracy: 1, misses: [] });
    const wrong = await scoreSource(
      answering({ ...emptyAnalysis(), total_amount: 13 }),
      [truth],
      'text-file',
    );
    expect(wrong).toMatchObject({ fields: 2, correct: 0, accuracy: 0 });
    expect(wrong.misses.map((m) => m.field)).toEqual(['invoice_number', 'total_amount']);
  });

  it('counts the reads OCR marked low-confidence', async () => {
    const doubtful = answering(emptyAnalysis(), 'offline+ocr:tesseract:eng+fra:low-confidence');
    expect((await scoreSource(doubtful, [truth], 'text-file')).lowConfidence).toBe(1);
  });
});

describe('docs/analysis.md', () => {
  const scores = (correct: number, fields: number) => ({
    documents: 2,
    fields,
    correct,
    accuracy: correct / fields,
    byField: { total_amount: { fields, correct } },
    lowConfidence: 0,
    misses: [],
  });

  it('says whether each goal is met, from the held-out figures', () => {
    const bySource: BySource = {
      corpora: CORPUS_INFO,
      goals: SOURCE_GOALS,
      'text-pdf': { heldOut: scores(8, 10) },
      scan: { heldOut: scores(5, 10) },
      photo: { heldOut: scores(6, 10) },
    };
    const figures = renderSourceFigures(bySource, '2026-12-02T00:00:00Z');
    expect(figures).toContain('Held-out text PDFs: 80.0 % against a goal of 75.0 %: met');
    expect(figures).toContain('Held-out scans and photos: 55.0 % against a goal of 60.0 %: **missed**');
    expect(figures).toContain('| `total_amount` | 8/10 | 5/10 | 6/10 |');
  });

  it('shows the figures generated from bench/results.json', () => {
    const results = JSON.parse(readFileSync(path.join(REPO_ROOT, 'bench', 'results.json'), 'utf8'));
    const doc = readFileSync(path.join(REPO_ROOT, 'docs', 'analysis.md'), 'utf8');
    expect(results.eval.bySource).toBeDefined();
    expect(SOURCE_FIGURES.in(doc)).toBe(renderSourceFigures(results.eval.bySource, results.eval.date));
  });
});
