/**
 * The offline analyzer scored per source (text PDF, scan, photo, text file) on corpora it was not
 * written against:
 * - tuning: invoice2data's `tests/compare` invoices (MIT; real invoices of Amazon Web Services,
 *   Coolblue, Flipkart, Free, OYO, Netpresse, QualityHosting, Saeco...), scored against the
 *   values that project's own test expects (bench/corpus/invoice2data/*.json), and 36
 *   ZUGFeRD/corpus PDFs of seven producers (bench/corpus/zugferd-tuning), scored against their XML;
 * - held-out: fourteen other ZUGFeRD/corpus PDFs (XML-Rechnung/FX, Apache-2.0, German), scored
 *   against the XML each one carries (read by the e-invoice reader, never shown to the analyzer).
 *   Only their scores are looked at: their text and misses are never read to write rules;
 * - samples: the repository's own plain-text invoices (samples/invoices/*.txt, samples/expected.json).
 * Scans and photos are made from the text PDFs by bench/scans.ts, so every source reads the same
 * invoices and only the way they reached the analyzer differs.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Analysis } from '../worker/src/contract/analysis';
import type { Analyzer } from '../worker/src/core/ports';
import {
  CONFIDENCE_FIELDS,
  type ConfidenceField,
  fieldConfidences,
  sourceOfModel,
} from '../worker/src/core/review';
import type { CalibratedSource, ConfidencePoint } from './calibration';
import {
  fieldMatches,
  type Miss,
  pdfsIn,
  percent,
  SCORED_FIELDS,
  type Truth,
  tally,
  totals,
  xmlTruths,
} from './e-invoice-eval';
import { figuresBlock } from './results-file';
import { photographed, scanOf } from './scans';

export const CORPUS_ROOT = path.join(__dirname, 'corpus');
const SAMPLES = path.join(__dirname, '..', 'samples');

export const SOURCES = ['text-pdf', 'scan', 'photo', 'text-file'] as const;
export type Source = (typeof SOURCES)[number];
export const CORPORA = ['tuning', 'heldOut', 'samples'] as const;
export type Corpus = (typeof CORPORA)[number];

/** Goals of the evaluation: held-out text PDFs, and scans and photos of the same invoices. */
export const SOURCE_GOALS = Object.freeze({ textPdf: 0.75, scansAndPhotos: 0.6 });

/** Where each corpus comes from, for the docs and the results. */
export const CORPUS_INFO: Record<Corpus, { name: string; licence: string; origin: string }> = {
  tuning: {
    name: 'invoice2data tests/compare + ZUGFeRD corpus (part)',
    licence: 'MIT; Apache-2.0',
    origin:
      'invoice-x/invoice2data @ bd2fcce tests/compare (11 PDFs, expected *.json); ZUGFeRD/corpus @ 47b61be ZUGFeRDv1-v2/correct (29 PDFs: Mustang, intarsys, symtrax, 4s4u, Konik, FNFE-MPE) and XML-Rechnung/FX (7 PDFs whose business cases are not held-out)',
  },
  heldOut: {
    name: 'ZUGFeRD corpus XML-Rechnung/FX',
    licence: 'Apache-2.0',
    origin: 'ZUGFeRD/corpus @ 47b61be XML-Rechnung/FX (14 PDFs)',
  },
  samples: { name: 'docline samples', licence: 'Apache-2.0', origin: 'samples/invoices/*.txt (synthetic)' },
};

export interface SourceScores {
  documents: number;
  fields: number;
  correct: number;
  accuracy: number;
  byField: Record<string, { fields: number; correct: number }>;
  /** How many reads OCR marked low-confidence. */
  lowConfidence: number;
  misses: Miss[];
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
  return pdfsIn(root).map((file) => {
    const json = JSON.parse(readFileSync(file.replace(/\.pdf$/u, '.json'), 'utf8'));
    const expected = (Array.isArray(json) ? json[0] : json) as Record<string, unknown>;
    return { document: path.basename(file), pdf: readFileSync(file), stated: invoice2dataTruth(expected) };
  });
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
  return photographed(truth.pdf);
}

/** Where {@link scoreSource} puts one {@link ConfidencePoint} per scored confidence field. */
export interface PointSink {
  corpus: Corpus;
  points: ConfidencePoint[];
}

/** Scores `analyzer` on `truths` as `source` gives them; with `sink`, keeps each field's confidence. */
export async function scoreSource(
  analyzer: Analyzer,
  truths: readonly Truth[],
  source: Source,
  sink?: PointSink,
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
    const confidences = fieldConfidences(result);
    for (const field of sink ? CONFIDENCE_FIELDS : []) {
      if (truth.stated[field] === undefined || truth.stated[field] === null) continue;
      const assessed = confidences[field as ConfidenceField];
      const rowSource = sourceOfModel(result.model);
      sink!.points.push({
        source: (assessed?.source ?? rowSource) as CalibratedSource,
        corpus: sink!.corpus,
        input: source,
        role: sink!.corpus === 'heldOut' ? 'heldOut' : 'tuning',
        document: truth.document,
        field,
        confidence: assessed?.confidence ?? null,
        ...(assessed ? { how: assessed.how } : {}),
        right: fieldMatches(field, stated, result.analysis),
      });
    }
    tally(scores.byField, scores.misses, truth, result.analysis);
  }
  return { ...scores, ...totals(scores.byField) };
}

/** Every source on every corpus it applies to. */
/** The corpora of {@link evaluateBySource}, read once. */
export async function evalCorpora(): Promise<Record<Corpus, Truth[]>> {
  return {
    tuning: [...tuningCorpus(), ...(await xmlTruths(pdfsIn(path.join(CORPUS_ROOT, 'zugferd-tuning'))))],
    heldOut: await xmlTruths(pdfsIn(path.join(CORPUS_ROOT, 'zugferd-held-out'))),
    samples: sampleTexts(),
  };
}

export async function evaluateBySource(
  analyzer: Analyzer,
  options: {
    sources?: readonly Source[];
    progress?: (line: string) => void;
    /** Collects each scored field's confidence (bench/calibration.ts). */
    points?: ConfidencePoint[];
  } = {},
): Promise<BySource> {
  const sources = options.sources ?? SOURCES;
  const corpora = await evalCorpora();
  const result: BySource = { corpora: CORPUS_INFO, goals: SOURCE_GOALS };
  for (const source of sources) {
    for (const corpus of CORPORA) {
      const truths = corpora[corpus].filter((t) => (source === 'text-file' ? t.text : t.pdf));
      if (truths.length === 0) continue;
      const sink = options.points ? { corpus, points: options.points } : undefined;
      const scores = await scoreSource(analyzer, truths, source, sink);
      result[source] = { ...result[source], [corpus]: scores };
      options.progress?.(
        `${source.padEnd(9)} ${corpus.padEnd(8)} ${scores.correct}/${scores.fields} fields of ${scores.documents} documents (${(scores.accuracy * 100).toFixed(1)} %)`,
      );
    }
  }
  return result;
}

const SOURCE_NAMES: Record<Source, string> = {
  'text-pdf': 'text PDF',
  scan: 'scan (image-only PDF)',
  photo: 'phone photo (JPEG; a PDF of photos past one page)',
  'text-file': 'text file',
};
const CORPUS_NAMES: Record<Corpus, string> = { tuning: 'tuning', heldOut: 'held-out', samples: 'samples' };

/** The markdown docs/analysis.md shows between its analysis-figures markers. */
export function renderSourceFigures(bySource: BySource, date: string): string {
  const rows: string[] = [];
  for (const source of SOURCES) {
    for (const corpus of CORPORA) {
      const scores = bySource[source]?.[corpus];
      if (!scores) continue;
      rows.push(
        `| ${SOURCE_NAMES[source]} | ${CORPUS_NAMES[corpus]} | ${scores.documents} | ${scores.correct}/${scores.fields} | ${percent(scores.accuracy)} | ${scores.lowConfidence} |`,
      );
    }
  }
  const heldOutText = bySource['text-pdf']?.heldOut;
  const pictures = (['scan', 'photo'] as const)
    .map((s) => bySource[s]?.heldOut)
    .filter((s) => s !== undefined);
  const pictureCorrect = pictures.reduce((sum, s) => sum + s.correct, 0);
  const pictureFields = pictures.reduce((sum, s) => sum + s.fields, 0);
  const goal = (share: number | undefined, target: number) =>
    share === undefined
      ? 'not measured'
      : `${percent(share)} against a goal of ${percent(target)}: ${share >= target ? 'met' : '**missed**'}`;
  const fields = SCORED_FIELDS.filter((f) => SOURCES.some((s) => bySource[s]?.heldOut?.byField[f]));
  const fieldRows = fields.map((field) => {
    const cells = (['text-pdf', 'scan', 'photo'] as const).map((source) => {
      const score = bySource[source]?.heldOut?.byField[field];
      return score ? `${score.correct}/${score.fields}` : 'n/a';
    });
    return `| \`${field}\` | ${cells.join(' | ')} |`;
  });
  return [
    `Measured ${date.slice(0, 10)}. Held-out text PDFs: ${goal(heldOutText?.accuracy, bySource.goals.textPdf)}. ` +
      `Held-out scans and photos: ${goal(pictureFields === 0 ? undefined : pictureCorrect / pictureFields, bySource.goals.scansAndPhotos)}.`,
    '',
    '| source | corpus | documents | fields read right | share | low-confidence reads |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
    'Per field, held-out corpus:',
    '',
    '| field | text PDF | scan | photo |',
    '|---|---|---|---|',
    ...fieldRows,
  ].join('\n');
}

/** The block of docs/analysis.md that shows the figures. */
export const SOURCE_FIGURES = figuresBlock('analysis-figures', 'npm run eval', 'docs/analysis.md');

/** The scores as results.json keeps them: misses capped, so the file stays readable. */
export function forResults(bySource: BySource, maxMisses = 15): BySource {
  const copy: BySource = { ...bySource };
  for (const source of SOURCES) {
    const corpora = bySource[source];
    if (!corpora) continue;
    copy[source] = Object.fromEntries(
      Object.entries(corpora).map(([corpus, scores]) => [
        corpus,
        { ...scores, misses: scores.misses.slice(0, maxMisses) },
      ]),
    );
  }
  return copy;
}
