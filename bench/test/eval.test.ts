import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { emptyAnalysis } from '../../worker/src/adapters/analyzers/offline/invoice';
import type { Analysis } from '../../worker/src/contract/analysis';
import type { Analyzer } from '../../worker/src/core/ports';
import { startFakeGemini } from '../../worker/test/support/fake-gemini';
import {
  comparableName,
  EVAL_FIGURES,
  EVAL_GOAL,
  evaluate,
  fieldMatches,
  pdfsIn,
  renderEvalFigures,
} from '../e-invoice-eval';
import { DEFAULT_EVAL_FOLDER, geminiFromEnvironment, runEval } from '../eval';

const REPO_ROOT = path.join(__dirname, '..', '..');

const stated = (overrides: Partial<Analysis> = {}): Analysis => ({
  ...emptyAnalysis(),
  document_type: 'invoice',
  supplier_name: 'Au bon moulin',
  supplier_vat_id: 'FR11999999998',
  invoice_number: 'FA-2017-0010',
  net_amount: 624.9,
  ...overrides,
});

/** An analyzer that answers the same analysis for every document. */
const answering = (analysis: Analysis): Analyzer => ({
  analyze: async () => ({
    analysis,
    model: 'fixed',
    usage: { promptTokens: 0, outputTokens: 0, totalTokens: 0 },
  }),
});

describe('fieldMatches', () => {
  it('compares names whatever their case, spacing and trailing legal form', () => {
    expect(comparableName('  AU BON  MOULIN SARL ')).toBe('au bon moulin');
    expect(fieldMatches('supplier_name', stated(), stated({ supplier_name: 'Au bon moulin SARL' }))).toBe(
      true,
    );
    expect(
      fieldMatches('supplier_name', stated(), stated({ supplier_name: 'Au bon moulin - 1242 chemin' })),
    ).toBe(false);
  });

  it('compares amounts within half a cent, and a credit note’s without their sign', () => {
    expect(fieldMatches('net_amount', stated(), stated({ net_amount: 624.904 }))).toBe(true);
    expect(fieldMatches('net_amount', stated(), stated({ net_amount: 624.91 }))).toBe(false);
    expect(fieldMatches('net_amount', stated(), stated({ net_amount: -624.9 }))).toBe(false);
    const credit = stated({ document_type: 'credit_note' });
    expect(fieldMatches('net_amount', credit, { ...credit, net_amount: -624.9 })).toBe(true);
  });

  it('compares identifiers without spaces, and counts a missing value as wrong', () => {
    expect(fieldMatches('supplier_vat_id', stated(), stated({ supplier_vat_id: 'FR 11 999999998' }))).toBe(
      true,
    );
    expect(fieldMatches('invoice_number', stated(), stated({ invoice_number: null }))).toBe(false);
  });
});

describe('evaluate', () => {
  const pdfs = pdfsIn(DEFAULT_EVAL_FOLDER);

  it('scores only the fields the XML states, and lists each miss', async () => {
    const scores = await evaluate(answering(emptyAnalysis()), pdfs, 'empty');
    expect(scores).toMatchObject({ documents: 7, correct: 0, accuracy: 0 });
    expect(scores.fields).toBe(scores.misses.length);
    // MINIMUM profiles state no due date: fewer due dates are scored than documents.
    expect(scores.byField.due_date!.fields).toBeLessThan(7);
    expect(scores.byField.supplier_siren).toBeUndefined();
  });

  it(`finds the offline analyzer reading at least ${EVAL_GOAL * 100} % of the French Factur-X fields`, async () => {
    const { OfflineAnalyzer } = await import('../../worker/src/adapters/analyzers/offline-analyzer.js');
    const scores = await evaluate(new OfflineAnalyzer(), pdfs, 'offline');
    expect(scores.documents).toBe(7);
    expect(scores.accuracy).toBeGreaterThanOrEqual(EVAL_GOAL);
  });
});

describe('runEval', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'docline-eval-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('replaces the eval section of the results file only, and the doc’s figures from it', async () => {
    const resultsFile = path.join(dir, 'results.json');
    const others = { machine: { cpus: 2 }, costModel: { gemini: { usd: 1.45 } }, burst: { runs: [1, 2] } };
    writeFileSync(resultsFile, JSON.stringify({ ...others, eval: { stale: true } }));
    const docFile = path.join(dir, 'e-invoices.md');
    copyFileSync(path.join(REPO_ROOT, 'docs', 'e-invoices.md'), docFile);

    const section = await runEval({
      folder: DEFAULT_EVAL_FOLDER,
      resultsFile,
      docFile,
      gemini: answering(emptyAnalysis()),
      now: new Date('2026-11-30T12:00:00Z'),
    });

    const written = JSON.parse(readFileSync(resultsFile, 'utf8')) as Record<string, unknown>;
    expect(written).toEqual({ ...others, eval: section });
    expect(written.eval).toMatchObject({
      documents: 7,
      fields: expect.any(Number),
      byField: expect.objectContaining({ total_amount: expect.objectContaining({ fields: 7 }) }),
      accuracy: expect.any(Number),
      gemini: expect.objectContaining({ analyzer: 'gemini', accuracy: 0 }),
    });
    const figures = EVAL_FIGURES.in(readFileSync(docFile, 'utf8'));
    expect(figures).toBe(renderEvalFigures(section, 1.45));
    expect(figures).toContain('| field | offline | gemini (fixed) |');
    expect(figures).toContain('$1.45 per 1,000 invoices');
  });
});

describe('Gemini in the eval', () => {
  it('is measured only when GEMINI_API_KEY is set, on the PDFs themselves', async () => {
    expect(await geminiFromEnvironment({})).toBeUndefined();
    const fake = await startFakeGemini();
    try {
      // Node's fetch: jest's vm lacks the dispatcher the SDK's own would use (see gemini-analyzer.test.ts).
      const gemini = await geminiFromEnvironment(
        { GEMINI_API_KEY: 'test-key', GEMINI_BASE_URL: fake.url },
        (...args) => fetch(...args),
      );
      const pdfs = pdfsIn(DEFAULT_EVAL_FOLDER).slice(0, 2);
      const scores = await evaluate(gemini!, pdfs, 'gemini');
      expect(scores).toMatchObject({ analyzer: 'gemini', documents: 2 });
      expect(fake.requests).toHaveLength(2);
      const part = fake.requests[0]!.body.contents?.[0]?.parts?.find((p) => 'inlineData' in p);
      expect(part).toMatchObject({ inlineData: { mimeType: 'application/pdf' } });
    } finally {
      await fake.stop();
    }
  });
});

describe('docs/e-invoices.md', () => {
  it('shows the figures generated from bench/results.json', () => {
    const results = JSON.parse(readFileSync(path.join(REPO_ROOT, 'bench', 'results.json'), 'utf8'));
    const doc = readFileSync(path.join(REPO_ROOT, 'docs', 'e-invoices.md'), 'utf8');
    expect(results.eval).toBeDefined();
    expect(EVAL_FIGURES.in(doc)).toBe(renderEvalFigures(results.eval, results.costModel?.gemini?.usd));
  });
});
