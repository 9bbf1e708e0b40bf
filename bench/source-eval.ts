/**
 * The offline analyzer scored per source (text PDF, scan, photo, text file) on corpora it was not
 * written against:
 * - tuning: invoice2data's `tests/compare` invoices (MIT; real invoices of Amazon Web Services,
 *   Coolblue, Flipkart, Free, OYO, Netpresse, QualityHosting, Saeco...), scored against the
 *   values that project's own test expects (bench/corpus/invoice2data/*.json);
 * - held-out: ZUGFeRD/corpus PDFs of six producers (Apache-2.0; German, French and English
 *   layouts), scored against the XML each one carries (read by the e-invoice reader, never shown
 *   to the analyzer). Nothing in the parsers was tuned on them;
 * - samples: the repository's own plain-text invoices (samples/invoices/*.txt, samples/expected.json).
 * Scans and photos are made from the text PDFs by bench/scans.ts, so every source reads the same
 * invoices and only the way they reached the analyzer differs.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { En16931Reader } from '../worker/src/adapters/e-invoice/en16931-reader';
import type { Analysis } from '../worker/src/contract/analysis';
import type { Analyzer } from '../worker/src/core/ports';
import { fieldMatches, SCORED_FIELDS, type ScoredField } from './e-invoice-eval';
import { photoOf, scanOf } from './scans';

export const CORPUS_ROOT = path.join(__dirname, 'corpus');
const SAMPLES = path.join(__dirname, '..', 'samples');

export const SOURCES = ['text-pdf', 'scan', 'photo', 'text-file'] as const;
export type Source = (typeof SOURCES)[number];
export const CORPORA = ['tuning', 'heldOut', 'samples'] as const;
export type Corpus = (typeof CORPORA)[number];

/** Goals of the issue: held-out text PDFs, and scans and photos of the same invoices. */
export const SOURCE_GOALS = Object.freeze({ textPdf: 0.75, scansAndPhotos: 0.6 });

/** Where each corpus comes from, for the docs and the results. */
export const CORPUS_INFO: Record<Corpus, { name: string; licence: string; origin: string }> = {
  tuning: {
    name: 'invoice2data tests/compare',
    licence: 'MIT',
    origin: 'github.com/invoice-x/invoice2data @ bd2fcce, tests/compare/*.pdf and their expected *.json',
  },
  heldOut: {
    name: 'ZUGFeRD corpus',
    licence: 'Apache-2.0',
    origin: 'github.com/ZUGFeRD/corpus @ 47b61be, ZUGFeRDv1/v2 correct/ (16 PDFs, six producers)',
  },
  samples: { name: 'docline samples', licence: 'Apache-2.0', origin: 'samples/invoices/*.txt (synthetic)' },
};

/** One invoice with what it states. */
export interface Truth {
  document: string;
  pdf?: Buffer;
  text?: Buffer;
  stated: Partial<Analysis>;
}

export interface SourceScores {
  documents: number;
  fields: number;
  correct: number;
  accuracy: number;
  byField: Record<string, { fields: number; correct: number }>;
  /** How many reads OCR marked low-confidence. */
  lowConfidence: number;
  misses: Array<{ document: string; field: ScoredField; stated: unknown; read: unknown }>;
}

/** The `eval.bySource` section: scores per source, then per corpus. */
export type BySource = Partial<Record<Source, Partial<Record<Corpus, SourceScores>>>> & {
  corpora: typeof CORPUS_INFO;
  goals: typeof SOURCE_GOALS;
};

/** invoice2data's expected values, in the analysis' terms (fields it does not state are not scored). */
export function invoice2dataTruth(expected: Record<string, unknown>): Partial<Analysis> {
  const stated: Partial<Analysis> = {};
  const text = (v: unknown) => (typeof v === 'string' && v.trim() !== '' ? v : undefined);
  const amount = (v: unknown) => (typeof v === 'number' ? v : undefined);
  const set = <K extends keyof Analysis>(field: K, value: Analysis[K] | undefined) => {
    if (value !== undefined) stated[field] = value;
  };
  set('invoice_number', text(expected.invoice_number)?.replace(/^#/u, ''));
  set('issue_date', text(expected.date));
  set('due_date', text(expected.date_due));
  set('currency', text(expected.currency));
  set('total_amount', amount(expected.amount));
  set('net_amount', amount(expected.amount_untaxed));
  set('tax_amount', amount(expected.amount_tax));
  set('supplier_vat_id', text(expected.vat)?.replace(/\s/gu, ''));
  set('supplier_name', text(expected.partner_name));
  return stated;
}

/** The tuning corpus: each PDF with its JSON. */
export function tuningCorpus(root = path.join(CORPUS_ROOT, 'invoice2data')): Truth[] {
  return readdirSync(root)
    .filter((f) => f.endsWith('.pdf'))
    .sort()
    .map((file) => {
      const json = JSON.parse(readFileSync(path.join(root, file.replace(/\.pdf$/u, '.json')), 'utf8'));
      const expected = (Array.isArray(json) ? json[0] : json) as Record<string, unknown>;
      return {
        document: file,
        pdf: readFileSync(path.join(root, file)),
        stated: invoice2dataTruth(expected),
      };
    });
}

/** The held-out corpus: each PDF with what its XML states (PDFs whose XML cannot be read are left out). */
export async function heldOutCorpus(root = path.join(CORPUS_ROOT, 'zugferd')): Promise<Truth[]> {
  const reader = new En16931Reader();
  const truths: Truth[] = [];
  for (const file of readdirSync(root)
    .filter((f) => f.endsWith('.pdf'))
    .sort()) {
    const pdf = readFileSync(path.join(root, file));
    const reading = await reader.read({ bytes: pdf, contentType: 'application/pdf', name: file });
    if (reading.kind === 'read') truths.push({ document: file, pdf, stated: reading.result.analysis });
  }
  return truths;
}

/** The samples' plain-text invoices with their expectations. */
export function sampleTexts(): Truth[] {
  const expected = JSON.parse(readFileSync(path.join(SAMPLES, 'expected.json'), 'utf8')) as Record<
    string,
    Analysis
  >;
  return Object.keys(expected)
    .filter((file) => file.endsWith('.txt'))
    .map((file) => ({
      document: file,
      text: readFileSync(path.join(SAMPLES, file)),
      stated: expected[file]!,
    }));
}

/** The bytes and content type a source gives the analyzer for one invoice. */
async function input(
  truth: Truth,
  source: Source,
): Promise<{ bytes: Buffer; contentType: string } | undefined> {
  if (source === 'text-file')
    return truth.text ? { bytes: truth.text, contentType: 'text/plain' } : undefined;
  if (!truth.pdf) return undefined;
  if (source === 'text-pdf') return { bytes: truth.pdf, contentType: 'application/pdf' };
  if (source === 'scan') return { bytes: await scanOf(truth.pdf), contentType: 'application/pdf' };
  return { bytes: await photoOf(truth.pdf), contentType: 'image/jpeg' };
}

/** Scores `analyzer` on `truths` as `source` gives them. */
export async function scoreSource(
  analyzer: Analyzer,
  truths: readonly Truth[],
  source: Source,
): Promise<SourceScores> {
  const scores: SourceScores = {
    documents: 0,
    fields: 0,
    correct: 0,
    accuracy: 0,
    byField: {},
    lowConfidence: 0,
    misses: [],
  };
  for (const truth of truths) {
    const given = await input(truth, source);
    if (!given) continue;
    const result = await analyzer.analyze({ ...given, name: truth.document });
    if (result.model.endsWith(':low-confidence')) scores.lowConfidence += 1;
    scores.documents += 1;
    const stated = { ...result.analysis, ...truth.stated } as Analysis;
    for (const field of SCORED_FIELDS) {
      if (truth.stated[field] === undefined || truth.stated[field] === null) continue;
      const score = (scores.byField[field] ??= { fields: 0, correct: 0 });
      score.fields += 1;
      scores.fields += 1;
      if (fieldMatches(field, stated, result.analysis)) {
        score.correct += 1;
        scores.correct += 1;
      } else {
        scores.misses.push({
          document: truth.document,
          field,
          stated: stated[field],
          read: result.analysis[field],
        });
      }
    }
  }
  scores.accuracy = scores.fields === 0 ? 0 : Math.round((scores.correct / scores.fields) * 10_000) / 10_000;
  return scores;
}

/** Every source on every corpus it applies to. */
export async function evaluateBySource(
  analyzer: Analyzer,
  options: { sources?: readonly Source[]; progress?: (line: string) => void } = {},
): Promise<BySource> {
  const sources = options.sources ?? SOURCES;
  const corpora: Record<Corpus, Truth[]> = {
    tuning: tuningCorpus(),
    heldOut: await heldOutCorpus(),
    samples: sampleTexts(),
  };
  const result: BySource = { corpora: CORPUS_INFO, goals: SOURCE_GOALS };
  for (const source of sources) {
    for (const corpus of CORPORA) {
      const truths = corpora[corpus].filter((t) => (source === 'text-file' ? t.text : t.pdf));
      if (truths.length === 0) continue;
      const scores = await scoreSource(analyzer, truths, source);
      (result[source] ??= {})[corpus] = scores;
      options.progress?.(
        `${source.padEnd(9)} ${corpus.padEnd(8)} ${scores.correct}/${scores.fields} fields of ${scores.documents} documents (${(scores.accuracy * 100).toFixed(1)} %)`,
      );
    }
  }
  return result;
}
