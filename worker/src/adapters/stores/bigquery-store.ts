import { randomBytes } from 'node:crypto';
import { BigQuery, type BigQueryOptions, type JobResponse, type Query } from '@google-cloud/bigquery';
import { KEY_DAY_LAYOUT } from '../../contract/cost-model';
import {
  COLUMN_NAMES,
  COLUMNS,
  type ColumnName,
  KEY_DAY_COLUMN,
  KEY_DAY_SQL,
  keyDay,
  PARTITION_COLUMN,
  type Row,
} from '../../contract/row';
import { DELIVERY_DEFAULTS, MIN_MAXIMUM_BYTES_BILLED, MIN_STATEMENT_MS } from '../../contract/settings';
import { type Deadline, DeadlineError, notStarted } from '../../core/deadline';
import {
  ConfigurationError,
  DoclineError,
  OutcomeUnknownError,
  RowRefusalError,
  TransientError,
} from '../../core/errors';
import { type BatchStore, type Clock, type Logger, systemClock } from '../../core/ports';
import { probe } from '../../core/probes';

/**
 * The production store: one BigQuery table, written by one insert-only MERGE per batch of
 * deliveries (group commit, adapters/stores/group-commit-store.ts, is its only caller).
 *
 * The table is partitioned by the key's day (`key_day`, contract/row.ts): every delivery of one key
 * computes the same day from its own event, so a MERGE and the winners query read only the day
 * partitions of the keys they carry, and the lookup only the partitions of the last
 * {@link LOOKUP_HORIZON_MS}. BigQuery's pre-run estimate, which `maximumBytesBilled` is checked
 * against, honours partition pruning by constant parameters (clustering it does not), so what a
 * statement is estimated and billed at depends on the documents a day, never on the table's age.
 * Every value travels as a typed query parameter: no text of a row is ever spliced into SQL.
 *
 * An insert-only MERGE does not conflict with another one, so two concurrent deliveries of one key
 * can both insert: readers deduplicate through the `documents` view (contract/views.ts).
 */

/** Options of {@link BigQueryStore}; the composition root reads them from the configuration. */
export interface BigQueryStoreOptions {
  bigquery: BigQuery;
  /** `project.dataset.table`. */
  table: string;
  /** The dataset's location (jobs run there); the client's default when unset. */
  location?: string | undefined;
  /** `maximumBytesBilled` of every query. */
  maximumBytesBilled?: number;
  /** Job labels, for billing reports (keys and values: lower case, ≤ 63 characters). */
  labels?: Record<string, string>;
  logger?: Logger;
  /** The lookup's horizon and a key day without an event time are computed from this clock. */
  clock?: Clock;
  /**
   * How often the outcome of a MERGE whose answer was lost is asked for again (jobs.get by its id)
   * while its job still runs or jobs.get fails (default {@link OUTCOME_POLL_MS}).
   */
  outcomePollMs?: number;
  /** Waits `ms` (injectable for tests). */
  sleep?: (ms: number) => Promise<void>;
}

/** How often a MERGE whose answer was lost is looked up by its job id. */
export const OUTCOME_POLL_MS = 1_000;

const TABLE_ID = /^[a-z][a-z0-9-]{4,61}[a-z0-9]\.[A-Za-z0-9_]{1,1024}\.[A-Za-z0-9_-]{1,1024}$/;

/**
 * How far back `seen()` looks for a key, by key day: redeliveries (Pub/Sub's retries, a second
 * notification of one object) come within minutes to an hour or two of their event. `seen()` is a
 * shortcut before the paid work, not the guarantee: a key older than this is still found by the
 * MERGE, which reads the key's own day, and its analysis by the memo. With 6 hours the lookup reads
 * today's partition, and yesterday's too during the first 6 hours of a UTC day: at most 1.25 days
 * of keys.
 */
export const LOOKUP_HORIZON_MS = KEY_DAY_LAYOUT.lookupHorizonMs;

/**
 * The most key days one MERGE reads: a batch holds keys of today (and of yesterday, around
 * midnight); the rare batch with more days (a replay of old dead letters, a backfill) is written in
 * several statements of at most this many days each, so that no statement's estimate is larger
 * than `maximumEstimateBytes` (contract/cost-model.ts) allows for.
 */
export const MAX_KEY_DAYS_PER_STATEMENT = KEY_DAY_LAYOUT.maxKeyDaysPerStatement;

/** The named parameter that carries the first key day `seen()` looks at (a DATE). */
export const LOOKUP_PARAMETER = 'lookup_since';

/** The named parameter of the i-th key day a MERGE or winners query reads (a DATE each). */
export const keyDayParameter = (i: number) => `${PARTITION_COLUMN}_${i}`;

/** GoogleSQL type of each column's query parameter. */
export const PARAMETER_TYPES: Readonly<Record<ColumnName, string>> = Object.fromEntries(
  COLUMNS.map((c) => [c.name, c.type]),
) as Record<ColumnName, string>;

/** The parameter types of a row sent to a MERGE: every column, then its key day. */
export const ROW_PARAMETER_TYPES: Readonly<Record<string, string>> = {
  ...PARAMETER_TYPES,
  [PARTITION_COLUMN]: KEY_DAY_COLUMN.type,
};

/** Checks `project.dataset.table` and returns it quoted for GoogleSQL. */
export function quotedTable(table: string): string {
  if (!TABLE_ID.test(table)) {
    throw new ConfigurationError(
      'bigquery_table_id',
      `the BigQuery table must be project.dataset.table (got "${table}")`,
    );
  }
  return `\`${table}\``;
}

/** `key_day IN (@key_day_0, …)`: scalar parameters, so that the pre-run estimate prunes by them. */
function keyDaysFilter(alias: string, dayCount: number): string {
  if (!Number.isInteger(dayCount) || dayCount < 1)
    throw new RangeError(`a statement reads at least one key day (got ${dayCount})`);
  const days = Array.from({ length: dayCount }, (_, i) => `@${keyDayParameter(i)}`).join(', ');
  return `${alias}${PARTITION_COLUMN} IN (${days})`;
}

function insertColumns(): string {
  return [...COLUMN_NAMES, PARTITION_COLUMN].join(', ');
}

/**
 * The MERGE's VALUES: every column from the source, except `processed_at`, which BigQuery stamps
 * itself (`CURRENT_TIMESTAMP()`, the statement's time): a row queued in a batch is not dated by its
 * arrival, so a row written later cannot sort before one a reader has already seen.
 */
function insertValues(): string {
  return [...COLUMN_NAMES, PARTITION_COLUMN]
    .map((c) => (c === COMMIT_TIME_COLUMN ? 'CURRENT_TIMESTAMP()' : `S.${c}`))
    .join(', ');
}

/** The column the store stamps itself, with the statement's start time (`CURRENT_TIMESTAMP()`), not its commit's. */
export const COMMIT_TIME_COLUMN: ColumnName = 'processed_at';

/** The batched lookup of group commit. Parameters: `@keys` (ARRAY<STRING>), `@lookup_since`. */
export function batchLookupSql(table: string): string {
  return (
    `SELECT dedup_key FROM ${quotedTable(table)} ` +
    `WHERE dedup_key IN UNNEST(@keys) AND ${PARTITION_COLUMN} >= @${LOOKUP_PARAMETER}`
  );
}

/**
 * The batched insert-only MERGE of group commit: its source is `UNNEST(@rows)`, an
 * ARRAY<STRUCT<…every column…, key_day>> parameter, so a whole batch is one DML statement and every
 * value stays a typed parameter. A row matches a target row of its key in its key day; the target
 * is pruned to the batch's key days (`@key_day_0` … `@key_day_{dayCount-1}`).
 */
export function batchMergeSql(table: string, dayCount = 1): string {
  return (
    `MERGE ${quotedTable(table)} AS T USING (SELECT * FROM UNNEST(@rows)) AS S ` +
    `ON T.dedup_key = S.dedup_key AND T.${PARTITION_COLUMN} = S.${PARTITION_COLUMN} AND ${keyDaysFilter('T.', dayCount)} ` +
    `WHEN NOT MATCHED THEN INSERT (${insertColumns()}) VALUES (${insertValues()})`
  );
}

/**
 * Which deliveries won a batch whose MERGE inserted fewer rows than it carried: the row now under
 * each key names its `message_id`. Parameters: `@keys` (ARRAY<STRING>), the batch's key days.
 */
export function winnersSql(table: string, dayCount = 1): string {
  return (
    `SELECT dedup_key, message_id FROM ${quotedTable(table)} ` +
    `WHERE dedup_key IN UNNEST(@keys) AND ${keyDaysFilter('', dayCount)}`
  );
}

/**
 * The one statement that moves a table of the earlier layout (partitioned by `processed_at`) into a
 * key-day table without losing or doubling a row: every key's first row (the one the `documents`
 * view shows: the old table may hold two rows of a key, from two MERGEs that raced) is copied with
 * its key day computed as the writer computes it ({@link KEY_DAY_SQL}), unless its key already has
 * a row in that key day of the target (the new writer recorded it first). Running it again copies
 * nothing twice, so it runs once when the new table takes the writes and once more after the last
 * instance of the old revision stopped. An insert-only statement, like the MERGE: it reads the
 * whole source table once (a migration, not a path of every delivery).
 */
export function migrationSql(from: string, to: string): string {
  const columns = [...COLUMN_NAMES, PARTITION_COLUMN].join(', ');
  return (
    `INSERT INTO ${quotedTable(to)} (${columns}) ` +
    `SELECT ${columns} FROM (SELECT ${COLUMN_NAMES.join(', ')}, ${KEY_DAY_SQL} AS ${PARTITION_COLUMN} ` +
    `FROM ${quotedTable(from)} WHERE TRUE ` +
    'QUALIFY ROW_NUMBER() OVER (PARTITION BY dedup_key ORDER BY processed_at, message_id) = 1) AS S ' +
    `WHERE NOT EXISTS (SELECT 1 FROM ${quotedTable(to)} AS T ` +
    `WHERE T.dedup_key = S.dedup_key AND T.${PARTITION_COLUMN} = S.${PARTITION_COLUMN})`
  );
}

type ParameterValue = string | null | { value: string };

/** One statement as the store sends it: its SQL, its named parameters and their types. */
export type Statement = Required<Pick<Query, 'query' | 'params' | 'types'>>;

/** `seenMany()`'s statement: {@link batchLookupSql} (`sql`) for a batch of keys. */
export function batchLookupStatement(
  bigquery: BigQuery,
  sql: string,
  keys: readonly string[],
  now: Date,
): Statement {
  return {
    query: sql,
    params: { keys: [...keys], [LOOKUP_PARAMETER]: bigquery.date(lookupSinceDay(now)) },
    types: { keys: ['STRING'], [LOOKUP_PARAMETER]: 'DATE' },
  };
}

/** The key days a batched MERGE or winners query names, as `@key_day_0` … parameters (DATE each). */
export function keyDayParameters(
  bigquery: BigQuery,
  days: readonly string[],
): { dayParams: Record<string, ParameterValue>; dayTypes: Record<string, string> } {
  return {
    dayParams: Object.fromEntries(days.map((d, i) => [keyDayParameter(i), bigquery.date(d)])),
    dayTypes: Object.fromEntries(days.map((_, i) => [keyDayParameter(i), KEY_DAY_COLUMN.type])),
  };
}

/**
 * A batch's MERGE statement ({@link batchMergeSql}): `@rows` carries every row with its key day
 * (`dayOf`), the target is pruned to `days`, the key days of those rows.
 */
export function batchMergeStatement(
  bigquery: BigQuery,
  table: string,
  rows: readonly Row[],
  days: readonly string[],
  dayOf: (row: Row) => string,
): Statement {
  const { dayParams, dayTypes } = keyDayParameters(bigquery, days);
  const params = rows.map((row) => ({
    ...rowParameters(bigquery, row).params,
    [PARTITION_COLUMN]: bigquery.date(dayOf(row)),
  }));
  return {
    query: batchMergeSql(table, days.length),
    params: { rows: params, ...dayParams },
    types: { rows: [{ ...ROW_PARAMETER_TYPES }], ...dayTypes },
  };
}

/**
 * A row as named query parameters with their types. INT64 values go as decimal strings (the REST
 * API's representation; safe beyond 2^53), the analysis as JSON text, timestamps as BigQuery
 * timestamps; every null keeps its column's type, which BigQuery needs to bind it.
 */
export function rowParameters(
  bigquery: BigQuery,
  row: Row,
): { params: Record<string, ParameterValue>; types: Record<string, string> } {
  const params: Record<string, ParameterValue> = {};
  for (const column of COLUMNS) {
    const value = row[column.name] as unknown;
    if (value === null || value === undefined) {
      params[column.name] = null;
      continue;
    }
    switch (column.type) {
      case 'INT64':
        params[column.name] = String(value);
        break;
      case 'JSON':
        params[column.name] = JSON.stringify(value);
        break;
      case 'TIMESTAMP':
        // The library sends a BigQueryTimestamp's `.value`; a bare string would be lost.
        params[column.name] = bigquery.timestamp(String(value));
        break;
      default:
        params[column.name] = String(value);
    }
  }
  return { params, types: { ...PARAMETER_TYPES } };
}

/** The part of a client error the mapping needs (an ApiError of @google-cloud/common, or a socket error). */
interface ClientError {
  code?: number | string;
  message?: string;
  errors?: Array<{ reason?: string; message?: string }>;
}

/**
 * Maps a BigQuery error to docline's errors: transient ones let Pub/Sub retry; a byte-cap refusal
 * or a permission/table problem is an operator's fix (ConfigurationError → dead letter, replayable).
 */
export function bigQueryError(error: unknown, operation: string): Error {
  const e = (error ?? {}) as ClientError;
  const status = typeof e.code === 'number' ? e.code : undefined;
  const reasons = (e.errors ?? []).map((x) => x.reason ?? '');
  const text = [e.message ?? '', ...(e.errors ?? []).map((x) => x.message ?? '')].join(' ');
  const options = { cause: error };
  const said = `BigQuery ${operation}: ${firstLine(text)}`;
  if (reasons.includes('bytesBilledLimitExceeded') || /exceeded limit for bytes billed/i.test(text)) {
    return new ConfigurationError(
      'bigquery_bytes_billed_limit',
      `BigQuery refused the ${operation} query: its estimate is over maximumBytesBilled (${firstLine(text)}). ` +
        'Raise MAXIMUM_BYTES_BILLED (Pulumi: maximumBytesBilled) to the required value; ' +
        'then replay the dead-lettered messages.',
      options,
    );
  }
  if (/could not serialize access to table .* due to concurrent update/i.test(text)) {
    return new TransientError('bigquery_concurrent_update', said, options);
  }
  if (reasons.includes('timeout') || /job timed out|timed out after/i.test(text)) {
    // Stopped at its jobTimeoutMs (the delivery's deadline): nothing committed, a retry may write.
    return new TransientError('bigquery_timeout', said, options);
  }
  if (/too many dml statements outstanding/i.test(text)) {
    return new TransientError('bigquery_dml_queue_full', said, options);
  }
  if (
    status === 429 ||
    reasons.some((r) => ['rateLimitExceeded', 'userRateLimitExceeded', 'quotaExceeded'].includes(r))
  ) {
    return new TransientError('bigquery_rate_limited', said, options);
  }
  if (
    status === undefined ||
    status === 408 ||
    status >= 500 ||
    reasons.some((r) => ['backendError', 'internalError'].includes(r))
  ) {
    // No HTTP status: the request never got an answer (socket reset, DNS, timeout).
    return new TransientError('bigquery_unavailable', said, options);
  }
  if (status === 401 || status === 403) {
    return new ConfigurationError(
      'bigquery_access_denied',
      `BigQuery denied the ${operation} query (${firstLine(text)}): grant the worker's service account ` +
        'roles/bigquery.dataEditor on the dataset and roles/bigquery.jobUser on the project.',
      options,
    );
  }
  if (status === 404) {
    return new ConfigurationError(
      'bigquery_not_found',
      `${said}. Check BIGQUERY_TABLE and BIGQUERY_LOCATION (the dataset's location).`,
      options,
    );
  }
  if (status === 413 || REQUEST_TOO_LARGE.test(text)) {
    // The request is over BigQuery's size limit: its rows' bytes, so a smaller batch goes in (group
    // commit halves it; a row too large alone fails alone, and goes alone next time).
    return new RowRefusalError('bigquery_request_too_large', said, options);
  }
  if (ROW_VALUE_REFUSAL.test(text)) {
    // A value of one row that the column cannot take: the only refusal worth isolating that row.
    return new RowRefusalError('bigquery_rejected_row', said, options);
  }
  // Any other refusal is about our statement, not the document: an operator must look at it.
  return new ConfigurationError('bigquery_rejected_query', said, options);
}

/**
 * The words BigQuery uses when one value cannot be taken ("Bad int64 value: twelve", "Invalid
 * timestamp: …", "Failed to parse input string", "Invalid JSON …"): a rejection that names a row's
 * content. Anything else that refuses a statement (its byte estimate, its access, a missing table,
 * the SQL itself) is the statement's fault, whichever rows it carries.
 */
const ROW_VALUE_REFUSAL =
  /\b(bad|invalid) (int64|integer|double|float64|bool|boolean|timestamp|date|datetime|json|numeric|bignumeric|utf-?8)\b|\b(int64|timestamp|json|date|numeric) value\b|\bfailed to parse (input|json)\b|\bcannot (parse|coerce) .*\bvalue\b/i;

/** BigQuery's words for a request over its size limit ("Request payload size exceeds the limit: 10485760 bytes."). */
const REQUEST_TOO_LARGE =
  /request payload size exceeds the limit|request (entity )?too large|exceeds the maximum request size/i;

function firstLine(text: string): string {
  return text.trim().split('\n')[0]!.slice(0, 500);
}

/** What `bigquery.query` resolves to with `autoPaginate: false`: rows, next page, the API response. */
type QueryResult = [unknown[], unknown, QueryApiResponse | undefined];
interface QueryApiResponse {
  /** False when the job was still running when the call's wait ended. */
  jobComplete?: boolean;
  dmlStats?: { insertedRowCount?: string };
  numDmlAffectedRows?: string;
}

/** The rows a MERGE inserted, from its job statistics. */
function insertedCount(response: QueryApiResponse | undefined): number {
  const inserted = response?.dmlStats?.insertedRowCount ?? response?.numDmlAffectedRows;
  if (inserted === undefined) {
    // Without statistics the outcome is unknown; a retry is safe (the MERGE is conditional).
    throw new TransientError('bigquery_no_dml_stats', 'BigQuery returned no DML statistics for the MERGE');
  }
  return Number(inserted);
}

/**
 * {@link BatchStore} on BigQuery with an insert-only MERGE. `recordMany()` reads its outcome from the
 * job's `dmlStats.insertedRowCount` (or `numDmlAffectedRows` when the job outlived jobs.query's wait).
 */
export class BigQueryStore implements BatchStore {
  protected readonly bigquery: BigQuery;
  protected readonly table: string;
  protected readonly location: string | undefined;
  protected readonly maximumBytesBilled: number;
  protected readonly labels: Record<string, string>;
  protected readonly logger: Logger | undefined;
  protected readonly clock: Clock;
  private readonly batchLookup: string;
  /** This store's MERGE jobs are named `docline_w_<writerId>_…`, so that `writers()` can count instances. */
  private readonly writerId = randomBytes(6).toString('hex');
  private readonly outcomePollMs: number;
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(options: BigQueryStoreOptions) {
    this.bigquery = options.bigquery;
    this.table = options.table;
    this.location = options.location;
    this.maximumBytesBilled = options.maximumBytesBilled ?? DELIVERY_DEFAULTS.maximumBytesBilled;
    this.labels = { app: 'docline', ...options.labels };
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
    this.outcomePollMs = options.outcomePollMs ?? OUTCOME_POLL_MS;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    if (this.maximumBytesBilled < MIN_MAXIMUM_BYTES_BILLED) {
      throw new ConfigurationError(
        'bigquery_bytes_billed_limit',
        `maximumBytesBilled must be at least ${MIN_MAXIMUM_BYTES_BILLED}: BigQuery bills every query at least 10 MiB`,
      );
    }
    this.batchLookup = batchLookupSql(this.table);
  }

  /** The keys among `keys` with a row of a recent key day: one query for a whole batch. */
  async seenMany(keys: readonly string[], deadline?: Deadline): Promise<Set<string>> {
    if (keys.length === 0) return new Set();
    const [rows] = await this.run(
      'seen',
      deadline,
      batchLookupStatement(this.bigquery, this.batchLookup, keys, this.clock.now()),
    );
    return new Set((rows as Array<{ dedup_key: string }>).map((r) => r.dedup_key));
  }

  /**
   * A batch of rows with distinct keys: one MERGE per {@link MAX_KEY_DAYS_PER_STATEMENT} key days
   * (one, unless the batch carries keys of older days). When BigQuery reports as many inserted rows
   * as a statement held, every row went in; only when it reports fewer does one follow-up query read
   * which `message_id` holds each key.
   */
  async recordMany(rows: readonly Row[], deadline?: Deadline): Promise<Set<string>> {
    const inserted = new Set<string>();
    for (const group of keyDayGroups(rows, (row) => this.keyDayOf(row)))
      for (const key of await this.recordDays(group.rows, group.days, deadline)) inserted.add(key);
    return inserted;
  }

  private async recordDays(rows: readonly Row[], days: string[], deadline?: Deadline): Promise<Set<string>> {
    if (rows.length === 0) return new Set();
    const { dayParams, dayTypes } = keyDayParameters(this.bigquery, days);
    const [, , response] = await this.run(
      'record',
      deadline,
      batchMergeStatement(this.bigquery, this.table, rows, days, (row) => this.keyDayOf(row)),
      `${WRITER_JOB_PREFIX}${this.writerId}_`,
    );
    const keys = rows.map((r) => r.dedup_key);
    if (insertedCount(response) === rows.length) return new Set(keys);
    probe('batch.fewerInserted');
    const winners = await this.winners(
      {
        query: winnersSql(this.table, days.length),
        params: { keys, ...dayParams },
        types: { keys: ['STRING'], ...dayTypes },
      },
      deadline,
    );
    const ours = new Map(rows.map((r) => [r.dedup_key, r.message_id]));
    const inserted = new Set<string>();
    for (const w of winners) {
      if (ours.get(w.dedup_key) === w.message_id) inserted.add(w.dedup_key);
    }
    return inserted;
  }

  /**
   * Who won a batch's keys: a read, never an outcome to look up by job id (jobs.get of a SELECT has
   * no rows: read that way, every key would look lost and its delivery be logged `duplicate`). A
   * lost answer is asked again while the deadline allows; then the batch fails transiently (its
   * rows are in: the retries find them).
   */
  private async winners(
    statement: Pick<Query, 'query' | 'params' | 'types'>,
    deadline: Deadline | undefined,
  ): Promise<Array<{ dedup_key: string; message_id: string }>> {
    for (;;) {
      try {
        const [rows] = await this.run('winners', deadline, statement);
        return rows as Array<{ dedup_key: string; message_id: string }>;
      } catch (error) {
        const again =
          error instanceof TransientError &&
          !(error instanceof DeadlineError) &&
          (deadline?.remainingMs() ?? Number.POSITIVE_INFINITY) > this.outcomePollMs + MIN_STATEMENT_MS;
        if (!again) {
          this.logger?.warn(
            'the MERGE committed but who won its keys could not be read: its deliveries are retried',
            {
              error: error instanceof Error ? error.message : String(error),
            },
          );
          throw error;
        }
        await this.sleep(this.outcomePollMs);
      }
    }
  }

  /**
   * The instances that created a MERGE job in the last {@link WRITERS_WINDOW_MS}, this one included:
   * one `jobs.list` of the caller's jobs (every instance runs as the same service account), free of
   * bytes, counting the distinct writer ids in the job ids (`recordMany` names its jobs).
   */
  async writers(deadline?: Deadline): Promise<number> {
    const listing = this.bigquery.getJobs({
      minCreationTime: String(this.clock.now().getTime() - WRITERS_WINDOW_MS),
      projection: 'minimal',
      maxResults: 1_000,
      autoPaginate: false,
    });
    let jobs: Awaited<typeof listing>[0];
    try {
      [jobs] = await (deadline ? deadline.race('BigQuery jobs.list', listing) : listing);
    } catch (error) {
      throw bigQueryError(error, 'jobs.list');
    }
    const ids = new Set([this.writerId]);
    for (const job of jobs) {
      const match = WRITER_JOB.exec(job.id ?? '');
      if (match) ids.add(match[1]!);
    }
    return ids.size;
  }

  /** Reads the table's metadata: cheap, free, and proves the table and the permission. */
  async ping(): Promise<void> {
    const [project, dataset, table] = this.table.split('.') as [string, string, string];
    try {
      await this.bigquery.dataset(dataset, { projectId: project }).table(table).getMetadata();
    } catch (error) {
      throw bigQueryError(error, 'ping');
    }
  }

  protected keyDayOf(row: Row): string {
    return keyDay(row, this.clock.now());
  }

  /**
   * Runs one statement. With a delivery's deadline, a statement is not started with less than
   * {@link MIN_STATEMENT_MS} left, and it is bounded by that deadline ({@link statementTimeoutMs}):
   * a MERGE that could still commit after its delivery was answered 503 could insert a second row
   * beside the retry's, sorting first in the `documents` view (its `processed_at` is its start).
   * A bounded statement goes through jobs.insert + getQueryResults ({@link untilComplete}: the
   * library does the same for any query with a `jobTimeoutMs`); statements without a deadline
   * (tools, tests) keep jobs.query.
   */
  private async run(
    operation: 'seen' | 'record' | 'winners',
    deadline: Deadline | undefined,
    statement: Pick<Query, 'query' | 'params' | 'types'>,
    jobPrefix?: string,
  ): Promise<QueryResult> {
    const leftMs = deadline?.remainingMs() ?? Number.POSITIVE_INFINITY;
    if (leftMs < MIN_STATEMENT_MS) throw notStarted(`BigQuery ${operation}`, leftMs);
    const timeoutMs = statementTimeoutMs(deadline);
    const query: Query = {
      ...statement,
      ...(timeoutMs === undefined ? {} : { jobTimeoutMs: timeoutMs }),
      useLegacySql: false,
      maximumBytesBilled: String(this.maximumBytesBilled),
      labels: { ...this.labels, op: operation },
      ...(this.location ? { location: this.location } : {}),
    };
    try {
      // autoPaginate false: the promise then carries the API response, where the DML statistics are.
      if (timeoutMs === undefined)
        return (await this.bigquery.query(query, { autoPaginate: false })) as unknown as QueryResult;
      return await this.untilComplete(jobPrefix ? { ...query, jobPrefix } : query, operation, deadline!);
    } catch (error) {
      // The store's own errors (the deadline, an outcome left unknown) keep their meaning.
      const mapped = error instanceof DoclineError ? error : bigQueryError(error, operation);
      if (mapped instanceof ConfigurationError) {
        this.logger?.error(mapped.message, { code: mapped.code, table: this.table, operation });
      }
      throw mapped;
    }
  }

  /**
   * A bounded statement: jobs.insert, then getQueryResults until the job is complete. Each call
   * waits at most ~10 s on BigQuery's side and answers `jobComplete: false` past it (a MERGE may
   * wait longer than that in the table's DML queue); asking again, as long as the deadline allows,
   * reads the outcome instead of answering 503 for a statement that is about to commit. Past the
   * deadline the job is left to its `jobTimeoutMs`.
   *
   * The job's id is chosen here, before jobs.insert: when a MERGE's answer is lost (a 5xx or a reset
   * on jobs.insert or while polling, possibly after it committed), its outcome is read by that id
   * ({@link outcomeOf}) instead of being taken for a failure, after which a retry would write beside
   * a row that did go in.
   */
  private async untilComplete(query: Query, operation: string, deadline: Deadline): Promise<QueryResult> {
    const { jobPrefix, ...statement } = query;
    const jobId = `${jobPrefix ?? JOB_PREFIX}${randomBytes(12).toString('hex')}`;
    const withId = { ...statement, jobId };
    let created = false;
    try {
      const [job] = await this.bigquery.createQueryJob(withId);
      created = true;
      return await this.resultsOf(job, operation, deadline);
    } catch (error) {
      if (operation !== 'record') throw error;
      // Once jobs.insert answered, the job exists and may commit: any failure to read its results
      // (a reset, a 5xx, a rate-limited poll) leaves its outcome to be read by its id, never to a
      // release of the key's lease while it runs. Before, only a lost answer may have created it.
      if (!(created ? resultsUnread(error) : answerLost(error))) throw error;
      return this.outcomeOf(jobId, withId, operation, deadline, error);
    }
  }

  /** getQueryResults until the job is complete, as long as the deadline allows. */
  private async resultsOf(job: JobResponse[0], operation: string, deadline: Deadline): Promise<QueryResult> {
    for (;;) {
      const result = (await job.getQueryResults({ autoPaginate: false })) as unknown as QueryResult;
      if (result[2]?.jobComplete !== false) return result;
      if (deadline.remainingMs() <= 0)
        throw new DeadlineError(`BigQuery ${operation}`, 'the statement was still running at the deadline');
    }
  }

  /**
   * The outcome of a MERGE whose answer was lost, read with jobs.get by its id (free): DONE without
   * an error, its DML statistics; DONE with one, that error (nothing committed). No such job yet:
   * jobs.insert may never have reached BigQuery, or its job is not visible yet, so the statement is
   * inserted again under the same id: a 409 says the job exists (it is read again), a job created
   * now is the only one there will be (ids are unique), and its results are read. While the job
   * runs, or jobs.get itself fails or is rate-limited, it asks again every {@link OUTCOME_POLL_MS},
   * until one poll before the delivery's deadline; then the outcome is unknown
   * ({@link OutcomeUnknownError}): the key's write lease then lives to the statement's bound
   * (core/handle.ts), since the job may still commit.
   */
  private async outcomeOf(
    jobId: string,
    statement: Query,
    operation: string,
    deadline: Deadline,
    lost: unknown,
  ): Promise<QueryResult> {
    const job = this.bigquery.job(jobId, this.location ? { location: this.location } : {});
    let why = lost;
    for (;;) {
      try {
        const [metadata] = (await deadline.race('BigQuery jobs.get', job.getMetadata())) as unknown as [
          JobMetadata,
        ];
        if (metadata.status?.state === 'DONE') {
          const failure = metadata.status.errorResult;
          if (failure) throw bigQueryError({ errors: [failure], message: failure.message }, operation);
          const stats = metadata.statistics?.query;
          return [
            [],
            undefined,
            { jobComplete: true, dmlStats: stats?.dmlStats, numDmlAffectedRows: stats?.numDmlAffectedRows },
          ];
        }
        why = new Error(`the job is ${metadata.status?.state ?? 'in an unknown state'}`);
      } catch (error) {
        if (error instanceof DoclineError && !(error instanceof DeadlineError)) throw error;
        if ((error as ClientError).code === 404) {
          const again = await this.insertAgain(statement, operation, deadline);
          if ('result' in again) return again.result;
          why = again.why;
        } else if (!(error instanceof DeadlineError)) why = error;
      }
      if (deadline.remainingMs() <= this.outcomePollMs) {
        const message = why instanceof Error ? why.message : String(why);
        this.logger?.warn('the outcome of a BigQuery MERGE is unknown: its key stays leased to its bound', {
          jobId,
          error: message,
        });
        throw new OutcomeUnknownError(
          'bigquery_outcome_unknown',
          `BigQuery ${operation}: the answer of job ${jobId} was lost and its outcome could not be read (${firstLine(message)}); it may still commit`,
          { cause: lost },
        );
      }
      await deadline.race('BigQuery jobs.get', this.sleep(this.outcomePollMs), { wait: true });
    }
  }

  /**
   * jobs.insert again with the lost statement's own id: its results when this created the job (the
   * first never did), else why the outcome is still open (a 409: the job exists; a lost answer).
   */
  private async insertAgain(
    statement: Query,
    operation: string,
    deadline: Deadline,
  ): Promise<{ result: QueryResult } | { why: unknown }> {
    try {
      const inserting = this.bigquery.createQueryJob(statement);
      const [job] = await deadline.race('BigQuery jobs.insert', inserting);
      return { result: await this.resultsOf(job, operation, deadline) };
    } catch (error) {
      if (error instanceof DeadlineError) return { why: error };
      if (error instanceof DoclineError) throw error;
      // The job this created ran and failed: a known outcome, nothing committed.
      if (!resultsUnread(error)) throw bigQueryError(error, operation);
      if ((error as ClientError).code === 409)
        return { why: new Error('the job exists (409): reading it again') };
      // Anything else (a lost answer, a rate limit): the first job may still be on its way.
      return { why: error };
    }
  }
}

/** What jobs.get answers that {@link BigQueryStore.outcomeOf} reads. */
interface JobMetadata {
  status?: { state?: string; errorResult?: { reason?: string; message?: string } };
  statistics?: { query?: { dmlStats?: { insertedRowCount?: string }; numDmlAffectedRows?: string } };
}

/**
 * Whether a statement's answer was lost, so that it may have run: a 5xx or no answer at all (a
 * reset, a timeout). A job that answered DONE with its own error, or any 4xx, is a known outcome.
 */
function answerLost(error: unknown): boolean {
  if (error instanceof DoclineError) return false;
  const state = (error as { response?: { status?: { state?: unknown } } }).response?.status?.state;
  if (state === 'DONE') return false;
  const mapped = bigQueryError(error, 'record');
  return mapped instanceof TransientError && mapped.code === 'bigquery_unavailable';
}

/**
 * Whether a failure to read a created job's results leaves its outcome open: anything but a job
 * that answered DONE (with its own error) or the store's own errors (the deadline: the job runs on
 * to its bound, which the caller's lease already covers).
 */
function resultsUnread(error: unknown): boolean {
  if (error instanceof DoclineError) return false;
  const state = (error as { response?: { status?: { state?: unknown } } }).response?.status?.state;
  return state !== 'DONE';
}

/** The prefix of a statement's job id when it has no writer's prefix. */
const JOB_PREFIX = 'docline_';

/** The prefix of a MERGE job's id, then the writer's id and `_` (BigQuery adds a unique suffix). */
const WRITER_JOB_PREFIX = 'docline_w_';
const WRITER_JOB = new RegExp(`^${WRITER_JOB_PREFIX}([0-9a-f]+)_`);
/** The span over which `writers()` counts the instances that wrote. */
export const WRITERS_WINDOW_MS = 60_000;

/**
 * How long a jobs.insert may take to reach BigQuery: a job's `jobTimeoutMs` runs from its creation
 * there, not from when the worker sent it, so it is taken off the time left.
 */
export const JOB_INSERT_ALLOWANCE_MS = 1_000;

/**
 * The `jobTimeoutMs` of a statement started now for a delivery with this deadline: the time left
 * to it, less {@link JOB_INSERT_ALLOWANCE_MS}, so that the job ends by the deadline (undefined: no
 * deadline, no bound). BigQuery stops a
 * job at its timeout with a `timeout` error and without committing, but documents that it "may not
 * always succeed in canceling it before the job completes": the bound is best effort, which is why
 * the key's lease also outlives it (core/key-lease.ts, writeTurn). The fault simulator's warehouse
 * bounds its statements with this same function.
 */
export function statementTimeoutMs(deadline: Deadline | undefined): number | undefined {
  const leftMs = deadline?.remainingMs() ?? Number.POSITIVE_INFINITY;
  return Number.isFinite(leftMs) ? Math.max(1, Math.floor(leftMs) - JOB_INSERT_ALLOWANCE_MS) : undefined;
}

/** The first key day a lookup made at `now` reads (UTC, `YYYY-MM-DD`). */
export function lookupSinceDay(now: Date): string {
  return new Date(now.getTime() - LOOKUP_HORIZON_MS).toISOString().slice(0, 10);
}

/**
 * A batch's rows grouped into statements: by key day, newest first, at most
 * {@link MAX_KEY_DAYS_PER_STATEMENT} days per statement, rows in batch order within each.
 */
export function keyDayGroups<R>(
  rows: readonly R[],
  dayOf: (row: R) => string,
): Array<{ days: string[]; rows: R[] }> {
  const byDay = new Map<string, R[]>();
  for (const row of rows) {
    const day = dayOf(row);
    const list = byDay.get(day);
    if (list) list.push(row);
    else byDay.set(day, [row]);
  }
  const days = [...byDay.keys()].sort().reverse();
  const groups: Array<{ days: string[]; rows: R[] }> = [];
  for (let i = 0; i < days.length; i += MAX_KEY_DAYS_PER_STATEMENT) {
    const chunk = days.slice(i, i + MAX_KEY_DAYS_PER_STATEMENT);
    const wanted = new Set(chunk);
    groups.push({ days: chunk, rows: rows.filter((r) => wanted.has(dayOf(r))) });
  }
  return groups;
}

/**
 * A BigQuery client for the worker: no retries inside the library (Pub/Sub retries the whole
 * delivery with backoff, and a retried request would only hold the push request open longer).
 */
export function createBigQueryClient(options: BigQueryOptions): BigQuery {
  return new BigQuery({ autoRetry: false, ...options });
}
