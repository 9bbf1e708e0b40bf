/**
 * The columns of the docline table: the one definition that the BigQuery schema (Pulumi), the
 * SQLite DDL, the MERGE column list, the views and the row builder are all derived from.
 */

/** GoogleSQL types used by the table. */
export type ColumnType = 'STRING' | 'INT64' | 'TIMESTAMP' | 'JSON';

export interface Column {
  readonly name: string;
  readonly type: ColumnType;
  readonly mode: 'REQUIRED' | 'NULLABLE';
  readonly description: string;
}

export const COLUMNS = [
  {
    name: 'message_id',
    type: 'STRING',
    mode: 'REQUIRED',
    description: 'Pub/Sub messageId of the delivery that wrote this row.',
  },
  {
    name: 'dedup_key',
    type: 'STRING',
    mode: 'REQUIRED',
    description:
      'Lookup key: gs://bucket/name#generation for documents in object mode, the messageId in message mode and for events that are not work.',
  },
  {
    name: 'object_uri',
    type: 'STRING',
    mode: 'NULLABLE',
    description: 'gs://bucket/name#generation of the object, when known.',
  },
  { name: 'bucket', type: 'STRING', mode: 'NULLABLE', description: 'Cloud Storage bucket of the object.' },
  { name: 'object_name', type: 'STRING', mode: 'NULLABLE', description: 'Object name inside the bucket.' },
  {
    name: 'generation',
    type: 'STRING',
    mode: 'NULLABLE',
    description: 'Object generation, kept as a decimal string.',
  },
  {
    name: 'content_type',
    type: 'STRING',
    mode: 'NULLABLE',
    description: 'Content type declared by the object.',
  },
  {
    name: 'size_bytes',
    type: 'INT64',
    mode: 'NULLABLE',
    description: 'Object size in bytes, as declared by the notification.',
  },
  {
    name: 'event_time',
    type: 'TIMESTAMP',
    mode: 'NULLABLE',
    description: 'When Cloud Storage saw the event.',
  },
  {
    name: 'publish_time',
    type: 'TIMESTAMP',
    mode: 'NULLABLE',
    description: 'When Pub/Sub accepted the message.',
  },
  {
    name: 'delivery_attempt',
    type: 'INT64',
    mode: 'NULLABLE',
    description: 'Pub/Sub delivery attempt of the winning delivery (present with a dead-letter policy).',
  },
  { name: 'status', type: 'STRING', mode: 'REQUIRED', description: 'ok or rejected.' },
  {
    name: 'reason',
    type: 'STRING',
    mode: 'NULLABLE',
    description:
      'Why the document was rejected (a stable reason code); on an ok row, why its e-invoice XML was not used (e_invoice_unreadable, e_invoice_incomplete).',
  },
  {
    name: 'analysis',
    type: 'JSON',
    mode: 'NULLABLE',
    description: 'The invoice fields extracted by the analyzer.',
  },
  {
    name: 'model',
    type: 'STRING',
    mode: 'NULLABLE',
    description:
      'Model that produced the analysis (offline for the local analyzer; e-invoice:factur-x, e-invoice:cii or e-invoice:ubl when read from the document’s own XML).',
  },
  {
    name: 'prompt_tokens',
    type: 'INT64',
    mode: 'NULLABLE',
    description: 'Input tokens billed for the analysis.',
  },
  {
    name: 'output_tokens',
    type: 'INT64',
    mode: 'NULLABLE',
    description: 'Output tokens billed for the analysis (thinking included).',
  },
  {
    name: 'total_tokens',
    type: 'INT64',
    mode: 'NULLABLE',
    description: 'All tokens billed for the analysis.',
  },
  {
    name: 'e_invoice_validation',
    type: 'JSON',
    mode: 'NULLABLE',
    description:
      'An e-invoice checked on receipt: the verdict (valid, invalid, unchecked) of the EN 16931 validation artefacts (and Factur-X, BR-FR where they apply) on its XML, the rule ids that fired, and for a hybrid PDF how its picture compares with the XML. Null for other documents.',
  },
  {
    name: 'processed_at',
    type: 'TIMESTAMP',
    mode: 'REQUIRED',
    description:
      'When the row was committed, stamped by the store in its own statement: the row committed first sorts first.',
  },
  {
    name: 'worker_version',
    type: 'STRING',
    mode: 'REQUIRED',
    description: 'Version (revision) of the worker that wrote the row.',
  },
  // Columns added after the table's creation: last, after the key day in BigQuery (bigQuerySchema).
  {
    name: 'confidence',
    type: 'JSON',
    mode: 'NULLABLE',
    description:
      'On an analysed row, per invoice field that has a value (supplier_name, invoice_number, issue_date, due_date, currency, net_amount, tax_amount, total_amount, supplier_siren, supplier_siret, supplier_vat_id): {source: e_invoice_xml|text_layer|ocr|gemini, how, confidence in [0, 1]} (worker/src/core/review.ts).',
  },
  {
    name: 'review',
    type: 'STRING',
    mode: 'NULLABLE',
    description:
      'On an analysed row: none, or the reasons to look at it, separated by spaces: arithmetic (net + tax differs from total beyond rounding), missing:<field>, low_confidence:<field> (below its calibrated threshold), check_digit:<field> (SIREN/SIRET Luhn, French VAT key), e_invoice_invalid (EN 16931 validation failed), picture_xml_disagree:<field> (a hybrid PDF whose picture and XML differ).',
  },
] as const satisfies readonly Column[];

/**
 * The last column of the table as BigQuery first created it: the key day follows it there, and the
 * columns added since come after the key day (BigQuery adds a column at the end of a schema only).
 */
const LAST_ORIGINAL_COLUMN = 'worker_version';

export type ColumnName = (typeof COLUMNS)[number]['name'];

/** Status values a row can have; `duplicate` is an answer, never a row. */
export type RowStatus = 'ok' | 'rejected';

/** The TypeScript value of each column type: timestamps are ISO-8601 strings in UTC. */
interface ValueOf {
  STRING: string;
  INT64: number;
  TIMESTAMP: string;
  JSON: unknown;
}

/** A column's value: its type's, or null when the column is NULLABLE. */
type ColumnValue<C extends Column> = ValueOf[C['type']] | (C['mode'] extends 'NULLABLE' ? null : never);

/** One value per column, derived from {@link COLUMNS}. */
type ColumnValues = { -readonly [C in (typeof COLUMNS)[number] as C['name']]: ColumnValue<C> };

/** One row of the table, as the worker builds it: the columns' values, with `status` narrowed to a row status. */
export interface Row extends Omit<ColumnValues, 'status'> {
  status: RowStatus;
}

/** Column names in table order. */
export const COLUMN_NAMES: readonly ColumnName[] = COLUMNS.map((c) => c.name);

/**
 * The day a dedup key belongs to, stored by BigQuery in a column of its own and the column the
 * table is partitioned on: every delivery of one key computes the same day from its own event, so
 * a statement about a key reads that key's day partition only, however old or large the table is.
 * It is a layout column, not a {@link Row} field: the BigQuery stores derive it ({@link keyDay}),
 * SQLite has no partitions and does not store it.
 */
export const KEY_DAY_COLUMN = {
  name: 'key_day',
  type: 'DATE',
  mode: 'REQUIRED',
  description:
    "The day of the dedup key, UTC (partitioning column): the event's time (for a new object, its creation), else the message's publish time. Every delivery of a key has the same day.",
} as const;

/** The column the table is partitioned on (by DAY) and the clustering order (lookup key first). */
export const PARTITION_COLUMN = KEY_DAY_COLUMN.name;
export const CLUSTER_COLUMNS: readonly ColumnName[] = ['dedup_key', 'message_id'];

/**
 * The partitioning of tables created before the key-day layout: by `processed_at`, the time its statement started. Kept to describe
 * what a migration reads (see docs/architecture.md, "Table layout").
 */
export const LEGACY_PARTITION_COLUMN: ColumnName = 'processed_at';

/**
 * The key day of a row: the UTC day of its event's time, else of its message's publish time, else
 * of `now` (a row with neither: only an envelope without a publish time, which Pub/Sub never sends).
 * For one key these are the same on every delivery: a redelivery keeps its message's attributes and
 * publish time; a second notification of one object carries the same event time; reconcile
 * re-announces an object with its creation time as the event time, which is what Cloud Storage
 * sends for a new object. {@link KEY_DAY_SQL} is the same function in GoogleSQL.
 */
export function keyDay(row: Pick<Row, 'event_time' | 'publish_time'>, now: Date): string {
  for (const value of [row.event_time, row.publish_time]) {
    if (value === null || value === undefined) continue;
    const ms = Date.parse(value);
    if (Number.isFinite(ms)) return new Date(ms).toISOString().slice(0, 10);
  }
  return now.toISOString().slice(0, 10);
}

/**
 * {@link keyDay} over a stored row in GoogleSQL, with its `processed_at` (its statement's start) standing in for `now`: what a
 * migration computes for rows written before the key-day layout.
 */
export const KEY_DAY_SQL = 'DATE(COALESCE(event_time, publish_time, processed_at))';

/** BigQuery table schema (REST `TableFieldSchema` shape): {@link COLUMNS}, the key day after the original ones. */
export function bigQuerySchema(): Array<{ name: string; type: string; mode: string; description: string }> {
  const legacy: Record<ColumnType | 'DATE', string> = {
    STRING: 'STRING',
    INT64: 'INTEGER',
    TIMESTAMP: 'TIMESTAMP',
    JSON: 'JSON',
    DATE: 'DATE',
  };
  const split = COLUMNS.findIndex((c) => c.name === LAST_ORIGINAL_COLUMN) + 1;
  return [...COLUMNS.slice(0, split), KEY_DAY_COLUMN, ...COLUMNS.slice(split)].map((c) => ({
    name: c.name,
    type: legacy[c.type],
    mode: c.mode,
    description: c.description,
  }));
}

/**
 * SQLite DDL for the table; the unique dedup key is what makes `record()` conditional.
 * `unique: false` gives a table like BigQuery's, which enforces no uniqueness (for tests of the
 * read side, and the benchmark's naive consumer).
 */
export function sqliteTableDdl(table: string, options: { unique?: boolean } = {}): string {
  const sqliteType: Record<ColumnType, string> = {
    STRING: 'TEXT',
    INT64: 'INTEGER',
    TIMESTAMP: 'TEXT',
    JSON: 'TEXT',
  };
  const unique = options.unique ?? true;
  const columns = COLUMNS.map(
    (c) =>
      `  ${c.name} ${sqliteType[c.type]}${c.mode === 'REQUIRED' ? ' NOT NULL' : ''}` +
      `${unique && c.name === 'dedup_key' ? ' UNIQUE' : ''}`,
  );
  return `CREATE TABLE IF NOT EXISTS ${table} (\n${columns.join(',\n')}\n) STRICT`;
}
