import { CORRECTABLE_FIELDS, CORRECTIONS_TABLE } from './corrections';
import { COLUMN_NAMES } from './row';

/**
 * The read side of docline, defined once per dialect with the same meaning. BigQuery enforces no
 * uniqueness (two concurrent MERGEs may both insert), so every reader goes through `documents`.
 */

export type Dialect = 'googlesql' | 'sqlite';
export type ViewName = 'documents' | 'duplicate_objects' | 'delivery_stats' | 'duplicate_invoices';
export const VIEW_NAMES: readonly ViewName[] = [
  'documents',
  'duplicate_objects',
  'delivery_stats',
  'duplicate_invoices',
];

/** What each view means, for the Pulumi view descriptions and the README. */
export const VIEW_DESCRIPTIONS: Readonly<Record<ViewName, string>> = {
  documents:
    'One row per dedup key: the first row recorded for it, its analysis with the latest correction of each field applied (original_analysis: as analysed; corrected_fields: the fields corrected and the review reasons marked dealt with, which change no value). Read documents here, never from the table.',
  duplicate_objects:
    'Objects (bucket/name#generation) with more than one ok row: a notification created twice, absorbed only in object mode.',
  delivery_stats: 'Per day: rows by status, rows beyond the first per dedup key, and their share.',
  duplicate_invoices:
    'One invoice in several objects (uploaded under two names, scanned twice): ok documents (corrections applied) of different objects with the same supplier (VAT id, else SIRET, else SIREN, else normalised name), normalised invoice number and total; one row per object, with when it arrived.',
};

/** A one-character string literal; a quote is written `"'"` in GoogleSQL (`''''` opens a triple-quoted string there) and `''''` in SQLite. */
const charLiteral = (dialect: Dialect, c: string) =>
  c !== "'" ? `'${c}'` : dialect === 'googlesql' ? `"'"` : "''''";
/** Removes separators people type differently (`FR 12-345.678`, `F/2026/0042`). */
const stripped = (dialect: Dialect, expr: string, chars: readonly string[]) =>
  chars.reduce((inner, c) => `REPLACE(${inner}, ${charLiteral(dialect, c)}, '')`, expr);
const ID_SEPARATORS = [' ', '.', '-', '/', '_'] as const;
const NAME_SEPARATORS = [' ', '.', ',', '-', "'"] as const;

/** The columns `duplicate_invoices` groups by, as SQL expressions over the table's columns. */
export interface DuplicateInvoiceKeys {
  supplier_key: string;
  invoice_number_key: string;
  total_amount: string;
}

/**
 * How `duplicate_invoices` keys a row: the supplier (VAT id, else SIRET, else SIREN, else normalised
 * name), the normalised invoice number and the total. Both dialects share the text except how a
 * field is read from the analysis JSON and the total's type (grouped as NUMERIC in GoogleSQL, REAL in
 * SQLite). Limits: names are lower-cased with each engine's LOWER (SQLite folds ASCII only), and
 * legal suffixes (SAS, Ltd) are kept, so a name-only match needs the same words. The same text feeds
 * the view and the SQLite index that finds one row's group without reading the others.
 */
export function duplicateInvoiceKeySql(dialect: Dialect): DuplicateInvoiceKeys {
  /** An identifier compared without separators or case; empty means absent. */
  const normalisedId = (expr: string) => `NULLIF(UPPER(${stripped(dialect, expr, ID_SEPARATORS)}), '')`;
  const field = (name: string) =>
    dialect === 'googlesql' ? `JSON_VALUE(analysis, '$.${name}')` : `json_extract(analysis, '$.${name}')`;
  return {
    supplier_key:
      `COALESCE('vat:' || ${normalisedId(field('supplier_vat_id'))}, ` +
      `'siret:' || ${normalisedId(field('supplier_siret'))}, ` +
      `'siren:' || ${normalisedId(field('supplier_siren'))}, ` +
      `'name:' || NULLIF(LOWER(${stripped(dialect, field('supplier_name'), NAME_SEPARATORS)}), ''))`,
    invoice_number_key: normalisedId(field('invoice_number')),
    total_amount:
      dialect === 'googlesql'
        ? `SAFE_CAST(${field('total_amount')} AS NUMERIC)`
        : `CAST(${field('total_amount')} AS REAL)`,
  };
}

/**
 * Where the deploy canary uploads (local/lib/canary.ts): one invoice after every deploy, the same
 * each time. Its rows are documents like any other (the `documents` view, the dedup key, reconcile,
 * the duplicate_objects check all see them), but the business views leave them out: a daily count
 * is the business's, and the same canary invoice every deploy is not a duplicate invoice.
 */
export const CANARY_PREFIX = 'docline-canary/';

/** Rows that are not the canary's (rows without an object, such as rejected notifications, count). */
export const NOT_CANARY = `(object_name IS NULL OR object_name NOT LIKE '${CANARY_PREFIX}%')`;

/** The analysis fields {@link duplicateInvoiceKeySql} reads: a correction of one moves a row's group. */
export const DUPLICATE_KEY_FIELDS = [
  'supplier_vat_id',
  'supplier_siret',
  'supplier_siren',
  'supplier_name',
  'invoice_number',
  'total_amount',
] as const;

/** Which rows `duplicate_invoices` looks at: ok rows of an object. */
export const DUPLICATE_INVOICE_ROWS = "status = 'ok' AND object_uri IS NOT NULL";

/**
 * The SELECT of `duplicate_invoices`, over the keys of {@link duplicateInvoiceKeySql}, read from the
 * `documents` view's rows: an accountant's correction of a number, a total or a supplier id is what
 * the duplicate check compares (and one row per key, so a key written twice by a race is one row).
 */
function duplicateInvoicesSql(dialect: Dialect, from: string, corrections: string): string {
  const field = (name: string) =>
    dialect === 'googlesql' ? `JSON_VALUE(analysis, '$.${name}')` : `json_extract(analysis, '$.${name}')`;
  const keys = duplicateInvoiceKeySql(dialect);
  const group = 'supplier_key, invoice_number_key, total_amount';
  // Grouped as an exact NUMERIC, shown as FLOAT64 (JSON numbers, like SQLite's REAL).
  const shownTotal =
    dialect === 'googlesql' ? 'CAST(total_amount AS FLOAT64) AS total_amount' : 'total_amount';
  return (
    `WITH documents AS (${documentsSql(dialect, from, corrections)}), ` +
    'keyed AS (SELECT object_uri, object_name, event_time, processed_at, ' +
    `${field('supplier_name')} AS supplier_name, ${field('invoice_number')} AS invoice_number, ` +
    `${keys.supplier_key} AS supplier_key, ${keys.invoice_number_key} AS invoice_number_key, ` +
    `${keys.total_amount} AS total_amount FROM documents WHERE ${DUPLICATE_INVOICE_ROWS} AND ${NOT_CANARY}), ` +
    // One row per object: in message mode one object may have several keys.
    `objects AS (SELECT ${group}, object_uri, MIN(object_name) AS object_name, ` +
    'MIN(supplier_name) AS supplier_name, MIN(invoice_number) AS invoice_number, ' +
    'MIN(COALESCE(event_time, processed_at)) AS arrived_at, MIN(processed_at) AS first_processed_at FROM keyed ' +
    'WHERE supplier_key IS NOT NULL AND invoice_number_key IS NOT NULL AND total_amount IS NOT NULL ' +
    `GROUP BY ${group}, object_uri) ` +
    `SELECT supplier_key, invoice_number_key, ${shownTotal}, group_objects, object_uri, object_name, supplier_name, invoice_number, arrived_at, first_processed_at ` +
    `FROM (SELECT *, COUNT(*) OVER (PARTITION BY ${group}) AS group_objects FROM objects) WHERE group_objects > 1`
  );
}

const columns = COLUMN_NAMES.join(', ');
// A stable order that both dialects share, so that ties on processed_at pick the same row.
const firstRowOrder = 'ORDER BY processed_at, message_id';

/** The first row of each key: the document, as the worker analysed it. */
function firstRowsSql(dialect: Dialect, from: string): string {
  return dialect === 'googlesql'
    ? `SELECT ${columns} FROM ${from} WHERE TRUE QUALIFY ROW_NUMBER() OVER (PARTITION BY dedup_key ${firstRowOrder}) = 1`
    : `SELECT ${columns} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY dedup_key ${firstRowOrder}) AS first_rank FROM ${from}) WHERE first_rank = 1`;
}

/**
 * `documents`: the first row of each key, its analysis with the latest correction of each field
 * set in it (one JSON_SET per correctable field, a path literal each: GoogleSQL takes no computed
 * path), the analysed one kept as `original_analysis`, and the corrected fields named. A "dealt
 * with" mark (its `field` a review reason) is named in `corrected_fields`, which closes its reason,
 * but is no value: only the correctable fields are pivoted, and a row with marks only keeps its
 * analysis exactly as analysed.
 */
function documentsSql(dialect: Dialect, from: string, corrections: string): string {
  const google = dialect === 'googlesql';
  const latest = google
    ? `SELECT dedup_key, field, value FROM ${corrections} WHERE TRUE QUALIFY ROW_NUMBER() OVER (PARTITION BY dedup_key, field ORDER BY corrected_at DESC, correction_id DESC) = 1`
    : `SELECT dedup_key, field, value FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY dedup_key, field ORDER BY corrected_at DESC, correction_id DESC) AS fix_rank FROM ${corrections}) WHERE fix_rank = 1`;
  const pivot = CORRECTABLE_FIELDS.map((f) => `MAX(CASE WHEN field = '${f}' THEN value END) AS fix_${f}`);
  const valueFixes = `SUM(CASE WHEN field IN (${CORRECTABLE_FIELDS.map((f) => `'${f}'`).join(', ')}) THEN 1 ELSE 0 END) AS value_fixes`;
  const fieldList = google
    ? "STRING_AGG(field, ',' ORDER BY field)"
    : "group_concat(field, ',' ORDER BY field)";
  const [setJson, readJson, parseJson] = google
    ? ['JSON_SET', 'JSON_QUERY', 'PARSE_JSON']
    : ['json_set', 'json_extract', 'json'];
  // A field the analysis lacks is set to JSON null in both dialects: SQLite's json_set stores a SQL
  // NULL as null, and GoogleSQL is never handed a SQL NULL value (bigquery-emulator v0.8.1 fails on
  // one with an internal error), so a corrected analysis holds every correctable field.
  const unchanged = (f: string) =>
    google
      ? `COALESCE(${readJson}(first.analysis, '$.${f}'), ${parseJson}('null'))`
      : `${readJson}(first.analysis, '$.${f}')`;
  const sets = CORRECTABLE_FIELDS.map(
    (f) =>
      `'$.${f}', CASE WHEN fixes.fix_${f} IS NULL THEN ${unchanged(f)} ELSE ${parseJson}(fixes.fix_${f}) END`,
  );
  const selected = COLUMN_NAMES.map((c) =>
    c === 'analysis'
      ? `CASE WHEN COALESCE(fixes.value_fixes, 0) = 0 THEN first.analysis ELSE ${setJson}(first.analysis, ${sets.join(', ')}) END AS analysis`
      : `first.${c}`,
  );
  return (
    `WITH first AS (${firstRowsSql(dialect, from)}), latest AS (${latest}), ` +
    `fixes AS (SELECT dedup_key, ${fieldList} AS corrected_fields, ${valueFixes}, ${pivot.join(', ')} FROM latest GROUP BY dedup_key) ` +
    `SELECT ${selected.join(', ')}, first.analysis AS original_analysis, fixes.corrected_fields ` +
    'FROM first LEFT JOIN fixes ON fixes.dedup_key = first.dedup_key'
  );
}

/** The corrections table beside `table` (same dataset in GoogleSQL). */
export function correctionsTableOf(dialect: Dialect, table: string): string {
  return dialect === 'googlesql' ? table.replace(/[^.]+$/u, CORRECTIONS_TABLE) : CORRECTIONS_TABLE;
}

/**
 * The SELECT statement of a view.
 * @param table for GoogleSQL the fully qualified `project.dataset.table` (quoted here); for SQLite the table name.
 * @param corrections the corrections table (`documents` and `duplicate_invoices` read it); default: {@link correctionsTableOf}.
 */
export function viewSql(
  dialect: Dialect,
  view: ViewName,
  table: string,
  corrections = correctionsTableOf(dialect, table),
): string {
  const quote = (name: string) => (dialect === 'googlesql' ? `\`${name}\`` : name);
  const from = quote(table);
  switch (view) {
    case 'documents':
      return documentsSql(dialect, from, quote(corrections));
    case 'duplicate_objects': {
      const messageIds =
        dialect === 'googlesql'
          ? `STRING_AGG(message_id, ',' ${firstRowOrder})`
          : `group_concat(message_id, ',' ${firstRowOrder})`;
      return (
        `SELECT object_uri, bucket, object_name, generation, COUNT(*) AS ok_rows, ${messageIds} AS message_ids, ` +
        'MIN(processed_at) AS first_processed_at, MAX(processed_at) AS last_processed_at ' +
        `FROM ${from} WHERE status = 'ok' AND object_uri IS NOT NULL ` +
        'GROUP BY object_uri, bucket, object_name, generation HAVING COUNT(*) > 1'
      );
    }
    case 'delivery_stats': {
      const day = dialect === 'googlesql' ? 'DATE(processed_at)' : 'date(processed_at)';
      const countIf = (cond: string) =>
        dialect === 'googlesql' ? `COUNTIF(${cond})` : `SUM(CASE WHEN ${cond} THEN 1 ELSE 0 END)`;
      const duplicates = 'COUNT(*) - COUNT(DISTINCT dedup_key)';
      const rate =
        dialect === 'googlesql'
          ? `SAFE_DIVIDE(${duplicates}, COUNT(*))`
          : `CAST(${duplicates} AS REAL) / COUNT(*)`;
      return (
        `SELECT ${day} AS day, COUNT(*) AS row_count, ${countIf("status = 'ok'")} AS ok_rows, ` +
        `${countIf("status = 'rejected'")} AS rejected_rows, ${duplicates} AS duplicate_rows, ${rate} AS duplicate_rate, ` +
        `${countIf("status = 'ok'")} - COUNT(DISTINCT CASE WHEN status = 'ok' THEN object_uri END) AS doubled_object_rows ` +
        `FROM ${from} WHERE ${NOT_CANARY} GROUP BY day`
      );
    }
    case 'duplicate_invoices':
      return duplicateInvoicesSql(dialect, from, quote(corrections));
  }
}
