import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { En16931Reader } from '../worker/src/adapters/e-invoice/en16931-reader';
import type { Analysis } from '../worker/src/contract/analysis';
import type { Analyzer } from '../worker/src/core/ports';
import { figuresBlock } from './results-file';

/**
 * Ground truth for the visual analysis. A Factur-X PDF states its data twice: in its picture and
 * in its XML. An analyzer reads the picture (the PDF as it is; the XML is never shown to it) and
 * each field it returns is scored against what the XML states, read by the e-invoice reader.
 */

/** The fields scored: every field of the analysis that an EN 16931 XML states. */
export const SCORED_FIELDS = [
  'document_type',
  'invoice_number',
  'issue_date',
  'due_date',
  'currency',
  'supplier_name',
  'supplier_vat_id',
  'supplier_siren',
  'supplier_siret',
  'customer_name',
  'net_amount',
  'tax_amount',
  'total_amount',
] as const satisfies ReadonlyArray<keyof Analysis>;

export type ScoredField = (typeof SCORED_FIELDS)[number];

/** The share of fields an analyzer must read right on the French Factur-X visuals (the offline one). */
export const EVAL_GOAL = 0.9;

/** Legal forms a name may carry in its picture but not in its XML ("Au bon moulin SARL" / "Au bon moulin"). */
const LEGAL_FORMS = [
  'sarl',
  'sas',
  'sasu',
  'sa',
  'eurl',
  'sci',
  'snc',
  'scop',
  'gmbh & co. kg',
  'gmbh & co kg',
  'gmbh',
  'ag',
  'kg',
  'ltd',
  'limited',
  'llc',
  'inc',
  'plc',
  'bv',
  'nv',
  'srl',
  'spa',
  'sl',
];

/** A name as compared: case, spacing, punctuation at the ends and a trailing legal form set aside. */
export function comparableName(name: string): string {
  let s = name.normalize('NFC').toLowerCase().replace(/\s+/gu, ' ').trim();
  s = s.replace(/[\s.,;:]+$/u, '');
  for (const form of LEGAL_FORMS) {
    if (s.endsWith(` ${form}`) || s.endsWith(`, ${form}`)) {
      s = s.slice(0, -form.length).replace(/[\s,]+$/u, '');
      break;
    }
  }
  return s;
}

/**
 * Whether the analyzer's value is the XML's. Amounts within half a cent; a credit note's amounts
 * without their sign (the row keeps a minus sign its picture prints, the XML states them
 * positive); names as {@link comparableName}; identifiers without spaces; the rest exactly.
 */
export function fieldMatches(field: ScoredField, stated: Analysis, read: Analysis): boolean {
  const want = stated[field];
  const got = read[field];
  if (got === null || got === undefined) return false;
  if (typeof want === 'number') {
    if (typeof got !== 'number') return false;
    const credit = stated.document_type === 'credit_note';
    return Math.abs((credit ? Math.abs(want) : want) - (credit ? Math.abs(got) : got)) < 0.005;
  }
  if (field === 'supplier_name' || field === 'customer_name') {
    return comparableName(String(want)) === comparableName(String(got));
  }
  if (field === 'supplier_vat_id' || field === 'supplier_siren' || field === 'supplier_siret') {
    return String(want).replace(/\s/gu, '').toUpperCase() === String(got).replace(/\s/gu, '').toUpperCase();
  }
  return want === got;
}

export interface FieldScore {
  fields: number;
  correct: number;
  accuracy: number;
}

export interface Miss {
  document: string;
  field: ScoredField;
  stated: unknown;
  read: unknown;
}

/** One analyzer's scores over a folder. */
export interface EvalScores {
  analyzer: string;
  model: string;
  documents: number;
  fields: number;
  correct: number;
  accuracy: number;
  byField: Record<string, FieldScore>;
  /** PDFs given whose XML could not be read (not scored), with why. */
  skipped: Array<{ document: string; why: string }>;
  misses: Miss[];
}

const ratio = (correct: number, fields: number) =>
  fields === 0 ? 0 : Math.round((correct / fields) * 10_000) / 10_000;

/** One invoice with what it states. */
export interface Truth {
  document: string;
  pdf?: Buffer;
  text?: Buffer;
  stated: Partial<Analysis>;
}

/** Each PDF with what its XML states; those whose XML cannot be read go to `skipped`, with why. */
export async function xmlTruths(
  pdfs: readonly string[],
  skipped: EvalScores['skipped'] = [],
): Promise<Truth[]> {
  const reader = new En16931Reader();
  const truths: Truth[] = [];
  for (const file of pdfs) {
    const pdf = readFileSync(file);
    const document = path.basename(file);
    const reading = await reader.read({ bytes: pdf, contentType: 'application/pdf', name: document });
    if (reading.kind === 'read') truths.push({ document, pdf, stated: reading.result.analysis });
    else
      skipped.push({
        document,
        why: reading.kind === 'fallback' ? reading.detail : 'no e-invoice XML attached',
      });
  }
  return truths;
}

/** Counts one document's scored fields (those its truth states) into `byField`, its misses into `misses`. */
export function tally(
  byField: Record<string, { fields: number; correct: number }>,
  misses: Miss[],
  truth: Truth,
  read: Analysis,
): void {
  const stated = { ...read, ...truth.stated } as Analysis;
  for (const field of SCORED_FIELDS) {
    if (truth.stated[field] === undefined || truth.stated[field] === null) continue;
    byField[field] ??= { fields: 0, correct: 0 };
    const score = byField[field];
    score.fields += 1;
    if (fieldMatches(field, stated, read)) score.correct += 1;
    else misses.push({ document: truth.document, field, stated: stated[field], read: read[field] });
  }
}

/** The fields scored and read right over all of `byField`. */
export const totals = (byField: Record<string, { fields: number; correct: number }>) => {
  const scores = Object.values(byField);
  const fields = scores.reduce((sum, s) => sum + s.fields, 0);
  const correct = scores.reduce((sum, s) => sum + s.correct, 0);
  return { fields, correct, accuracy: ratio(correct, fields) };
};

/** The PDFs of a folder, sorted. */
export function pdfsIn(folder: string): string[] {
  return readdirSync(folder)
    .filter((file) => file.toLowerCase().endsWith('.pdf'))
    .sort()
    .map((file) => path.join(folder, file));
}

/** Scores `analyzer` on the visual layer of each Factur-X PDF against its own XML. */
export async function evaluate(
  analyzer: Analyzer,
  pdfs: readonly string[],
  label: string,
): Promise<EvalScores> {
  const skipped: EvalScores['skipped'] = [];
  const truths = await xmlTruths(pdfs, skipped);
  const byField: Record<string, { fields: number; correct: number }> = {};
  const misses: Miss[] = [];
  let model = '';
  for (const truth of truths) {
    const result = await analyzer.analyze({
      bytes: truth.pdf!,
      contentType: 'application/pdf',
      name: truth.document,
    });
    model = result.model;
    tally(byField, misses, truth, result.analysis);
  }
  return {
    analyzer: label,
    model,
    documents: truths.length,
    ...totals(byField),
    byField: Object.fromEntries(
      SCORED_FIELDS.filter((f) => byField[f]).map((f) => {
        const { fields, correct } = byField[f]!;
        return [f, { fields, correct, accuracy: ratio(correct, fields) }];
      }),
    ),
    skipped,
    misses,
  };
}

/** The `eval` section of bench/results.json: the offline analyzer's scores on top, Gemini's beside. */
export interface EvalSection extends EvalScores {
  date: string;
  /** The folder scored, relative to the repository. */
  folder: string;
  goal: number;
  met: boolean;
  gemini?: EvalScores;
  /** The offline analyzer per source and corpus (bench/source-eval.ts), when measured. */
  bySource?: import('./source-eval').BySource;
}

export const percent = (n: number) => `${(n * 100).toFixed(1)} %`;

/** The markdown that docs/e-invoices.md shows between its eval-figures markers. */
export function renderEvalFigures(section: EvalSection, geminiUsdPer1000: number | undefined): string {
  const analyzers = [section as EvalScores, ...(section.gemini ? [section.gemini] : [])];
  const name = (a: EvalScores) =>
    a.model && a.model !== a.analyzer ? `${a.analyzer} (${a.model})` : a.analyzer;
  const header = `| field | ${analyzers.map(name).join(' | ')} |`;
  const rows = SCORED_FIELDS.filter((f) => section.byField[f]).map((field) => {
    const cells = analyzers.map((a) => {
      const s = a.byField[field];
      return s ? `${s.correct}/${s.fields}` : 'n/a';
    });
    return `| \`${field}\` | ${cells.join(' | ')} |`;
  });
  const total = `| **all fields** | ${analyzers.map((a) => `**${a.correct}/${a.fields} (${percent(a.accuracy)})**`).join(' | ')} |`;
  const lines = [
    `Measured ${section.date.slice(0, 10)} on ${section.documents} Factur-X PDFs of \`${section.folder}\`: ` +
      `the offline analyzer reads ${percent(section.accuracy)} of the fields their XML states ` +
      `(goal ${percent(section.goal)}: ${section.met ? 'met' : '**missed**'}).` +
      (section.gemini ? '' : ' Gemini was not measured (no `GEMINI_API_KEY`).'),
    '',
    header,
    `|---|${analyzers.map(() => '---').join('|')}|`,
    ...rows,
    total,
  ];
  if (geminiUsdPer1000 !== undefined) {
    lines.push(
      '',
      `Cost saved: every e-invoice read from its structure is an analysis not paid, ` +
        `$${geminiUsdPer1000.toFixed(2)} per 1,000 invoices at the cost model's Gemini prices and tokens.`,
    );
  }
  return lines.join('\n');
}

/** The block of docs/e-invoices.md that shows the figures. */
export const EVAL_FIGURES = figuresBlock('eval-figures', 'npm run eval', 'docs/e-invoices.md');
