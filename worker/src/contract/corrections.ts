import { createHash } from 'node:crypto';
import { AnalysisSchema } from './analysis';
import { type Column, KEY_DAY_COLUMN } from './row';

/**
 * A correction: what an accountant changed in one field of one row, kept beside the rows, never in
 * them. It is keyed by the row's dedup key, never makes a second raw row and never updates one;
 * the `documents` view applies the latest correction of each field (contract/views.ts) and keeps the
 * analysed value readable (`original_analysis`). A review reason that names no correctable field is
 * closed by a "dealt with" mark: a correction whose `field` is the reason and whose value is
 * {@link DEALT_WITH}, with a why. One definition feeds the SQLite DDL, the BigQuery table
 * (infra/components/warehouse.ts) and the stores.
 */

export const CORRECTIONS_TABLE = 'corrections';

export const CORRECTION_COLUMNS = [
  {
    name: 'correction_id',
    type: 'STRING',
    mode: 'REQUIRED',
    description:
      'SHA-256 of (dedup_key, field, value, replaces): the same correction made twice (a retried request, a second tab) is one.',
  },
  {
    name: 'dedup_key',
    type: 'STRING',
    mode: 'REQUIRED',
    description: 'The dedup key of the row corrected (one row per key in the documents view).',
  },
  {
    name: 'field',
    type: 'STRING',
    mode: 'REQUIRED',
    description:
      'The analysis field corrected (supplier_name, invoice_number, total_amount...), or the review reason marked dealt with (e_invoice_invalid, picture_xml_disagree:seller).',
  },
  {
    name: 'value',
    type: 'STRING',
    mode: 'REQUIRED',
    description:
      'The new value as JSON text ("F-2026-0142", 1234.56, null); the same as the analysed value confirms it. A mark: "dealt_with".',
  },
  {
    name: 'replaces',
    type: 'STRING',
    mode: 'NULLABLE',
    description:
      "The correction_id of the field's latest correction when this one was made; null: made over the analysed value.",
  },
  { name: 'corrected_by', type: 'STRING', mode: 'REQUIRED', description: 'Who made the correction.' },
  {
    name: 'corrected_at',
    type: 'TIMESTAMP',
    mode: 'REQUIRED',
    description: "When it was made; a field's latest correction wins (ties: the greater correction_id).",
  },
  {
    name: 'why',
    type: 'STRING',
    mode: 'NULLABLE',
    description: 'Why, in the words of who made it (a mark always has one).',
  },
] as const satisfies readonly Column[];

export type CorrectionColumn = (typeof CORRECTION_COLUMNS)[number]['name'];
export const CORRECTION_COLUMN_NAMES: readonly CorrectionColumn[] = CORRECTION_COLUMNS.map((c) => c.name);

/** The fields a correction may change: the analysis' values, not its language or line items. */
export const CORRECTABLE_FIELDS = [
  'document_type',
  'supplier_name',
  'supplier_vat_id',
  'supplier_siren',
  'supplier_siret',
  'customer_name',
  'invoice_number',
  'issue_date',
  'due_date',
  'currency',
  'net_amount',
  'tax_amount',
  'total_amount',
] as const;
export type CorrectableField = (typeof CORRECTABLE_FIELDS)[number];

/**
 * A review reason no correction of a field can close (core/review.ts names the reasons): the
 * e-invoice failed its EN 16931 validation, or its picture and XML disagree on something that is not
 * a correctable field (the seller). A person closes it by marking it dealt with.
 */
export type MarkableReason = 'e_invoice_invalid' | `picture_xml_disagree:${string}`;

/** The markable reasons the worker gives today (see {@link isMarkableReason} for the rule). */
export const MARKABLE_REASONS = [
  'e_invoice_invalid',
  'picture_xml_disagree:seller',
] as const satisfies readonly MarkableReason[];

/** The value of a mark: the reason was dealt with (the why says how). */
export const DEALT_WITH = 'dealt_with';

/** Whether `reason` names no correctable field, so that only a mark closes it. */
export function isMarkableReason(reason: string): reason is MarkableReason {
  if (reason === 'e_invoice_invalid') return true;
  const about = /^picture_xml_disagree:([a-z][a-z_]*)$/u.exec(reason)?.[1];
  return about !== undefined && !(CORRECTABLE_FIELDS as readonly string[]).includes(about);
}

/** What a correction record is about: a correctable field, or a reason marked dealt with. */
export type CorrectionField = CorrectableField | MarkableReason;

/** One correction as stored. `value` is the JSON text of the new value (a mark's: `"dealt_with"`). */
export interface Correction {
  correction_id: string;
  dedup_key: string;
  field: CorrectionField;
  value: string;
  replaces: string | null;
  corrected_by: string;
  corrected_at: string;
  why: string | null;
}

/** What someone asks to change; the id and the time are the store's to add. */
export interface CorrectionRequest {
  dedupKey: string;
  field: string;
  value: unknown;
  /** The correction the person saw as the field's latest (null: the analysed value). */
  replaces: string | null;
  by: string;
  why?: string | null;
}

/** A request that cannot be a correction, with why in words. */
export class InvalidCorrectionError extends Error {
  override readonly name = 'InvalidCorrectionError';
}

/** The id that makes a correction idempotent: the same change of the same state is one record. */
export function correctionId(
  dedupKey: string,
  field: string,
  value: string,
  replaces: string | null,
): string {
  return createHash('sha256')
    .update(JSON.stringify([dedupKey, field, value, replaces]))
    .digest('hex');
}

/**
 * Checks a request and builds the record; throws {@link InvalidCorrectionError}. A correctable
 * field's value is checked against the analysis schema; a markable reason's value must be
 * {@link DEALT_WITH}, and a mark needs a why (nothing else records how the reason was dealt with).
 */
export function correctionOf(request: CorrectionRequest, now: Date): Correction {
  const { dedupKey, field, value } = request;
  if (typeof dedupKey !== 'string' || dedupKey === '')
    throw new InvalidCorrectionError('a correction needs the dedup key of its row');
  const mark = isMarkableReason(field);
  if (!mark && !(CORRECTABLE_FIELDS as readonly string[]).includes(field))
    throw new InvalidCorrectionError(
      `${field} cannot be corrected (one of: ${CORRECTABLE_FIELDS.join(', ')}; or marked ${DEALT_WITH}: ${MARKABLE_REASONS.join(', ')})`,
    );
  let data: unknown = value;
  if (mark) {
    if (value !== DEALT_WITH)
      throw new InvalidCorrectionError(
        `${field} names no field to correct: it is marked ${JSON.stringify(DEALT_WITH)}, not given ${JSON.stringify(value)}`,
      );
  } else {
    const checked = AnalysisSchema.shape[field as CorrectableField].safeParse(value);
    if (!checked.success)
      throw new InvalidCorrectionError(
        `${JSON.stringify(value)} is not a value of ${field}: ${checked.error.issues[0]?.message ?? 'invalid'}`,
      );
    data = checked.data;
  }
  const by = typeof request.by === 'string' ? request.by.trim() : '';
  if (by === '') throw new InvalidCorrectionError('a correction says who made it');
  const why = typeof request.why === 'string' && request.why.trim() !== '' ? request.why.trim() : null;
  if (mark && why === null)
    throw new InvalidCorrectionError(`marking ${field} dealt with needs a why (how it was dealt with)`);
  const text = JSON.stringify(data);
  const replaces = request.replaces ?? null;
  return {
    correction_id: correctionId(dedupKey, field, text, replaces),
    dedup_key: dedupKey,
    field: field as CorrectionField,
    value: text,
    replaces,
    corrected_by: by,
    corrected_at: now.toISOString(),
    why,
  };
}

/** What writing a correction did. */
export type CorrectionOutcome =
  /** Recorded now. */
  | { status: 'recorded'; correction: Correction }
  /** The same correction was already there: nothing written. */
  | { status: 'already'; correction: Correction }
  /** The field was corrected meanwhile (its latest is not what the request replaces): nothing written. */
  | { status: 'conflict'; latest: Correction | null };

/** The latest correction of each field (or mark of each reason) among `corrections` (latest `corrected_at`, then greatest id). */
export function latestByField(corrections: readonly Correction[]): Map<CorrectionField, Correction> {
  const latest = new Map<CorrectionField, Correction>();
  for (const c of corrections) {
    const seen = latest.get(c.field);
    if (
      !seen ||
      c.corrected_at > seen.corrected_at ||
      (c.corrected_at === seen.corrected_at && c.correction_id > seen.correction_id)
    )
      latest.set(c.field, c);
  }
  return latest;
}

/**
 * Whether `correction` may be written over `existing` (the key's corrections): already there, in
 * conflict with a newer one, or to record. The stores run it inside their write (SQLite: one
 * transaction), so the check and the write see the same corrections.
 */
export function decide(correction: Correction, existing: readonly Correction[]): CorrectionOutcome {
  const same = existing.find((c) => c.correction_id === correction.correction_id);
  if (same) return { status: 'already', correction: same };
  const latest = latestByField(existing).get(correction.field);
  if ((latest?.correction_id ?? null) !== correction.replaces)
    return { status: 'conflict', latest: latest ?? null };
  return { status: 'recorded', correction };
}

/** SQLite DDL of the corrections table: the id is unique, so the same correction is one row. */
export function sqliteCorrectionsDdl(table = CORRECTIONS_TABLE): string {
  const columns = CORRECTION_COLUMNS.map(
    (c) =>
      `  ${c.name} TEXT${c.mode === 'REQUIRED' ? ' NOT NULL' : ''}${c.name === 'correction_id' ? ' PRIMARY KEY' : ''}`,
  );
  return `CREATE TABLE IF NOT EXISTS ${table} (\n${columns.join(',\n')}\n) STRICT`;
}

/**
 * The BigQuery schema of the corrections table (REST `TableFieldSchema` shape): the columns, then
 * the key day of the row corrected (contract/row.ts `keyDay`), which the table is partitioned on as
 * the rows' table is, so that a key's corrections are read from its day only.
 */
export function bigQueryCorrectionsSchema(): Array<{
  name: string;
  type: string;
  mode: string;
  description: string;
}> {
  return [
    ...CORRECTION_COLUMNS.map((c) => ({
      name: c.name,
      type: c.type,
      mode: c.mode,
      description: c.description,
    })),
    {
      name: KEY_DAY_COLUMN.name,
      type: KEY_DAY_COLUMN.type,
      mode: 'NULLABLE',
      description: 'The key day of the row corrected (partitioning column).',
    },
  ];
}
