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
} from '../../src/contract/row';
import {
  answerFailure,
  bigQueryError,
  type CreatedJob,
  errorBody,
  HttpFailure,
  jobListBody,
  sendJson,
} from './bigquery-rest';

/**
 * A local stand-in for the BigQuery REST API (v2), enough for @google-cloud/bigquery to run
 * docline's two statements: jobs.query (`POST /bigquery/v2/projects/P/queries`), jobs.insert
 * (`POST …/jobs`), getQueryResults (`GET …/queries/JOB`), jobs.get and tables.get.
 *
 * It does not parse SQL: it recognises the statement by its named parameters (`dedup_key` +
 * `lookup_since` is the lookup; every column + `key_day` is the MERGE; `rows` + `key_day_0…` the
 * batched MERGE; `keys` + `lookup_since` or `key_day_0…` the batched lookup or the winners) and executes their
 * meaning on rows kept in memory. Parameters are checked as BigQuery would bind them (values are
 * strings, each of the column's type, REQUIRED columns not null). The byte cap is checked against
 * a configurable estimate (at least the 10 MiB that any query bills). Errors use the documented
 * REST error bodies. Every request is recorded.
 *
 * What it cannot honour: two MERGEs of one key run here one after the other (Node serialises
 * them), whereas BigQuery may let both insert; partition pruning is modelled for dry runs only (`dryRun: true`:
 * the estimate of the partitions a statement's key-day filter names); a statement that runs is
 * estimated at whatever the test sets.
 */

/** A request as the fake received it. */
export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

/** A stored row: each column as BigQuery's REST API represents it (strings, or null). */
/** A stored row: every column, and the layout's key day (absent on rows a test put in directly). */
export type StoredRow = Record<ColumnName, string | null> & { key_day?: string | null };

/** A row as the fake stores it: every value in its REST form, a string (JSON for the analysis) or null. */
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

/** Documented failures the fake can answer with. */
export type BigQueryFailure =
  | 'concurrentUpdate'
  | 'tooManyDml'
  | 'rateLimit'
  | 'internalError'
  | 'backendError'
  | 'bytesBilledLimit'
  | 'accessDenied'
  | 'notFound';

export interface FakeBigQuery {
  /** The `apiEndpoint` to give the client. */
  url: string;
  projectId: string;
  requests: RecordedRequest[];
  /** The statements (SQL text) of every query received, in order. */
  statements(): string[];
  /** The next `count` query requests (jobs.query / jobs.insert) fail with this documented error. */
  failNext(count: number, failure: BigQueryFailure): void;
  /** The next `count` jobs.query answers say `jobComplete: false`; results come from getQueryResults. */
  deferNext(count: number): void;
  /** The next `count` getQueryResults answers say `jobComplete: false` (a job still queued or running). */
  deferResultsNext(count: number): void;
  /**
   * The next `count` answers of `where` (jobs.insert, or getQueryResults) are lost after the job ran
   * and committed: the caller gets a 503 `backendError` or a connection reset instead.
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
  /** The bytes the pre-run estimate of each query reports (default 10 MiB, BigQuery's minimum). */
  setEstimatedBytes(bytes: number): void;
  rows(): StoredRow[];
  /** Puts a row in the table, as if written earlier (for window tests). */
  addRow(row: StoredRow): void;
  stop(): Promise<void>;
}

const MIN_BILLED_BYTES = 10 * 1024 * 1024;
const COLUMN_TYPES = new Map<string, { type: string; required: boolean }>(
  [...COLUMNS, KEY_DAY_COLUMN].map((c) => [c.name, { type: c.type, required: c.mode === 'REQUIRED' }]),
);
/** The columns a MERGE row carries, in order: every column, then the key day. */
const MERGE_COLUMNS = [...COLUMN_NAMES, KEY_DAY_COLUMN.name];

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
interface QueryParameter {
  name?: string;
  parameterType?: ParameterType;
  parameterValue?: ParameterValue;
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

interface Outcome {
  schema?: { fields: Array<{ name: string; type: string; mode: string }> };
  rows?: Array<{ f: Array<{ v: string }> }>;
  totalRows?: string;
  numDmlAffectedRows?: string;
  dmlStats?: { insertedRowCount: string; updatedRowCount: string; deletedRowCount: string };
}

/** The REST error each failure answers with (messages as BigQuery words them). */
export function failureResponse(
  failure: BigQueryFailure,
  table = 'p:d.t',
  maximumBytesBilled = '100000000',
): { status: number; body: unknown } {
  switch (failure) {
    case 'concurrentUpdate':
      return {
        status: 400,
        body: errorBody(
          400,
          'INVALID_ARGUMENT',
          'invalidQuery',
          `Could not serialize access to table ${table} due to concurrent update`,
        ),
      };
    case 'tooManyDml':
      return {
        status: 400,
        body: errorBody(
          400,
          'INVALID_ARGUMENT',
          'resourcesExceeded',
          `Resources exceeded during query execution: Too many DML statements outstanding against table ${table}, limit is 20`,
        ),
      };
    case 'rateLimit':
      return {
        status: 403,
        body: errorBody(
          403,
          'PERMISSION_DENIED',
          'rateLimitExceeded',
          'Exceeded rate limits: too many table dml insert operations for this table. For more information, see https://cloud.google.com/bigquery/docs/troubleshoot-quotas',
          'usageLimits',
        ),
      };
    case 'internalError':
      return {
        status: 500,
        body: errorBody(
          500,
          'INTERNAL',
          'internalError',
          'An internal error occurred and the request could not be completed. This is usually caused by a transient issue. Retrying the job with back-off as described in the BigQuery SLA should solve the problem: https://cloud.google.com/bigquery/sla.',
        ),
      };
    case 'backendError':
      return {
        status: 503,
        body: errorBody(
          503,
          'UNAVAILABLE',
          'backendError',
          'Error encountered during execution. Retrying may solve the problem.',
        ),
      };
    case 'bytesBilledLimit': {
      const { status, body } = bigQueryError.bytesBilledExceeded(
        Number(maximumBytesBilled),
        Number(maximumBytesBilled) * 2,
      );
      return { status, body };
    }
    case 'accessDenied':
      return {
        status: 403,
        body: errorBody(
          403,
          'PERMISSION_DENIED',
          'accessDenied',
          'Access Denied: Table p:d.t: User does not have permission to query table p:d.t, or perhaps it does not exist.',
        ),
      };
    case 'notFound':
      return {
        status: 404,
        body: errorBody(404, 'NOT_FOUND', 'notFound', 'Not found: Table p:d.t was not found in location EU'),
      };
  }
}

/** Starts the fake on 127.0.0.1 on a free port. */
export async function startFakeBigQuery(
  options: { projectId?: string; now?: () => Date; tableCreatedAt?: Date } = {},
): Promise<FakeBigQuery> {
  const projectId = options.projectId ?? 'acme-dev';
  const now = options.now ?? (() => new Date());
  const tableCreationMs = (options.tableCreatedAt ?? now()).getTime();
  /** A MERGE that inserts `CURRENT_TIMESTAMP()` stamps its rows with the statement's time, as BigQuery does. */
  const stamp = (row: StoredRow, query: string) => {
    if (/CURRENT_TIMESTAMP\(\)/.test(query)) row.processed_at = now().toISOString();
  };
  const requests: RecordedRequest[] = [];
  const table: StoredRow[] = [];
  const failures: BigQueryFailure[] = [];
  const results = new Map<string, { reference: unknown; outcome: Outcome; configuration: unknown }>();
  /** Jobs created by jobs.insert, in order, for jobs.list. */
  const created: CreatedJob[] = [];
  const clockMs = () => now().getTime();
  let deferred = 0;
  let deferredResults = 0;
  const lost: Array<{ where: 'insert' | 'results'; how: 'reset' | 503 | 429 }> = [];
  const jobGets: Array<503 | 'RUNNING' | 404> = [];
  let droppedInserts = 0;
  let lostWinners = 0;
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
    else
      sendJson(
        res,
        503,
        errorBody(
          503,
          'UNAVAILABLE',
          'backendError',
          'Error encountered during execution. Retrying may solve the problem.',
        ),
      );
    return true;
  }
  let estimatedBytes = MIN_BILLED_BYTES;

  function scalar(name: string, raw: unknown): string | null {
    if (raw !== undefined && raw !== null && typeof raw !== 'string') {
      // The REST API's QueryParameterValue.value is a string; protobuf JSON refuses a number.
      throw invalid(
        `Invalid value at 'query_parameters.parameter_value.value' (TYPE_STRING), ${JSON.stringify(raw)} (${name})`,
      );
    }
    return (raw as string | null | undefined) ?? null;
  }

  function parameters(list: unknown): Map<string, Bound> {
    if (!Array.isArray(list)) throw invalid('Query parameters are missing: docline always binds its values');
    const out = new Map<string, Bound>();
    for (const p of list as QueryParameter[]) {
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

  function invalid(message: string): HttpFailure {
    return bigQueryError.invalidQuery(message);
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
    if (type === 'TIMESTAMP' && Number.isNaN(Date.parse(value)))
      throw invalid(`Invalid timestamp: '${value}'`);
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

  /** The key days a MERGE or winners query prunes to: `@key_day_0` … in order. */
  function keyDays(params: Map<string, Bound>): Set<string> {
    const days = new Set<string>();
    for (let i = 0; params.has(`key_day_${i}`); i++) days.add(dateParam(params, `key_day_${i}`));
    if (days.size === 0) throw invalid('a MERGE of a batch names its key days (@key_day_0, …)');
    return days;
  }

  /** A row of this key in this key day (a row put in directly has its day computed from it). */
  const dayOf = (row: StoredRow) =>
    row.key_day ?? keyDay(row as unknown as Row, new Date(row.processed_at ?? 0));
  const inDay = (row: StoredRow, key: string, day: string) => row.dedup_key === key && dayOf(row) === day;
  const sinceDay = (row: StoredRow, since: string) => dayOf(row) >= since;

  /** Executes one statement's meaning; throws HttpFailure like BigQuery would answer. */
  function execute(config: Record<string, unknown>): Outcome {
    const failure = failures.shift();
    if (failure) {
      const f = failureResponse(
        failure,
        `${projectId}:d.t`,
        String(config.maximumBytesBilled ?? '100000000'),
      );
      throw new HttpFailure(f.status, f.body);
    }
    if (config.useLegacySql !== false)
      throw invalid('docline queries must use GoogleSQL (useLegacySql: false)');
    const cap = config.maximumBytesBilled === undefined ? undefined : Number(config.maximumBytesBilled);
    if (cap !== undefined && cap < estimatedBytes) {
      const required = Math.max(estimatedBytes, MIN_BILLED_BYTES);
      throw bigQueryError.bytesBilledExceeded(cap, required);
    }
    const params = parameters(config.queryParameters);
    const names = [...params.keys()].sort();
    const scalarNames = names.filter((n) => !/^key_day_\d+$/.test(n));
    const lookupNames = ['dedup_key', 'lookup_since'];
    const mergeNames = [...MERGE_COLUMNS].sort();
    if (names.join() === lookupNames.join()) {
      const key = params.get('dedup_key')!;
      if (key.type !== 'STRING' || key.value === null) throw invalid('dedup_key must be a non-null STRING');
      const since = dateParam(params, 'lookup_since');
      const found = table.some((r) => r.dedup_key === key.value && sinceDay(r, since));
      return {
        schema: { fields: [{ name: 'found', type: 'INTEGER', mode: 'NULLABLE' }] },
        totalRows: found ? '1' : '0',
        ...(found ? { rows: [{ f: [{ v: '1' }] }] } : {}),
      };
    }
    if (names.join() === mergeNames.join()) {
      const row = {} as StoredRow;
      for (const column of MERGE_COLUMNS) {
        const p = params.get(column)!;
        checkValue(column, p.type, p.value);
        (row as Record<string, string | null>)[column] = p.value;
      }
      const inserted = table.some((r) => inDay(r, row.dedup_key!, row.key_day!)) ? 0 : 1;
      stamp(row, String(config.query ?? ''));
      if (inserted) table.push(row);
      return {
        numDmlAffectedRows: String(inserted),
        dmlStats: { insertedRowCount: String(inserted), updatedRowCount: '0', deletedRowCount: '0' },
      };
    }
    if (names.join() === 'keys,lookup_since' || (scalarNames.join() === 'keys' && names.length > 1)) {
      const keys = params.get('keys')!;
      if (keys.items?.type !== 'STRING' || keys.items.values.some((k) => k === null))
        throw invalid('keys must be an ARRAY<STRING> without nulls');
      const wanted = new Set(keys.items.values as string[]);
      const query = String(config.query ?? '');
      // The batched lookup selects the keys; the winners query also selects who holds each key.
      const withMessage = /\bmessage_id\b/.test(query.split(/\bFROM\b/)[0] ?? '');
      const matches: (r: StoredRow) => boolean = params.has('lookup_since')
        ? (
            (since) => (r) =>
              sinceDay(r, since)
          )(dateParam(params, 'lookup_since'))
        : (
            (days) => (r) =>
              days.has(dayOf(r))
          )(keyDays(params));
      const hits = table.filter((r) => wanted.has(r.dedup_key!) && matches(r));
      const fields = [{ name: 'dedup_key', type: 'STRING', mode: 'NULLABLE' }];
      if (withMessage) fields.push({ name: 'message_id', type: 'STRING', mode: 'NULLABLE' });
      return {
        schema: { fields },
        totalRows: String(hits.length),
        rows: hits.map((r) => ({
          f: [{ v: r.dedup_key! }, ...(withMessage ? [{ v: r.message_id! }] : [])],
        })),
      };
    }
    if (scalarNames.join() === 'rows') {
      const rows = params.get('rows')!;
      if (!rows.structs) throw invalid('rows must be an ARRAY<STRUCT<…>>');
      const declared = [...rows.structs.fields.keys()];
      if (declared.join() !== MERGE_COLUMNS.join()) {
        throw invalid(
          `rows must carry every column in table order, then key_day (got ${declared.join(', ')})`,
        );
      }
      const days = keyDays(params);
      let inserted = 0;
      const batch: StoredRow[] = rows.structs.values.map((fields) => {
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
      // Like BigQuery, the statement is atomic: it fails whole before inserting anything.
      for (const row of batch) {
        if (table.some((r) => inDay(r, row.dedup_key!, row.key_day!))) continue;
        stamp(row, String(config.query ?? ''));
        table.push(row);
        inserted += 1;
      }
      return {
        numDmlAffectedRows: String(inserted),
        dmlStats: { insertedRowCount: String(inserted), updatedRowCount: '0', deletedRowCount: '0' },
      };
    }
    if (names.join() === 'bucket,prefix,since' || names.join() === 'bucket,prefix,since,until')
      return reconcileOutcome(params);
    throw invalid(`fake-bigquery knows only docline's statements (parameters: ${names.join(', ')})`);
  }

  /**
   * reconcile's query: the distinct object URIs of one bucket and name prefix, from the key day of
   * a time on, and before the key day of `until` when it has one.
   */
  function reconcileOutcome(params: Map<string, Bound>): Outcome {
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
    const uris = new Set(
      table
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
      schema: { fields: [{ name: 'object_uri', type: 'STRING', mode: 'NULLABLE' }] },
      totalRows: String(uris.size),
      rows: [...uris].map((v) => ({ f: [{ v }] })),
    };
  }

  /**
   * A dry run's `totalBytesProcessed`: the bytes of the columns the statement reads in the
   * partitions its key-day filter names. A filter counts only when it compares the target's
   * `key_day` with parameters (`key_day >= @p`, `key_day >= DATE(@ts)`, `key_day < DATE(@ts)`,
   * `key_day = @p`, `key_day IN (@p, …)`; comparisons joined by AND all hold), as BigQuery prunes by constants; `T.key_day = S.key_day`, a join
   * condition, prunes nothing, and a statement without such a filter is estimated at the whole
   * table. A MERGE reads `dedup_key` + `key_day` of its target; a SELECT the columns it names.
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
    return table
      .filter((r) => read(dayOf(r)))
      .reduce((bytes, r) => bytes + columns.reduce((n, c) => n + bytesOf(r, c), 0), 0);
  }

  function reference(location: unknown, jobId = `job_${randomUUID().replaceAll('-', '')}`) {
    return { projectId, jobId, location: typeof location === 'string' ? location : 'US' };
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const body: unknown = text ? JSON.parse(text) : undefined;
    requests.push({
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers: req.headers,
      body,
    });
    const prefix = `/bigquery/v2/projects/${projectId}`;
    const path = url.pathname.startsWith(prefix) ? url.pathname.slice(prefix.length) : null;
    if (path === null)
      return sendJson(res, 404, errorBody(404, 'NOT_FOUND', 'notFound', `Not found: ${url.pathname}`));

    try {
      if (req.method === 'POST' && path === '/queries') {
        const request = body as Record<string, unknown>;
        const jobReference = reference(request.location);
        const outcome = execute(request);
        results.set(jobReference.jobId, {
          reference: jobReference,
          outcome,
          configuration: { query: request },
        });
        if (deferred > 0) {
          deferred -= 1;
          return sendJson(res, 200, { kind: 'bigquery#queryResponse', jobReference, jobComplete: false });
        }
        return sendJson(res, 200, {
          kind: 'bigquery#queryResponse',
          jobReference,
          jobComplete: true,
          cacheHit: false,
          totalBytesProcessed: String(estimatedBytes),
          ...outcome,
        });
      }
      if (req.method === 'POST' && path === '/jobs') {
        const job = body as { jobReference?: { jobId?: string; location?: string }; configuration?: unknown };
        const configuration = job.configuration as
          | { query?: Record<string, unknown>; dryRun?: boolean }
          | undefined;
        const jobReference = reference(job.jobReference?.location, job.jobReference?.jobId);
        if (configuration?.dryRun === true) {
          // A dry run is answered at once, with its estimate; no job is kept and nothing runs.
          const estimate = String(dryRunEstimate(configuration.query ?? {}));
          return sendJson(res, 200, {
            kind: 'bigquery#job',
            jobReference,
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
        if (results.has(jobReference.jobId))
          return sendJson(
            res,
            409,
            errorBody(
              409,
              'ALREADY_EXISTS',
              'duplicate',
              `Already Exists: Job ${projectId}:${jobReference.location}.${jobReference.jobId}`,
            ),
          );
        let outcome: Outcome;
        try {
          outcome = execute(configuration?.query ?? {});
        } catch (error) {
          if (!(error instanceof HttpFailure)) throw error;
          // A job that fails while running is created, DONE, with its error in the status.
          const failed = (error.body as { error: { errors: unknown[] } }).error.errors[0];
          return sendJson(res, 200, {
            kind: 'bigquery#job',
            jobReference,
            configuration,
            status: { state: 'DONE', errorResult: failed, errors: [failed] },
          });
        }
        results.set(jobReference.jobId, { reference: jobReference, outcome, configuration });
        created.push({ reference: jobReference, creationMs: clockMs() });
        if (lose(res, 'insert')) return;
        return sendJson(res, 200, {
          kind: 'bigquery#job',
          id: `${projectId}:${jobReference.location}.${jobReference.jobId}`,
          jobReference,
          configuration,
          status: { state: 'DONE' },
          statistics: { query: jobStatistics(outcome) },
        });
      }
      const results_ = /^\/queries\/([^/]+)$/.exec(path);
      if (req.method === 'GET' && results_) {
        const stored = results.get(decodeURIComponent(results_[1]!));
        if (!stored) throw bigQueryError.notFound('Job');
        if (deferredResults > 0) {
          deferredResults -= 1;
          return sendJson(res, 200, {
            kind: 'bigquery#getQueryResultsResponse',
            jobReference: stored.reference,
            jobComplete: false,
          });
        }
        const text = (stored.configuration as { query?: { query?: string } } | undefined)?.query?.query ?? '';
        if (lostWinners > 0 && text.startsWith('SELECT dedup_key, message_id')) {
          lostWinners -= 1;
          return sendJson(res, 503, errorBody(503, 'UNAVAILABLE', 'backendError', 'Backend error.'));
        }
        if (lose(res, 'results')) return;
        return sendJson(res, 200, {
          kind: 'bigquery#getQueryResultsResponse',
          jobReference: stored.reference,
          jobComplete: true,
          cacheHit: false,
          totalBytesProcessed: String(estimatedBytes),
          // getQueryResults has no dmlStats: only numDmlAffectedRows (REST reference).
          ...Object.fromEntries(Object.entries(stored.outcome).filter(([k]) => k !== 'dmlStats')),
        });
      }
      // jobs.list: the caller's jobs created at or after minCreationTime, newest first.
      if (req.method === 'GET' && path === '/jobs')
        return sendJson(res, 200, jobListBody(created, url.searchParams.get('minCreationTime')));
      const jobGet = /^\/jobs\/([^/]+)$/.exec(path);
      if (req.method === 'GET' && jobGet) {
        const stored = results.get(decodeURIComponent(jobGet[1]!));
        if (!stored) throw bigQueryError.notFound('Job');
        const scripted = jobGets.shift();
        if (scripted === 404) throw bigQueryError.notFound('Job');
        if (scripted === 503)
          return sendJson(res, 503, errorBody(503, 'UNAVAILABLE', 'backendError', 'Backend error.'));
        if (scripted === 'RUNNING')
          return sendJson(res, 200, {
            kind: 'bigquery#job',
            jobReference: stored.reference,
            status: { state: 'RUNNING' },
          });
        return sendJson(res, 200, {
          kind: 'bigquery#job',
          jobReference: stored.reference,
          configuration: stored.configuration,
          status: { state: 'DONE' },
          statistics: { query: jobStatistics(stored.outcome) },
        });
      }
      const tableGet = /^\/datasets\/([^/]+)\/tables\/([^/]+)$/.exec(path);
      if (req.method === 'GET' && tableGet) {
        const failure = failures.shift();
        if (failure) {
          const f = failureResponse(failure);
          throw new HttpFailure(f.status, f.body);
        }
        const [, dataset, tableId] = tableGet as unknown as [string, string, string];
        return sendJson(res, 200, {
          kind: 'bigquery#table',
          id: `${projectId}:${dataset}.${tableId}`,
          tableReference: { projectId, datasetId: dataset, tableId },
          timePartitioning: { type: 'DAY', field: KEY_DAY_COLUMN.name },
          numRows: String(table.length),
          creationTime: String(tableCreationMs),
        });
      }
      throw bigQueryError.notFound(`${req.method} ${url.pathname}`);
    } catch (error) {
      answerFailure(res, error);
    }
  }

  const server = createServer((req, res) => {
    route(req, res).catch((error: unknown) => {
      sendJson(res, 500, errorBody(500, 'INTERNAL', 'internalError', `fake-bigquery: ${String(error)}`));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

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
    rows: () => table.map((r) => ({ ...r })),
    addRow(row) {
      table.push({ ...row });
    },
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

function jobStatistics(outcome: Outcome): Record<string, unknown> {
  return {
    totalBytesProcessed: '0',
    ...(outcome.numDmlAffectedRows !== undefined
      ? { numDmlAffectedRows: outcome.numDmlAffectedRows, dmlStats: outcome.dmlStats, statementType: 'MERGE' }
      : { statementType: 'SELECT' }),
  };
}

/**
 * Credentials for a client pointed at a fake: a real google-auth-library client holding a static,
 * unexpired access token, so the library's own auth path runs and sends `Authorization: Bearer`.
 */
export async function staticTokenAuth(
  token = 'fake-token',
): Promise<import('google-auth-library').GoogleAuth> {
  const { GoogleAuth, OAuth2Client } = await import('google-auth-library');
  const client = new OAuth2Client();
  client.setCredentials({ access_token: token, expiry_date: Date.now() + 60 * 60 * 1000 });
  return new GoogleAuth({ authClient: client });
}
