import { COLUMN_NAMES } from './row';

/**
 * The read side of docline, defined once per dialect with the same meaning. BigQuery enforces no
 * uniqueness (two concurrent MERGEs may both insert), so every reader goes through `documents`.
 */

export type Dialect = 'googlesql' | 'sqlite';
export type ViewName = 'documents' | 'duplicate_objects' | 'delivery_stats';
export const VIEW_NAMES: readonly ViewName[] = ['documents', 'duplicate_objects', 'delivery_stats'];

/** What each view means, for the Pulumi view descriptions and the README. */
export const VIEW_DESCRIPTIONS: Readonly<Record<ViewName, string>> = {
  documents:
    'One row per dedup key: the first row recorded for it. Read documents here, never from the table.',
  duplicate_objects:
    'Objects (bucket/name#generation) with more than one ok row: a notification created twice, absorbed only in object mode.',
  delivery_stats: 'Per day: rows by status, rows beyond the first per dedup key, and their share.',
};

const columns = COLUMN_NAMES.join(', ');
// A stable order that both dialects share, so that ties on processed_at pick the same row.
const firstRowOrder = 'ORDER BY processed_at, message_id';

/**
 * The SELECT statement of a view.
 * @param table for GoogleSQL the fully qualified `project.dataset.table` (quoted here); for SQLite the table name.
 */
export function viewSql(dialect: Dialect, view: ViewName, table: string): string {
  const from = dialect === 'googlesql' ? `\`${table}\`` : table;
  switch (view) {
    case 'documents':
      return dialect === 'googlesql'
        ? `SELECT ${columns} FROM ${from} WHERE TRUE QUALIFY ROW_NUMBER() OVER (PARTITION BY dedup_key ${firstRowOrder}) = 1`
        : `SELECT ${columns} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY dedup_key ${firstRowOrder}) AS first_rank FROM ${from}) WHERE first_rank = 1`;
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
        `FROM ${from} GROUP BY day`
      );
    }
  }
}
