/**
 * The pruning check: after a deploy, the worker's statements are dry-run against the live table, and
 * each estimate is held to what the cost model predicts for that table. The key-day layout's costs
 * rest on BigQuery pruning partitions by the statements' key-day *parameters* (a constant filter on
 * the partitioning column prunes, per the BigQuery docs on querying partitioned tables; parameters
 * are not named there): pruned, a statement reads a day or so of keys whatever the table's age;
 * unpruned, it reads the whole table, and grows into the byte cap. A dry run is free, runs nothing
 * and answers with the pre-run estimate (`totalBytesProcessed`) that `maximumBytesBilled` is
 * checked against (BigQuery's "Dry run query" sample and its cost-control guide).
 *
 * The statements are built by the store's own builders (adapters/stores/bigquery-store.ts) for one
 * probe row of today, so the dry run checks the SQL, parameters and types the worker sends.
 */
import type { BigQuery, Query } from '@google-cloud/bigquery';
import {
  batchLookupSql,
  batchLookupStatement,
  batchMergeStatement,
  quotedTable,
  type Statement,
} from '../../worker/src/adapters/stores/bigquery-store';
import {
  BUSIEST_DAY_FACTOR,
  KEY_DAY_LAYOUT,
  type StatementVolume,
  statementEstimateBytes,
} from '../../worker/src/contract/cost-model';
import { COLUMNS, KEY_DAY_COLUMN, keyDay, type Row } from '../../worker/src/contract/row';

const DAY_MS = 86_400_000;

/** One statement to dry-run: what it is, which prediction holds it, and what the worker sends. */
export interface PruningStatement {
  name: string;
  kind: 'lookup' | 'merge';
  statement: Statement;
}

/** What the check learns of the live table: its rows, its age and the bytes of all its keys. */
export interface TableFacts {
  rows: number;
  createdMs: number;
  /** The dry-run estimate of reading `dedup_key` + `key_day` of every row: an unpruned statement. */
  wholeKeyBytes: number;
}

/** A statement's dry run against its prediction. */
export interface StatementResult {
  name: string;
  kind: 'lookup' | 'merge';
  estimateBytes: number;
  predictedBytes: number;
  /** Whether a whole-table read would exceed the prediction, so that this result tells them apart. */
  conclusive: boolean;
}

export interface PruningVerdict {
  ok: boolean;
  results: StatementResult[];
  /** One line per statement, then the failure (if any), for people. */
  lines: string[];
}

/** A row like any the worker records, dated now (its key day is today), for the statements' parameters. */
export function probeRow(now: Date): Row {
  const row: Record<string, unknown> = {};
  for (const column of COLUMNS) {
    if (column.mode !== 'REQUIRED') row[column.name] = null;
    else row[column.name] = column.type === 'TIMESTAMP' ? now.toISOString() : 'docline-pruning-check';
  }
  const key = 'gs://docline-pruning-check/probe#0';
  return {
    ...row,
    dedup_key: key,
    object_uri: key,
    status: 'rejected',
    event_time: now.toISOString(),
  } as unknown as Row;
}

/** The worker's two statements on `table`, for one probe row of today, from the store's builders. */
export function pruningStatements(bigquery: BigQuery, table: string, now: Date): PruningStatement[] {
  const row = probeRow(now);
  const day = keyDay(row, now);
  return [
    {
      name: 'batched lookup (group commit)',
      kind: 'lookup',
      statement: batchLookupStatement(bigquery, batchLookupSql(table), [row.dedup_key], now),
    },
    {
      name: 'batched MERGE (group commit)',
      kind: 'merge',
      statement: batchMergeStatement(bigquery, table, [row], [day], () => day),
    },
  ];
}

/** Days of rows the busiest statement of a kind may read before the check can tell pruning apart. */
function daysToTell(kind: 'lookup' | 'merge'): number {
  const days = kind === 'merge' ? 1 : 1 + KEY_DAY_LAYOUT.lookupHorizonMs / DAY_MS;
  return BUSIEST_DAY_FACTOR * days;
}

/**
 * Holds each dry run to the cost model's estimate for this table ({@link statementEstimateBytes}):
 * a day's keys is the table's rows over its age in days, planned for a busiest day of
 * {@link BUSIEST_DAY_FACTOR} times that (as the byte cap is), each key row of the table's own
 * average size. A young table cannot tell a pruned statement from an unpruned one (both read
 * everything): such a result passes and says so.
 */
export function judgePruning(
  facts: TableFacts,
  estimates: ReadonlyArray<{ name: string; kind: 'lookup' | 'merge'; estimateBytes: number }>,
  now: Date,
): PruningVerdict {
  const ageDays = Math.max(1, (now.getTime() - facts.createdMs) / DAY_MS);
  const volume: StatementVolume = {
    documentsPerDay: (facts.rows / ageDays) * BUSIEST_DAY_FACTOR,
    bytesPerKeyRow: facts.rows > 0 ? facts.wholeKeyBytes / facts.rows : 0,
    tableRows: facts.rows,
  };
  const results = estimates.map((e): StatementResult => {
    const predictedBytes = Math.ceil(statementEstimateBytes(e.kind, volume));
    return { ...e, predictedBytes, conclusive: facts.wholeKeyBytes > predictedBytes };
  });
  const about = `${facts.rows} rows over ${ageDays.toFixed(1)} days, ${facts.wholeKeyBytes} bytes of keys in all`;
  const lines = results.map((r) =>
    r.conclusive
      ? `check-pruning: ${r.name} estimated at ${r.estimateBytes} bytes, predicted at most ${r.predictedBytes} (${about})`
      : `check-pruning: ${r.name} estimated at ${r.estimateBytes} bytes; inconclusive: the table is too young ` +
        `(${about}) for a whole-table read to exceed the prediction (${r.predictedBytes}); ` +
        `it tells them apart once the table holds more than ${daysToTell(r.kind)} days of rows`,
  );
  const over = results.filter((r) => r.estimateBytes > r.predictedBytes);
  if (over.length > 0)
    lines.push(
      `check-pruning FAILED: ${over.map((r) => `${r.name} (${r.estimateBytes} > ${r.predictedBytes} bytes)`).join(', ')}: ` +
        `BigQuery's estimate is over what the cost model predicts for this table (${about}), so it does not prune ` +
        `the statement to its key days by the ${KEY_DAY_COLUMN.name} parameters, and the statement's cost grows with ` +
        'the table until maximumBytesBilled refuses it. Look at its key-day filter (worker/src/adapters/stores/bigquery-store.ts).',
    );
  return { ok: over.length === 0, results, lines };
}

/** The dry run's estimate of one statement: `jobs.insert` with `dryRun: true` (free, runs nothing). */
async function dryRunBytes(
  bigquery: BigQuery,
  statement: Pick<Query, 'query' | 'params' | 'types'>,
  location: string | undefined,
): Promise<number> {
  const [job] = await bigquery.createQueryJob({
    ...statement,
    useLegacySql: false,
    dryRun: true,
    ...(location ? { location } : {}),
  });
  const bytes = Number(job.metadata?.statistics?.totalBytesProcessed);
  if (!Number.isFinite(bytes)) throw new Error('the dry run answered no totalBytesProcessed');
  return bytes;
}

/**
 * Dry-runs `statements` (by default {@link pruningStatements}) against `table` and judges them.
 * A statement BigQuery refuses (its SQL or parameters do not fit the live table) fails the check
 * with BigQuery's words.
 */
export async function checkPruning(options: {
  bigquery: BigQuery;
  table: string;
  location?: string | undefined;
  now: Date;
  statements?: PruningStatement[];
}): Promise<PruningVerdict> {
  const { bigquery, table, location, now } = options;
  const [project, dataset, id] = table.split('.') as [string, string, string];
  const [metadata] = await bigquery.dataset(dataset, { projectId: project }).table(id).getMetadata();
  const wholeKeyBytes = await dryRunBytes(
    bigquery,
    { query: `SELECT dedup_key, ${KEY_DAY_COLUMN.name} FROM ${quotedTable(table)}` },
    location,
  );
  const facts: TableFacts = {
    rows: Number(metadata.numRows ?? 0),
    createdMs: Number(metadata.creationTime ?? now.getTime()),
    wholeKeyBytes,
  };
  const estimates = [];
  for (const s of options.statements ?? pruningStatements(bigquery, table, now)) {
    try {
      estimates.push({
        name: s.name,
        kind: s.kind,
        estimateBytes: await dryRunBytes(bigquery, s.statement, location),
      });
    } catch (error) {
      const message = (error as Error).message.split('\n')[0];
      return {
        ok: false,
        results: [],
        lines: [
          `check-pruning FAILED: BigQuery refused the dry run of the ${s.name} on ${table}: ${message}`,
        ],
      };
    }
  }
  return judgePruning(facts, estimates, now);
}
