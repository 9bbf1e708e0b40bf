import type { BigQuery } from '@google-cloud/bigquery';
import {
  CORRECTION_COLUMN_NAMES,
  type Correction,
  type CorrectionOutcome,
  decide,
} from '../../contract/corrections';
import { KEY_DAY_COLUMN } from '../../contract/row';

/**
 * The corrections table in BigQuery (infra/components/warehouse.ts), written by the same rule as the
 * SQLite store's (contract/corrections.ts `decide`): the key's corrections are read, then the
 * correction inserted by a MERGE on its id that only inserts, so the same correction twice is one
 * row. BigQuery has no transaction across the read and the MERGE: two people correcting one field
 * of one row in the same second may both be recorded; the documents view then shows the later one.
 */
export interface BigQueryCorrectionStoreOptions {
  bigquery: Pick<BigQuery, 'query'>;
  /** `project.dataset.corrections`. */
  table: string;
  location?: string;
}

/** The statement that reads a key's corrections (`@dedup_key`), times as the worker writes them. */
export function correctionsOfSql(table: string): string {
  const columns = CORRECTION_COLUMN_NAMES.map((c) =>
    c === 'corrected_at' ? "FORMAT_TIMESTAMP('%Y-%m-%dT%H:%M:%E3SZ', corrected_at) AS corrected_at" : c,
  );
  return `SELECT ${columns.join(', ')} FROM \`${table}\` WHERE dedup_key = @dedup_key ORDER BY corrected_at, correction_id`;
}

/** The MERGE that inserts one correction unless its id is there (`@<column>` and `@key_day`). */
export function correctionMergeSql(table: string): string {
  const columns = [...CORRECTION_COLUMN_NAMES, KEY_DAY_COLUMN.name];
  const source = columns
    .map((c) => (c === 'corrected_at' ? 'TIMESTAMP(@corrected_at) AS corrected_at' : `@${c} AS ${c}`))
    .join(', ');
  return (
    `MERGE \`${table}\` AS t USING (SELECT ${source}) AS s ON t.correction_id = s.correction_id ` +
    `WHEN NOT MATCHED THEN INSERT (${columns.join(', ')}) VALUES (${columns.map((c) => `s.${c}`).join(', ')})`
  );
}

export class BigQueryCorrectionStore {
  constructor(private readonly options: BigQueryCorrectionStoreOptions) {}

  async corrections(dedupKey: string): Promise<Correction[]> {
    const [rows] = await this.options.bigquery.query({
      query: correctionsOfSql(this.options.table),
      params: { dedup_key: dedupKey },
      useLegacySql: false,
      ...(this.options.location ? { location: this.options.location } : {}),
    });
    // A MERGE race may have inserted one correction twice: it is one correction.
    const byId = new Map((rows as Correction[]).map((r) => [r.correction_id, r]));
    return [...byId.values()];
  }

  /** Writes `correction` of a row of key day `keyDay` (YYYY-MM-DD) unless it is there or stale. */
  async correct(correction: Correction, keyDay: string): Promise<CorrectionOutcome> {
    const outcome = decide(correction, await this.corrections(correction.dedup_key));
    if (outcome.status !== 'recorded') return outcome;
    await this.options.bigquery.query({
      query: correctionMergeSql(this.options.table),
      params: { ...correction, [KEY_DAY_COLUMN.name]: keyDay },
      types: { replaces: 'STRING', why: 'STRING', [KEY_DAY_COLUMN.name]: 'DATE' },
      useLegacySql: false,
      ...(this.options.location ? { location: this.options.location } : {}),
    });
    return outcome;
  }
}
