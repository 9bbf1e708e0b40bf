import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  COLUMN_NAMES,
  COLUMNS,
  type ColumnName,
  KEY_DAY_COLUMN,
  keyDay,
  type Row,
} from '../worker/src/contract/row';
import { BIGQUERY_DML_LIMITS, MIN_MAXIMUM_BYTES_BILLED } from '../worker/src/contract/settings';

/**
 * A BigQuery REST server (v2) that the real @google-cloud/bigquery client talks to: jobs.query,
 * jobs.insert (dry runs included), getQueryResults, jobs.get, jobs.list and tables.get.
 *
 * It does not parse SQL: it recognises docline's statements by their named parameters (`rows` +
 * `key_day_0…` is the batched MERGE; `keys` + `lookup_since` or `key_day_0…` the batched lookup or
 * the winners;
 * `bucket`, `prefix`, `since` (and `until`) reconcile's query) and executes their meaning on rows
 * kept in memory, one table per name the statement quotes. Parameters are checked as BigQuery binds
 * them: values are strings of the column's type, REQUIRED columns are not null, every value arrives
 * as a typed parameter. Within one MERGE two source rows of one key both insert, as BigQuery
 * allows (an insert-only MERGE matches against the table as it was when it started). A statement bills its table's `dedup_key` + `key_day` bytes (every row counted, an
 * upper bound), at least 10 MiB, or the estimate a test sets; refused statements bill nothing. A
 * dry run estimates the partitions the statement's key-day filter names.
 *
 * A statement that fails (a scripted failure, a bad parameter, over its byte cap) is, through
 * jobs.insert, a job created DONE with the error in its status; a published limit refuses the call
 * itself, before any job exists.
 *
 * Every statement runs at once (so two MERGEs of one key run one after the other), the tests
 * script failures (`failNext`, `loseAnswerNext`, …) and every request is recorded. BigQuery's
 * published limits in time (DML queue and rate, latencies) are the fault simulator's warehouse
 * model's (sim/models/warehouse.ts), which the sweep and the burst run on too.
 */

/** BigQuery's error body: `error.errors[].reason` is what the client and the worker read. */
function errorBody(code: number, status: string, reason: string, message: string, domain = 'global') {
  return { error: { code, message, errors: [{ message, domain, reason }], status } };
}

/** A failure to answer with, thrown anywhere while a request is routed. */
class HttpFailure extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`HTTP ${status}`);
  }
}

const failWith = (code: number, status: string, reason: string, message: string, domain?: string) =>
  new HttpFailure(code, errorBody(code, status, reason, message, domain));

const notFound = (what: string) => failWith(404, 'NOT_FOUND', 'notFound', `Not found: ${what}`);
const invalid = (message: string) => failWith(400, 'INVALID_ARGUMENT', 'invalidQuery', message);
const backendError = (message: string) => failWith(503, 'UNAVAILABLE', 'backendError', message);
/** BigQuery's documented 403 for a rate limit (per table DML, or per user per method). */
const rateLimited = (what: string) =>
  failWith(
    403,
    'PERMISSION_DENIED',
    'rateLimitExceeded',
    `Exceeded rate limits: ${what}. For more information, see https://cloud.google.com/bigquery/docs/troubleshoot-quotas`,
    'usageLimits',
  );
/** The refusal of a query whose bytes would pass its `maximumBytesBilled`, before it runs. */
const bytesBilledExceeded = (cap: number, required: number) =>
  failWith(
    400,
    'INVALID_ARGUMENT',
    'bytesBilledLimitExceeded',
    `Query exceeded limit for bytes billed: ${cap}. ${required} or higher required.`,
  );
const tooManyDml = (table: string) =>
  failWith(
    400,
    'INVALID_ARGUMENT',
    'resourcesExceeded',
    `Resources exceeded during query execution: Too many DML statements outstanding against table ${table}, limit is ${BIGQUERY_DML_LIMITS.queued}`,
  );

/** Documented failures a test can script. */
export type BigQueryFailure =
  | 'concurrentUpdate'
  | 'tooManyDml'
  | 'rateLimit'
  | 'internalError'
  | 'backendError'
  | 'bytesBilledLimit'
  | 'accessDenied'
  | 'notFound';

/** The REST error each failure answers with (messages as BigQuery words them). */
export function failureResponse(
  failure: BigQueryFailure,
  table = 'p:d.t',
  maximumBytesBilled = '100000000',
): { status: number; body: unknown } {
  const { status, body } = ((): HttpFailure => {
    switch (failure) {
      case 'concurrentUpdate':
        return invalid(`Could not serialize access to table ${table} due to concurrent update`);
      case 'tooManyDml':
        return tooManyDml(table);
      case 'rateLimit':
        return rateLimited('too many table dml insert operations for this table');
      case 'internalError':
        return failWith(
          500,
          'INTERNAL',
          'internalError',
          'An internal error occurred and the request could not be completed. This is usually caused by a transient issue. Retrying the job with back-off as described in the BigQuery SLA should solve the problem: https://cloud.google.com/bigquery/sla.',
        );
      case 'backendError':
        return backendError('Error encountered during execution. Retrying may solve the problem.');
      case 'bytesBilledLimit':
        return bytesBilledExceeded(Number(maximumBytesBilled), Number(maximumBytesBilled) * 2);
      case 'accessDenied':
        return failWith(
          403,
          'PERMISSION_DENIED',
          'accessDenied',
          'Access Denied: Table p:d.t: User does not have permission to query table p:d.t, or perhaps it does not exist.',
        );
      case 'notFound':
        return notFound('Table p:d.t was not found in location EU');
    }
  })();
  return { status, body };
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
  res.end(JSON.stringify(body));
}

export interface BigQueryServerOptions {
  projectId?: string;
  /** The clock of job creation times and of `CURRENT_TIMESTAMP()` (default: the wall clock). */
  now?: () => Date;
  /** What tables.get answers as `creationTime` (default: when the server starts). */
  tableCreatedAt?: Date;
}

/** A request as the server received it. */
export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

/** A stored row: every column as BigQuery's REST API represents it (strings, or null), and the key day (absent on rows a test put in directly). */
export type StoredRow = Record<ColumnName, string | null> & { key_day?: string | null };

/** A row as the server stores it: every value in its REST form, a string (JSON for the analysis) or null. */
export function storedRow(row: Row): StoredRow {
  const out = {} as StoredRow;
  for (const name of COLUMN_NAMES) {
    const value = row[name] as unknown;
    out[name] =
      value === null || value === undefined
        ? null
        : typeof value === 'object'
          ? JSON.stringify(value)
          : String(value);
  }
  return out;
}

export interface BigQueryServer {
  /** The `apiEndpoint` to give the client. */
  url: string;
  projectId: string;
  /** Every request received, in order. */
  requests: RecordedRequest[];
  /** The statements (SQL text) of every query received, in order. */
  statements(): string[];
  /** The next `count` query requests (jobs.query / jobs.insert) and tables.get fail with this documented error. */
  failNext(count: number, failure: BigQueryFailure): void;
  /** The next `count` jobs.query answers say `jobComplete: false`; results come from getQueryResults. */
  deferNext(count: number): void;
  /** The next `count` getQueryResults answers say `jobComplete: false` (a job still queued or running). */
  deferResultsNext(count: number): void;
  /**
   * The next `count` answers of `where` (jobs.insert, or getQueryResults) are lost after the job ran
   * and committed: the caller gets a 503 `backendError`, a 429 or a connection reset instead.
   */
  loseAnswerNext(count: number, where: 'insert' | 'results', how: 'reset' | 503 | 429): void;
  /** The next `count` getQueryResults answers of a winners query (`SELECT dedup_key, message_id`) are lost (503). */
  loseWinnersNext(count: number): void;
  /** The next `count` jobs.insert requests are lost on their way: the socket resets, no job is created. */
  dropInsertNext(count: number): void;
  /**
   * The next `count` jobs.get answers: a 503, the job still `RUNNING`, or a 404 (a job not visible
   * yet, or never created). A jobs.insert of an id that exists answers 409, as BigQuery does.
   */
  jobGetNext(count: number, answer: 503 | 'RUNNING' | 404): void;
  /** The bytes every statement reports and bills from now on, instead of its table's. */
  setEstimatedBytes(bytes: number): void;
  /** Every row of a table (of every table without one), in insertion order. */
  rows(table?: string): StoredRow[];
  /** Puts a row in a table, as if written earlier. */
  addRow(table: string, row: StoredRow): void;
  stop(): Promise<void>;
}

/** A bound parameter: a scalar (string or null), or an ARRAY of scalars or of STRUCTs. */
interface Bound {
  type: string;
  value: string | null;
  /** ARRAY<scalar>: the element type and values. */
  items?: { type: string; values: Array<string | null> };
  /** ARRAY<STRUCT>: each element's fields, by name, with their declared types. */
  structs?: { fields: Map<string, string>; values: Array<Map<string, string | null>> };
}

interface ParameterType {
  type?: string;
  arrayType?: ParameterType;
  structTypes?: Array<{ name?: string; type?: ParameterType }>;
}
interface ParameterValue {
  value?: unknown;
  arrayValues?: ParameterValue[];
  structValues?: Record<string, ParameterValue>;
}

interface Outcome {
  schema?: { fields: Array<{ name: string; type: string; mode: string }> };
  rows?: Array<{ f: Array<{ v: string }> }>;
  totalRows?: string;
  numDmlAffectedRows?: string;
  dmlStats?: { insertedRowCount: string; updatedRowCount: string; deletedRowCount: string };
}

/** A statement recognised and checked, ready to run against its table. */
interface Statement {
  sql: string;
  table: TableState;
  /** Bytes it reports processed (and bills, at least 10 MiB). */
  bytes: number;
  /** Executes it on the table as it is now. */
  run(): Outcome;
}

interface Job {
  reference: { projectId: string; jobId: string; location: string };
  configuration: unknown;
  sql: string;
  bytes: number;
  outcome: Outcome;
}

interface TableState {
  name: string;
  rows: StoredRow[];
}

const COLUMN_TYPES = new Map<string, { type: string; required: boolean }>(
  [...COLUMNS, KEY_DAY_COLUMN].map((c) => [c.name, { type: c.type, required: c.mode === 'REQUIRED' }]),
);
/** What a MERGE row carries, in order: every column, then the layout's key day. */
const MERGE_COLUMNS = [...COLUMN_NAMES, KEY_DAY_COLUMN.name];

const stringField = (name: string) => ({ name, type: 'STRING', mode: 'NULLABLE' });
const selectOutcome = (fields: Outcome['schema'] & object, rows: string[][]): Outcome => ({
  schema: fields,
  totalRows: String(rows.length),
  ...(rows.length ? { rows: rows.map((r) => ({ f: r.map((v) => ({ v })) })) } : {}),
});

/** A scalar parameter value: the REST API's QueryParameterValue.value is a string; protobuf JSON refuses a number. */
function scalar(name: string, raw: unknown): string | null {
  if (raw !== undefined && raw !== null && typeof raw !== 'string') {
    throw invalid(
      `Invalid value at 'query_parameters.parameter_value.value' (TYPE_STRING), ${JSON.stringify(raw)} (${name})`,
    );
  }
  return (raw as string | null | undefined) ?? null;
}

function parameters(list: unknown): Map<string, Bound> {
  if (!Array.isArray(list)) throw invalid('Query parameters are missing: docline always binds its values');
  const out = new Map<string, Bound>();
  for (const p of list as Array<{
    name?: string;
    parameterType?: ParameterType;
    parameterValue?: ParameterValue;
  }>) {
    const type = p.parameterType?.type;
    if (!p.name || !type) throw invalid(`Query parameter ${p.name ?? '(unnamed)'} has no type`);
    if (type !== 'ARRAY') {
      out.set(p.name, { type, value: scalar(p.name, p.parameterValue?.value) });
      continue;
    }
    const element = p.parameterType?.arrayType;
    const values = p.parameterValue?.arrayValues ?? [];
    if (element?.type === 'STRUCT') {
      const fields = new Map<string, string>();
      for (const f of element.structTypes ?? []) {
        if (!f.name || !f.type?.type) throw invalid(`STRUCT field of ${p.name} has no name or type`);
        fields.set(f.name, f.type.type);
      }
      const structs = values.map((v) => {
        const row = new Map<string, string | null>();
        for (const name of fields.keys()) row.set(name, scalar(name, v.structValues?.[name]?.value));
        return row;
      });
      out.set(p.name, { type: 'ARRAY', value: null, structs: { fields, values: structs } });
    } else if (element?.type) {
      out.set(p.name, {
        type: 'ARRAY',
        value: null,
        items: { type: element.type, values: values.map((v) => scalar(p.name!, v.value)) },
      });
    } else throw invalid(`ARRAY parameter ${p.name} has no element type`);
  }
  return out;
}

function checkValue(column: string, type: string, value: string | null): void {
  const expected = COLUMN_TYPES.get(column)!;
  if (type !== expected.type) {
    throw invalid(`Value of type ${type} cannot be assigned to ${column}, which has type ${expected.type}`);
  }
  if (value === null) {
    if (expected.required) throw invalid(`Required field ${column} cannot be null`);
    return;
  }
  if (type === 'INT64' && !/^-?\d{1,19}$/.test(value)) throw invalid(`Invalid INT64 value: ${value}`);
  if (type === 'TIMESTAMP' && Number.isNaN(Date.parse(value))) throw invalid(`Invalid timestamp: '${value}'`);
  if (type === 'JSON') {
    try {
      JSON.parse(value);
    } catch {
      throw invalid(`Invalid JSON literal: ${value.slice(0, 40)}`);
    }
  }
}

function dateParam(params: Map<string, Bound>, name: string): string {
  const d = params.get(name);
  if (d?.type !== 'DATE' || d.value === null || !/^\d{4}-\d{2}-\d{2}$/.test(d.value)) {
    throw invalid(`${name} must be a non-null DATE parameter`);
  }
  return d.value;
}

/** The key days a batched MERGE or a winners query prunes to: `@key_day_0` … in order. */
function keyDays(params: Map<string, Bound>): Set<string> {
  const days = new Set<string>();
  for (let i = 0; params.has(`key_day_${i}`); i++) days.add(dateParam(params, `key_day_${i}`));
  if (days.size === 0) throw invalid('a MERGE of a batch names its key days (@key_day_0, …)');
  return days;
}

/** A row's key day (a row put in directly has its day computed from it). */
const dayOf = (row: StoredRow) =>
  row.key_day ?? keyDay(row as unknown as Row, new Date(row.processed_at ?? 0));

/** The table a statement names: its first backquoted identifier. */
function tableOf(sql: string): string {
  const m = /`([^`]+)`/.exec(sql);
  if (!m) throw invalid('the statement names no table');
  return m[1]!;
}

/** A job's statistics as jobs.insert and jobs.get report them. */
function jobStatistics(outcome: Outcome): Record<string, unknown> {
  return {
    totalBytesProcessed: '0',
    ...(outcome.numDmlAffectedRows !== undefined
      ? { numDmlAffectedRows: outcome.numDmlAffectedRows, dmlStats: outcome.dmlStats, statementType: 'MERGE' }
      : { statementType: 'SELECT' }),
  };
}

/** Bytes of `dedup_key` + `key_day` billed per row of the table. */
const BYTES_READ_PER_ROW = 75;

/** Starts the server on 127.0.0.1 on a free port. */
export async function startBigQueryServer(options: BigQueryServerOptions = {}): Promise<BigQueryServer> {
  const projectId = options.projectId ?? 'acme-dev';
  const now = options.now ?? (() => new Date());
  const tableCreationMs = (options.tableCreatedAt ?? now()).getTime();

  const tables = new Map<string, TableState>();
  const jobs = new Map<string, Job>();
  /** Jobs created by jobs.insert, in order, with their creation time (the worker's clock), for jobs.list. */
  const created: Array<{ reference: Job['reference']; creationMs: number }> = [];
  const requests: RecordedRequest[] = [];
  // What the tests script.
  const failures: BigQueryFailure[] = [];
  let deferred = 0;
  let deferredResults = 0;
  const lost: Array<{ where: 'insert' | 'results'; how: 'reset' | 503 | 429 }> = [];
  const jobGets: Array<503 | 'RUNNING' | 404> = [];
  let droppedInserts = 0;
  let lostWinners = 0;
  let estimatedBytes: number | undefined;

  const tableState = (name: string): TableState => {
    let t = tables.get(name);
    if (!t) {
      t = { name, rows: [] };
      tables.set(name, t);
    }
    return t;
  };

  /** Throws the next scripted failure, if any. */
  function scriptedFailure(table?: string, maximumBytesBilled?: unknown): void {
    const failure = failures.shift();
    if (!failure) return;
    const f = failureResponse(
      failure,
      table,
      maximumBytesBilled === undefined ? undefined : String(maximumBytesBilled),
    );
    throw new HttpFailure(f.status, f.body);
  }

  /** Answers a request whose work is done with the loss scripted for `where`, if any: true when lost. */
  function lose(res: ServerResponse, where: 'insert' | 'results'): boolean {
    if (lost[0]?.where !== where) return false;
    const { how } = lost.shift()!;
    if (how === 'reset') res.socket?.destroy();
    else if (how === 429)
      sendJson(
        res,
        429,
        errorBody(
          429,
          'RESOURCE_EXHAUSTED',
          'rateLimitExceeded',
          'Exceeded rate limits: too many API requests per user per method',
        ),
      );
    else {
      const { status, body } = backendError(
        'Error encountered during execution. Retrying may solve the problem.',
      );
      sendJson(res, status, body);
    }
    return true;
  }

  /** Recognises one statement by its parameters and checks them; throws HttpFailure as BigQuery would answer. */
  function prepare(config: Record<string, unknown>): Statement {
    scriptedFailure(`${projectId}:d.t`, config.maximumBytesBilled ?? '100000000');
    if (config.useLegacySql !== false)
      throw invalid('docline queries must use GoogleSQL (useLegacySql: false)');
    const sql = typeof config.query === 'string' ? config.query.trim() : '';
    const table = tableState(tableOf(sql));
    const bytes =
      estimatedBytes ?? Math.max(MIN_MAXIMUM_BYTES_BILLED, table.rows.length * BYTES_READ_PER_ROW);
    const cap = config.maximumBytesBilled === undefined ? undefined : Number(config.maximumBytesBilled);
    if (cap !== undefined && cap < bytes)
      throw bytesBilledExceeded(cap, Math.max(bytes, MIN_MAXIMUM_BYTES_BILLED));
    const params = parameters(config.queryParameters);
    const names = [...params.keys()].sort();
    const scalarNames = names.filter((n) => !/^key_day_\d+$/.test(n));
    const select = (run: () => Outcome): Statement => ({ sql, table, bytes, run });

    if (names.join() === 'keys,lookup_since' || (scalarNames.join() === 'keys' && names.length > 1)) {
      const keys = params.get('keys')!;
      if (keys.items?.type !== 'STRING' || keys.items.values.some((k) => k === null))
        throw invalid('keys must be an ARRAY<STRING> without nulls');
      const wanted = new Set(keys.items.values as string[]);
      // The batched lookup selects the keys; the winners query also selects who holds each key.
      const withMessage = /\bmessage_id\b/.test(sql.split(/\bFROM\b/)[0] ?? '');
      const since = params.has('lookup_since') ? dateParam(params, 'lookup_since') : undefined;
      const days = since === undefined ? keyDays(params) : undefined;
      const matches = (day: string) => (since === undefined ? days!.has(day) : day >= since);
      return select(() => {
        const hits = table.rows.filter((r) => wanted.has(r.dedup_key!) && matches(dayOf(r)));
        const fields = [stringField('dedup_key'), ...(withMessage ? [stringField('message_id')] : [])];
        return selectOutcome(
          { fields },
          hits.map((r) => [r.dedup_key!, ...(withMessage ? [r.message_id!] : [])]),
        );
      });
    }
    if (names.join() === 'bucket,prefix,since' || names.join() === 'bucket,prefix,since,until')
      return select(reconcileQuery(table, params));

    if (scalarNames.join() !== 'rows')
      throw invalid(
        `docline's BigQuery server knows only docline's statements (parameters: ${names.join(', ')})`,
      );
    const rows = params.get('rows')!;
    if (!rows.structs) throw invalid('rows must be an ARRAY<STRUCT<…>>');
    const declared = [...rows.structs.fields.keys()];
    if (declared.join() !== MERGE_COLUMNS.join())
      throw invalid(`rows must carry every column in table order, then key_day (got ${declared.join(', ')})`);
    const days = keyDays(params);
    const source = rows.structs.values.map((fields) => {
      const row = {} as StoredRow;
      for (const column of MERGE_COLUMNS) {
        const value = fields.get(column) ?? null;
        checkValue(column, rows.structs!.fields.get(column)!, value);
        (row as Record<string, string | null>)[column] = value;
      }
      // BigQuery would read only the named partitions: a row of another day would be matched against nothing.
      if (!days.has(row.key_day!))
        throw invalid(`a row's key_day ${row.key_day} is not among the statement's key days`);
      return row;
    });

    // `CURRENT_TIMESTAMP()` is the statement's start time.
    const startedAt = /CURRENT_TIMESTAMP\(\)/.test(sql) ? now().toISOString() : undefined;
    return {
      sql,
      table,
      bytes,
      run() {
        const wanted = new Set(source.map((r) => r.dedup_key));
        const existing = new Set<string>();
        for (const r of table.rows) if (wanted.has(r.dedup_key)) existing.add(`${r.dedup_key}\n${dayOf(r)}`);
        let inserted = 0;
        // A row matches a target row of its key in its own key day (the ON clause); the statement is
        // atomic (it failed whole, above, before inserting anything).
        for (const row of source) {
          if (existing.has(`${row.dedup_key}\n${row.key_day}`)) continue;
          if (startedAt) row.processed_at = startedAt;
          table.rows.push(row);
          inserted++;
        }
        return {
          numDmlAffectedRows: String(inserted),
          dmlStats: { insertedRowCount: String(inserted), updatedRowCount: '0', deletedRowCount: '0' },
        };
      },
    };
  }

  /**
   * reconcile's query: the distinct object URIs of one bucket and name prefix, from the key day of
   * a time on, and before the key day of `until` when it has one.
   */
  function reconcileQuery(table: TableState, params: Map<string, Bound>): () => Outcome {
    const bucket = params.get('bucket')!;
    const prefix = params.get('prefix')!;
    const since = params.get('since')!;
    const until = params.get('until');
    if (
      bucket.type !== 'STRING' ||
      prefix.type !== 'STRING' ||
      since.type !== 'TIMESTAMP' ||
      (until !== undefined && until.type !== 'TIMESTAMP')
    )
      throw invalid('reconcile parameters must be bucket STRING, prefix STRING, since (and until) TIMESTAMP');
    const day = (b: Bound) => new Date(Date.parse(b.value ?? '')).toISOString().slice(0, 10);
    return () => {
      const uris = new Set(
        table.rows
          .filter(
            (r) =>
              r.bucket === bucket.value &&
              (r.object_name ?? '').startsWith(prefix.value ?? '') &&
              dayOf(r) >= day(since) &&
              (until === undefined || dayOf(r) < day(until)),
          )
          .map((r) => r.object_uri!),
      );
      return {
        schema: { fields: [stringField('object_uri')] },
        totalRows: String(uris.size),
        rows: [...uris].map((v) => ({ f: [{ v }] })),
      };
    };
  }

  /**
   * A dry run's `totalBytesProcessed`: the bytes of the columns the statement reads in the
   * partitions its key-day filter names. A filter counts only when it compares the target's
   * `key_day` with parameters (`key_day >= @p`, `key_day >= DATE(@ts)`, `key_day < DATE(@ts)`,
   * `key_day = @p`, `key_day IN (@p, …)`; comparisons joined by AND all hold), as BigQuery prunes by
   * constants; `T.key_day = S.key_day`, a join condition, prunes nothing, and a statement without
   * such a filter is estimated at the whole table. A MERGE reads `dedup_key` + `key_day` of its
   * target; a SELECT the columns it names.
   */
  function dryRunEstimate(config: Record<string, unknown>): number {
    if (config.useLegacySql !== false)
      throw invalid('docline queries must use GoogleSQL (useLegacySql: false)');
    const params =
      config.queryParameters === undefined ? new Map<string, Bound>() : parameters(config.queryParameters);
    const sql = String(config.query ?? '');
    const column = KEY_DAY_COLUMN.name;
    const compares = [
      ...sql.matchAll(new RegExp(`\\b(?:T\\.)?${column}\\s*(>=|<|=)\\s*(?:DATE\\()?@(\\w+)`, 'g')),
    ];
    const among = new RegExp(`\\b(?:T\\.)?${column}\\s+IN\\s*\\(([^)]*)\\)`).exec(sql);
    let read: (day: string) => boolean = () => true;
    if (among) {
      const days = new Set(among[1]!.split(',').map((p) => dateParam(params, p.trim().replace(/^@/, ''))));
      read = (day) => days.has(day);
    } else if (compares.length > 0) {
      const tests = compares.map((compare) => {
        const p = params.get(compare[2]!);
        const bound =
          p?.type === 'TIMESTAMP' && p.value !== null
            ? new Date(Date.parse(p.value)).toISOString().slice(0, 10)
            : dateParam(params, compare[2]!);
        return compare[1] === '>='
          ? (day: string) => day >= bound
          : compare[1] === '<'
            ? (day: string) => day < bound
            : (day: string) => day === bound;
      });
      read = (day) => tests.every((t) => t(day));
    }
    const columns = /^\s*MERGE\b/i.test(sql)
      ? ['dedup_key', column]
      : MERGE_COLUMNS.filter((c) => new RegExp(`\\b${c}\\b`).test(sql));
    const bytesOf = (r: StoredRow, c: string) => {
      if (c === column) return 8;
      const type = COLUMN_TYPES.get(c)!.type;
      const value = (r as Record<string, string | null>)[c];
      return type === 'STRING' || type === 'JSON' ? 2 + Buffer.byteLength(value ?? '', 'utf8') : 8;
    };
    return tableState(tableOf(sql))
      .rows.filter((r) => read(dayOf(r)))
      .reduce((bytes, r) => bytes + columns.reduce((n, c) => n + bytesOf(r, c), 0), 0);
  }

  /** Creates the job of a statement and runs it at once. */
  function start(statement: Statement, reference: Job['reference'], configuration: unknown): Job {
    const outcome = statement.run();
    const job: Job = { reference, configuration, sql: statement.sql, bytes: statement.bytes, outcome };
    jobs.set(reference.jobId, job);
    return job;
  }

  /** jobs.query's and getQueryResults' answer (getQueryResults has no dmlStats, only numDmlAffectedRows). */
  function answerResults(
    res: ServerResponse,
    kind: string,
    job: Job,
    outcome: Outcome | HttpFailure | undefined,
  ) {
    if (outcome instanceof HttpFailure) return sendJson(res, outcome.status, outcome.body);
    if (!outcome) return sendJson(res, 200, { kind, jobReference: job.reference, jobComplete: false });
    const body =
      kind === 'bigquery#queryResponse'
        ? outcome
        : Object.fromEntries(Object.entries(outcome).filter(([k]) => k !== 'dmlStats'));
    return sendJson(res, 200, {
      kind,
      jobReference: job.reference,
      jobComplete: true,
      cacheHit: false,
      totalBytesProcessed: String(job.bytes),
      totalBytesBilled: String(Math.max(job.bytes, MIN_MAXIMUM_BYTES_BILLED)),
      ...body,
    });
  }

  /** A job resource as jobs.insert and jobs.get answer it. */
  function jobResource(reference: Job['reference'], configuration: unknown, outcome?: Outcome | HttpFailure) {
    const resource = {
      kind: 'bigquery#job',
      id: `${projectId}:${reference.location}.${reference.jobId}`,
      jobReference: reference,
      configuration,
    };
    if (!outcome) return { ...resource, status: { state: 'RUNNING' } };
    if (outcome instanceof HttpFailure) {
      const failed = (outcome.body as { error: { errors: unknown[] } }).error.errors[0];
      return { ...resource, status: { state: 'DONE', errorResult: failed, errors: [failed] } };
    }
    return { ...resource, status: { state: 'DONE' }, statistics: { query: jobStatistics(outcome) } };
  }

  const newReference = (location: unknown, jobId = `job_${randomUUID().replaceAll('-', '')}`) => ({
    projectId,
    jobId,
    location: typeof location === 'string' ? location : 'US',
  });

  async function route(req: IncomingMessage, res: ServerResponse, body: unknown, url: URL): Promise<void> {
    const prefix = `/bigquery/v2/projects/${projectId}`;
    const path = url.pathname.startsWith(prefix) ? url.pathname.slice(prefix.length) : null;
    if (req.method === 'POST' && path === '/queries') {
      const request = body as Record<string, unknown>;
      const job = start(prepare(request), newReference(request.location), { query: request });
      if (deferred > 0) {
        deferred -= 1;
        return answerResults(res, 'bigquery#queryResponse', job, undefined);
      }
      return answerResults(res, 'bigquery#queryResponse', job, job.outcome);
    }
    if (req.method === 'POST' && path === '/jobs') {
      const insert = body as {
        jobReference?: { jobId?: string; location?: string };
        configuration?: { query?: Record<string, unknown>; dryRun?: boolean };
      };
      const configuration = insert.configuration;
      const reference = newReference(insert.jobReference?.location, insert.jobReference?.jobId);
      if (configuration?.dryRun === true) {
        // A dry run is answered at once, with its estimate; no job is kept and nothing runs.
        const estimate = String(dryRunEstimate(configuration.query ?? {}));
        return sendJson(res, 200, {
          kind: 'bigquery#job',
          jobReference: reference,
          configuration,
          status: { state: 'DONE' },
          statistics: { totalBytesProcessed: estimate, query: { totalBytesProcessed: estimate } },
        });
      }
      if (droppedInserts > 0) {
        droppedInserts -= 1;
        res.socket?.destroy();
        return;
      }
      if (jobs.has(reference.jobId))
        throw failWith(
          409,
          'ALREADY_EXISTS',
          'duplicate',
          `Already Exists: Job ${projectId}:${reference.location}.${reference.jobId}`,
        );
      let statement: Statement;
      try {
        statement = prepare(configuration?.query ?? {});
      } catch (error) {
        if (!(error instanceof HttpFailure)) throw error;
        // A statement that fails is a job created DONE, with its error in the status (none is kept).
        return sendJson(res, 200, jobResource(reference, configuration, error));
      }
      const job = start(statement, reference, configuration);
      created.push({ reference, creationMs: now().getTime() });
      if (lose(res, 'insert')) return;
      return sendJson(res, 200, jobResource(reference, configuration, job.outcome));
    }
    const results = path === null ? null : /^\/queries\/([^/]+)$/.exec(path);
    if (req.method === 'GET' && results) {
      const job = jobs.get(decodeURIComponent(results[1]!));
      if (!job) throw notFound('Job');
      if (deferredResults > 0) {
        deferredResults -= 1;
        return answerResults(res, 'bigquery#getQueryResultsResponse', job, undefined);
      }
      if (lostWinners > 0 && job.sql.startsWith('SELECT dedup_key, message_id')) {
        lostWinners -= 1;
        throw backendError('Backend error.');
      }
      if (lose(res, 'results')) return;
      return answerResults(res, 'bigquery#getQueryResultsResponse', job, job.outcome);
    }
    // jobs.list (free, no bytes): the caller's jobs created at or after minCreationTime (ms), newest first.
    if (req.method === 'GET' && path === '/jobs') {
      const since = Number(url.searchParams.get('minCreationTime') ?? 0);
      const listed = created
        .filter((j) => j.creationMs >= since)
        .reverse()
        .map(({ reference, creationMs }) => ({
          kind: 'bigquery#job',
          id: `${reference.projectId}:${reference.location}.${reference.jobId}`,
          jobReference: reference,
          statistics: { creationTime: String(creationMs) },
        }));
      return sendJson(res, 200, { kind: 'bigquery#jobList', jobs: listed });
    }
    const jobGet = path === null ? null : /^\/jobs\/([^/]+)$/.exec(path);
    if (req.method === 'GET' && jobGet) {
      const job = jobs.get(decodeURIComponent(jobGet[1]!));
      if (!job) throw notFound('Job');
      const scripted = jobGets.shift();
      if (scripted === 404) throw notFound('Job');
      if (scripted === 503) throw backendError('Backend error.');
      const resource = jobResource(
        job.reference,
        job.configuration,
        scripted === 'RUNNING' ? undefined : job.outcome,
      );
      return sendJson(res, 200, resource);
    }
    const tableGet = path === null ? null : /^\/datasets\/([^/]+)\/tables\/([^/]+)$/.exec(path);
    if (req.method === 'GET' && tableGet) {
      scriptedFailure();
      const [, dataset, tableId] = tableGet as unknown as [string, string, string];
      return sendJson(res, 200, {
        kind: 'bigquery#table',
        id: `${projectId}:${dataset}.${tableId}`,
        tableReference: { projectId, datasetId: dataset, tableId },
        timePartitioning: { type: 'DAY', field: KEY_DAY_COLUMN.name },
        numRows: String(tables.get(`${projectId}.${dataset}.${tableId}`)?.rows.length ?? 0),
        creationTime: String(tableCreationMs),
      });
    }
    throw notFound(`${req.method} ${url.pathname}`);
  }

  async function receive(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://bigquery');
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch (error) {
      // A request body that is not JSON: BigQuery's 400 `invalid`.
      return sendJson(res, 400, errorBody(400, 'INVALID_ARGUMENT', 'invalid', (error as Error).message));
    }
    requests.push({
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers: req.headers,
      body,
    });
    try {
      await route(req, res, body, url);
    } catch (error) {
      if (!(error instanceof HttpFailure)) throw error;
      sendJson(res, error.status, error.body);
    }
  }

  const server = createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    receive(req, res).catch((error: unknown) => {
      sendJson(res, 500, errorBody(500, 'INTERNAL', 'internalError', `bigquery-rest: ${String(error)}`));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const all = (table?: string) =>
    table ? (tables.get(table)?.rows ?? []) : [...tables.values()].flatMap((t) => t.rows);
  return {
    url: `http://127.0.0.1:${port}`,
    projectId,
    requests,
    statements: () =>
      requests
        .map((r) => {
          const b = r.body as
            | { query?: unknown; configuration?: { query?: { query?: unknown } } }
            | undefined;
          return b?.configuration?.query?.query ?? b?.query;
        })
        .filter((q): q is string => typeof q === 'string'),
    failNext(count, failure) {
      for (let i = 0; i < count; i += 1) failures.push(failure);
    },
    deferNext(count) {
      deferred += count;
    },
    deferResultsNext(count) {
      deferredResults += count;
    },
    loseAnswerNext(count, where, how) {
      for (let i = 0; i < count; i += 1) lost.push({ where, how });
    },
    loseWinnersNext(count) {
      lostWinners += count;
    },
    dropInsertNext(count) {
      droppedInserts += count;
    },
    jobGetNext(count, answer) {
      for (let i = 0; i < count; i += 1) jobGets.push(answer);
    },
    setEstimatedBytes(bytes) {
      estimatedBytes = bytes;
    },
    rows: (table) => all(table).map((r) => ({ ...r })),
    addRow(table, row) {
      tableState(table).rows.push({ ...row });
    },
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

/**
 * Credentials for a client pointed at a local server: a real google-auth-library client holding a
 * static, unexpired access token, so the library's own auth path runs and sends `Authorization: Bearer`.
 */
export async function staticTokenAuth(
  token = 'fake-token',
): Promise<import('google-auth-library').GoogleAuth> {
  const { GoogleAuth, OAuth2Client } = await import('google-auth-library');
  const client = new OAuth2Client();
  client.setCredentials({ access_token: token, expiry_date: Date.now() + 60 * 60 * 1000 });
  return new GoogleAuth({ authClient: client });
}

/** A real @google-cloud/bigquery client for a local server at `url`: a static token, no retries of its own. */
export async function localBigQuery(
  url: string,
  projectId: string,
): Promise<import('@google-cloud/bigquery').BigQuery> {
  const { BigQuery } = await import('@google-cloud/bigquery');
  // The client's own google-auth-library types differ from the top-level one's; the object is the same kind.
  return new BigQuery({
    projectId,
    apiEndpoint: url,
    authClient: (await staticTokenAuth()) as never,
    autoRetry: false,
  });
}
