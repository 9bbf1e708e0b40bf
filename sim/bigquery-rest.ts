import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MERGE_LATENCY_SECONDS } from '../worker/src/contract/cost-model';
import { COLUMN_NAMES, COLUMNS, KEY_DAY_COLUMN } from '../worker/src/contract/row';
import { BIGQUERY_DML_LIMITS, MIN_MAXIMUM_BYTES_BILLED } from '../worker/src/contract/settings';
import {
  answerFailure,
  bigQueryError,
  type CreatedJob,
  errorBody,
  HttpFailure,
  jobListBody,
  sendJson,
} from '../worker/test/support/bigquery-rest';
import { seededRandom } from './random';
import { type SimTime, type SimTimer, SlidingWindowLimit } from './time';

/**
 * A BigQuery REST server (v2) that the real @google-cloud/bigquery client talks to, holding to the
 * *published* limits in simulated time:
 *
 * - mutating DML (every MERGE) per table: 2 running, 20 queued (PENDING), and beyond that the job
 *   fails with "Too many DML statements outstanding against table …, limit is 20" (HTTP 400,
 *   reason `resourcesExceeded`);
 * - at most 25 DML statements per 10 s per table: the 26th is refused (HTTP 403, reason
 *   `rateLimitExceeded`, "too many table dml insert operations for this table");
 * - about 100 jobs.query calls per second per user (all instances run as one service account):
 *   beyond that HTTP 403 `rateLimitExceeded` ("too many api requests per user per method");
 * - a MERGE runs for a configurable 1–3 s, a SELECT for 0.5–1.5 s; jobs.query waits at most 10 s
 *   for the job, then answers `jobComplete: false` and the client polls getQueryResults;
 * - every statement that runs bills at least 10 MiB (more when the table's `dedup_key` +
 *   `key_day` bytes are larger: this burst server counts every row, an upper bound); refused
 *   statements bill nothing.
 *
 * It executes, in memory, docline's statements, recognised by their text and checked parameter by
 * parameter: the per-delivery lookup and MERGE, the batched `IN UNNEST(@keys)` lookup, the MERGE
 * over `UNNEST(@rows)` (an ARRAY<STRUCT<every column>> parameter) and the winners query. A MERGE
 * matches against the table as it was when the statement *started* and inserts when it ends, so
 * two MERGEs of one new key that run together both insert, as BigQuery allows (insert-only MERGEs
 * do not conflict). Every value must arrive as a typed parameter.
 *
 * A statement with a `jobTimeoutMs` (the worker bounds each one by its delivery's deadline) comes
 * through jobs.insert + getQueryResults instead of jobs.query; the burst's statements end within
 * seconds, far inside any deadline, so the bound is accepted but not enforced here (the fault
 * simulator's warehouse, sim/models/warehouse.ts, models it).
 */

/** BigQuery's documented 403 for a rate limit (per table DML, or per user per method). */
function rateLimited(what: string): HttpFailure {
  return new HttpFailure(
    403,
    errorBody(
      403,
      'PERMISSION_DENIED',
      'rateLimitExceeded',
      `Exceeded rate limits: ${what}. For more information, see https://cloud.google.com/bigquery/docs/troubleshoot-quotas`,
      'usageLimits',
    ),
  );
}

export interface BigQuerySimOptions {
  time: SimTime;
  projectId?: string;
  /** Simulated latency of one MERGE while running (default: MERGE_LATENCY_SECONDS, uniform 1–3 s). */
  mergeLatencyMs?: () => number;
  /** Simulated latency of one SELECT (default: uniform 0.5–1.5 s). */
  selectLatencyMs?: () => number;
  /** jobs.query calls accepted per second (default 100). */
  queryCallsPerSecond?: number;
  /** How long jobs.query / getQueryResults wait for a job before `jobComplete: false` (default 10 s). */
  queryWaitMs?: number;
  /** Bytes of `dedup_key` + `processed_at` read per row in the window (default 75). */
  bytesReadPerRow?: number;
  random?: () => number;
}

/** A stored row: each column as BigQuery's REST API represents it (strings, or null). */
export type SimRow = Record<string, string | null>;

export interface BigQuerySimStats {
  /** Every jobs.query call received, refused ones included. */
  queryCalls: number;
  /** Every jobs.insert call received (statements bounded by a jobTimeoutMs), refused ones included. */
  jobInsertCalls: number;
  /** jobs.list calls (group commit counting the instances that write). */
  jobsListCalls: number;
  getQueryResultsCalls: number;
  /** MERGE statements that ran (refused ones not included). */
  mergeStatements: number;
  selectStatements: number;
  /** jobs.query calls refused for the per-user rate. */
  refusedApiRate: number;
  /** MERGEs refused for the 25-per-10-s table rate. */
  refusedDmlRate: number;
  /** MERGEs refused because 20 were already queued. */
  refusedDmlQueue: number;
  billedBytes: number;
  /** The most DML statements queued at once. */
  maxQueued: number;
  /** Rows that MERGEs reported inserted. */
  insertedRows: number;
}

export interface BigQuerySim {
  url: string;
  projectId: string;
  stats: BigQuerySimStats;
  /** Every row of every table, in insertion order. */
  rows(table?: string): SimRow[];
  /** What the `documents` view returns: one row per dedup key, the first by processed_at. */
  viewRows(table?: string): SimRow[];
  /** Mutating DML running and queued on a table now. */
  outstanding(table: string): { running: number; queued: number };
  stop(): Promise<void>;
}

const invalid = (message: string) => bigQueryError.invalidQuery(message);

interface Param {
  type: {
    type?: string;
    arrayType?: Param['type'];
    structTypes?: Array<{ name?: string; type?: Param['type'] }>;
  };
  value: {
    value?: unknown;
    arrayValues?: Param['value'][];
    structValues?: Record<string, Param['value']>;
  };
}

interface Outcome {
  schema?: unknown;
  rows?: unknown[];
  totalRows?: string;
  numDmlAffectedRows?: string;
  dmlStats?: { insertedRowCount: string; updatedRowCount: string; deletedRowCount: string };
}

interface Job {
  id: string;
  reference: { projectId: string; jobId: string; location: string };
  done: Promise<Outcome | HttpFailure>;
  outcome?: Outcome | HttpFailure;
  bytes: number;
}

interface TableState {
  rows: SimRow[];
  /** Index of the first row of each dedup key (for matching within the window). */
  running: number;
  queue: Array<() => void>;
  dmlRate: SlidingWindowLimit;
}

const COLUMN_TYPE = new Map<string, { type: string; required: boolean }>(
  [...COLUMNS, KEY_DAY_COLUMN].map((c) => [c.name, { type: c.type, required: c.mode === 'REQUIRED' }]),
);
/** What a MERGE row carries, in order: every column, then the layout's key day. */
const MERGE_COLUMNS = [...COLUMN_NAMES, KEY_DAY_COLUMN.name];

const uniform = (random: () => number, low: number, high: number) => () => low + (high - low) * random();

export async function startBigQuerySim(options: BigQuerySimOptions): Promise<BigQuerySim> {
  const { time } = options;
  const projectId = options.projectId ?? 'docline-bench';
  const random = options.random ?? seededRandom(13);
  // The one MERGE latency the cost model uses too (contract/cost-model.ts).
  const mergeLatencyMs =
    options.mergeLatencyMs ??
    uniform(random, MERGE_LATENCY_SECONDS.low * 1_000, MERGE_LATENCY_SECONDS.high * 1_000);
  const selectLatencyMs = options.selectLatencyMs ?? uniform(random, 500, 1_500);
  const queryWaitMs = options.queryWaitMs ?? 10_000;
  const bytesReadPerRow = options.bytesReadPerRow ?? 75;
  const apiRate = new SlidingWindowLimit(options.queryCallsPerSecond ?? 100, 1_000, () => time.nowMs());
  // The same per-user limit, per method: jobs.insert has its own.
  const insertRate = new SlidingWindowLimit(options.queryCallsPerSecond ?? 100, 1_000, () => time.nowMs());
  const tables = new Map<string, TableState>();
  const jobs = new Map<string, Job>();
  /** Jobs created by jobs.insert, in order, with their creation time (the worker's clock), for jobs.list. */
  const created: CreatedJob[] = [];
  const stats: BigQuerySimStats = {
    queryCalls: 0,
    jobInsertCalls: 0,
    jobsListCalls: 0,
    getQueryResultsCalls: 0,
    mergeStatements: 0,
    selectStatements: 0,
    refusedApiRate: 0,
    refusedDmlRate: 0,
    refusedDmlQueue: 0,
    billedBytes: 0,
    maxQueued: 0,
    insertedRows: 0,
  };

  const tableState = (name: string): TableState => {
    let t = tables.get(name);
    if (!t) {
      t = {
        rows: [],
        running: 0,
        queue: [],
        dmlRate: new SlidingWindowLimit(
          BIGQUERY_DML_LIMITS.statementsPerWindow,
          BIGQUERY_DML_LIMITS.windowSeconds * 1000,
          () => time.nowMs(),
        ),
      };
      tables.set(name, t);
    }
    return t;
  };

  const billed = (t: TableState) => Math.max(MIN_MAXIMUM_BYTES_BILLED, t.rows.length * bytesReadPerRow);

  /** The table a statement names: its first backquoted identifier. */
  function tableOf(sql: string): string {
    const m = /`([^`]+)`/.exec(sql);
    if (!m) throw invalid('the statement names no table');
    return m[1]!;
  }

  function parameters(list: unknown): Map<string, Param> {
    if (!Array.isArray(list)) throw invalid('Query parameters are missing: docline always binds its values');
    const out = new Map<string, Param>();
    for (const p of list as Array<{
      name?: string;
      parameterType?: Param['type'];
      parameterValue?: Param['value'];
    }>) {
      if (!p.name || !p.parameterType?.type)
        throw invalid(`Query parameter ${p.name ?? '(unnamed)'} has no type`);
      out.set(p.name, { type: p.parameterType, value: p.parameterValue ?? {} });
    }
    return out;
  }

  function scalar(p: Param | undefined, name: string, type: string): string {
    if (!p || p.type.type !== type) throw invalid(`@${name} must be a ${type} parameter`);
    const v = p.value.value;
    if (typeof v !== 'string') throw invalid(`@${name} must be a non-null ${type}`);
    return v;
  }

  function dateParam(params: Map<string, Param>, name: string): string {
    const d = scalar(params.get(name), name, 'DATE');
    if (!/^\d{4}-\d{2}-\d{2}$/.test(d)) throw invalid(`Invalid date in @${name}`);
    return d;
  }

  /** What a statement reads: the key days since `@lookup_since`, or exactly `@key_day_0…` (or `@key_day`). */
  function dayFilter(params: Map<string, Param>): (day: string) => boolean {
    if (params.has('lookup_since')) {
      const since = dateParam(params, 'lookup_since');
      return (day) => day >= since;
    }
    const days = new Set<string>();
    for (let i = 0; params.has(`key_day_${i}`); i++) days.add(dateParam(params, `key_day_${i}`));
    if (days.size === 0 && params.has('key_day')) days.add(dateParam(params, 'key_day'));
    if (days.size === 0) throw invalid('the statement names no key day');
    return (day) => days.has(day);
  }

  function keys(params: Map<string, Param>): string[] {
    const p = params.get('keys');
    if (p?.type.type !== 'ARRAY' || p.type.arrayType?.type !== 'STRING')
      throw invalid('@keys must be an ARRAY<STRING> parameter');
    return (p.value.arrayValues ?? []).map((v) => {
      if (typeof v.value !== 'string') throw invalid('@keys holds a null');
      return v.value;
    });
  }

  function checkValue(column: string, type: string | undefined, value: unknown): string | null {
    const expected = COLUMN_TYPE.get(column);
    if (!expected) throw invalid(`Unrecognized name: ${column}`);
    if (type !== expected.type)
      throw invalid(`Value of type ${type} cannot be assigned to ${column}, which has type ${expected.type}`);
    if (value === null || value === undefined) {
      if (expected.required) throw invalid(`Required field ${column} cannot be null`);
      return null;
    }
    if (typeof value !== 'string') throw invalid(`Invalid value of ${column}: ${JSON.stringify(value)}`);
    if (type === 'INT64' && !/^-?\d{1,19}$/.test(value)) throw invalid(`Invalid INT64 value: ${value}`);
    if (type === 'TIMESTAMP' && Number.isNaN(Date.parse(value)))
      throw invalid(`Invalid timestamp: '${value}'`);
    return value;
  }

  /** The rows a MERGE wants to insert, from either the per-delivery or the batched form. */
  function sourceRows(params: Map<string, Param>): SimRow[] {
    const rows = params.get('rows');
    if (rows) {
      const struct = rows.type.arrayType;
      if (rows.type.type !== 'ARRAY' || struct?.type !== 'STRUCT')
        throw invalid('@rows must be an ARRAY<STRUCT<…>> parameter');
      const fields = (struct.structTypes ?? []).map((f) => ({ name: f.name ?? '', type: f.type?.type }));
      if (fields.map((f) => f.name).join() !== MERGE_COLUMNS.join())
        throw invalid(
          `@rows must have the table's columns in order (got ${fields.map((f) => f.name).join(', ')})`,
        );
      return (rows.value.arrayValues ?? []).map((item) => {
        const row: SimRow = {};
        for (const f of fields) row[f.name] = checkValue(f.name, f.type, item.structValues?.[f.name]?.value);
        return row;
      });
    }
    const row: SimRow = {};
    for (const column of MERGE_COLUMNS) {
      const p = params.get(column);
      if (!p) throw invalid(`Query parameter '${column}' not found`);
      row[column] = checkValue(column, p.type.type, p.value.value);
    }
    return [row];
  }

  function keysInDays(
    t: TableState,
    wanted: Set<string>,
    inDays: (day: string) => boolean,
    upTo = t.rows.length,
  ): SimRow[] {
    const found: SimRow[] = [];
    for (let i = 0; i < upTo; i++) {
      const r = t.rows[i]!;
      if (wanted.has(r.dedup_key!) && inDays(r.key_day ?? '')) found.push(r);
    }
    return found;
  }

  const selectOutcome = (names: string[], rows: Array<Array<string | null>>): Outcome => ({
    schema: {
      fields: names.map((name) => ({
        name,
        type: name === 'found' ? 'INTEGER' : 'STRING',
        mode: 'NULLABLE',
      })),
    },
    totalRows: String(rows.length),
    ...(rows.length ? { rows: rows.map((r) => ({ f: r.map((v) => ({ v })) })) } : {}),
  });

  /** Starts a job for one statement; throws HttpFailure for refusals that happen before it runs. */
  function submit(request: Record<string, unknown>, location: string, jobId?: string): Job {
    if (request.useLegacySql !== false)
      throw invalid('docline queries must use GoogleSQL (useLegacySql: false)');
    const sql = typeof request.query === 'string' ? request.query.trim() : '';
    const params = parameters(request.queryParameters);
    const tableName = tableOf(sql);
    const t = tableState(tableName);
    const id = jobId ?? `job_${randomUUID().replaceAll('-', '')}`;
    const reference = { projectId, jobId: id, location };
    const cap =
      request.maximumBytesBilled === undefined
        ? Number.POSITIVE_INFINITY
        : Number(request.maximumBytesBilled);
    const bytes = billed(t);
    if (cap < bytes) {
      throw bigQueryError.bytesBilledExceeded(cap, bytes);
    }
    let run: () => Promise<Outcome>;
    /** A lookup: it takes a SELECT's latency and bills like any statement, then answers. */
    const lookup =
      (answer: () => Outcome): (() => Promise<Outcome>) =>
      async () => {
        await time.sleep(selectLatencyMs());
        stats.selectStatements++;
        stats.billedBytes += bytes;
        return answer();
      };
    if (/^MERGE\b/i.test(sql)) {
      const inDays = dayFilter(params);
      const source = sourceRows(params);
      for (const row of source)
        if (!inDays(row.key_day ?? ''))
          throw invalid(`key_day ${row.key_day} is not among the statement's key days`);
      if (!t.dmlRate.tryTake()) {
        stats.refusedDmlRate++;
        throw rateLimited('too many table dml insert operations for this table');
      }
      if (t.running >= BIGQUERY_DML_LIMITS.running && t.queue.length >= BIGQUERY_DML_LIMITS.queued) {
        stats.refusedDmlQueue++;
        throw new HttpFailure(
          400,
          errorBody(
            400,
            'INVALID_ARGUMENT',
            'resourcesExceeded',
            `Resources exceeded during query execution: Too many DML statements outstanding against table ${projectId}:${tableName.split('.').slice(1).join('.')}, limit is ${BIGQUERY_DML_LIMITS.queued}.`,
          ),
        );
      }
      run = async () => {
        if (t.running >= BIGQUERY_DML_LIMITS.running) {
          await new Promise<void>((resolve) => t.queue.push(resolve));
          // The slot was handed over by the statement that finished (running stays counted).
        } else t.running++;
        try {
          const startedWith = t.rows.length;
          await time.sleep(mergeLatencyMs());
          const existing = new Set(
            keysInDays(t, new Set(source.map((r) => r.dedup_key!)), inDays, startedWith).map(
              (r) => `${r.dedup_key}\n${r.key_day}`,
            ),
          );
          let inserted = 0;
          for (const row of source) {
            // A row matches a target row of its key in its own key day (the ON clause).
            if (existing.has(`${row.dedup_key}\n${row.key_day}`)) continue;
            // Within one statement, the source is matched once: two source rows of one key both insert.
            t.rows.push(row);
            inserted++;
          }
          stats.mergeStatements++;
          stats.insertedRows += inserted;
          stats.billedBytes += bytes;
          return {
            numDmlAffectedRows: String(inserted),
            dmlStats: { insertedRowCount: String(inserted), updatedRowCount: '0', deletedRowCount: '0' },
          };
        } finally {
          const next = t.queue.shift();
          if (next) next();
          else t.running--;
        }
      };
    } else if (/^SELECT 1 AS found\b/i.test(sql)) {
      const key = scalar(params.get('dedup_key'), 'dedup_key', 'STRING');
      const inDays = dayFilter(params);
      run = lookup(() => {
        const found = keysInDays(t, new Set([key]), inDays).length > 0;
        return selectOutcome(['found'], found ? [['1']] : []);
      });
    } else if (/^SELECT dedup_key, message_id\b/i.test(sql)) {
      const wanted = new Set(keys(params));
      const inDays = dayFilter(params);
      run = lookup(() =>
        selectOutcome(
          ['dedup_key', 'message_id'],
          keysInDays(t, wanted, inDays).map((r) => [r.dedup_key!, r.message_id!]),
        ),
      );
    } else if (/^SELECT dedup_key FROM\b/i.test(sql)) {
      const wanted = new Set(keys(params));
      const inDays = dayFilter(params);
      run = lookup(() => {
        const found = [...new Set(keysInDays(t, wanted, inDays).map((r) => r.dedup_key!))];
        return selectOutcome(
          ['dedup_key'],
          found.map((k) => [k]),
        );
      });
    } else {
      throw invalid(`the burst simulator does not know this statement: ${sql.slice(0, 80)}`);
    }
    const job: Job = {
      id,
      reference,
      bytes,
      done: run().then(
        (o) => o,
        (e: unknown) => (e instanceof HttpFailure ? e : bigQueryError.internal(String(e))),
      ),
    };
    void job.done.then((o) => {
      job.outcome = o;
    });
    jobs.set(id, job);
    stats.maxQueued = Math.max(stats.maxQueued, t.queue.length);
    return job;
  }

  /** Waits for the job at most `queryWaitMs` (simulated); undefined when it is still running. */
  async function waitFor(job: Job): Promise<Outcome | HttpFailure | undefined> {
    if (job.outcome) return job.outcome;
    let timer: SimTimer | undefined;
    const timeout = new Promise<undefined>((resolve) => {
      timer = time.after(queryWaitMs, () => resolve(undefined));
    });
    try {
      return await Promise.race([job.done, timeout]);
    } finally {
      timer?.cancel();
    }
  }

  function answer(
    res: ServerResponse,
    job: Job,
    outcome: Outcome | HttpFailure | undefined,
    kind: string,
    dmlStats: boolean,
  ) {
    if (outcome instanceof HttpFailure) return sendJson(res, outcome.status, outcome.body);
    if (!outcome) return sendJson(res, 200, { kind, jobReference: job.reference, jobComplete: false });
    const body = dmlStats
      ? outcome
      : Object.fromEntries(Object.entries(outcome).filter(([k]) => k !== 'dmlStats'));
    return sendJson(res, 200, {
      kind,
      jobReference: job.reference,
      jobComplete: true,
      cacheHit: false,
      totalBytesProcessed: String(job.bytes),
      totalBytesBilled: String(job.bytes),
      ...body,
    });
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://sim');
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const prefix = `/bigquery/v2/projects/${projectId}`;
    const path = url.pathname.startsWith(prefix) ? url.pathname.slice(prefix.length) : null;
    try {
      if (req.method === 'POST' && path === '/queries') {
        stats.queryCalls++;
        if (!apiRate.tryTake()) {
          stats.refusedApiRate++;
          throw rateLimited('too many api requests per user per method for this user_method');
        }
        const request = JSON.parse(text) as Record<string, unknown>;
        const job = submit(request, typeof request.location === 'string' ? request.location : 'US');
        return answer(res, job, await waitFor(job), 'bigquery#queryResponse', true);
      }
      if (req.method === 'POST' && path === '/jobs') {
        // jobs.insert: the job is created at once; the client then polls getQueryResults.
        stats.jobInsertCalls++;
        if (!insertRate.tryTake()) {
          stats.refusedApiRate++;
          throw rateLimited('too many api requests per user per method for this user_method');
        }
        const body = JSON.parse(text) as {
          jobReference?: { jobId?: string; location?: string };
          configuration?: { query?: Record<string, unknown> };
        };
        const job = submit(
          body.configuration?.query ?? {},
          body.jobReference?.location ?? 'US',
          body.jobReference?.jobId,
        );
        created.push({ reference: job.reference, creationMs: time.clock.now().getTime() });
        return sendJson(res, 200, {
          kind: 'bigquery#job',
          jobReference: job.reference,
          configuration: body.configuration,
          status: { state: 'RUNNING' },
        });
      }
      const results = path === null ? null : /^\/queries\/([^/]+)$/.exec(path);
      if (req.method === 'GET' && results) {
        stats.getQueryResultsCalls++;
        const job = jobs.get(decodeURIComponent(results[1]!));
        if (!job) throw bigQueryError.notFound('Job');
        return answer(res, job, await waitFor(job), 'bigquery#getQueryResultsResponse', false);
      }
      // jobs.list (free, no bytes): the caller's jobs created at or after minCreationTime (ms).
      if (req.method === 'GET' && path === '/jobs') {
        stats.jobsListCalls++;
        return sendJson(res, 200, jobListBody(created, url.searchParams.get('minCreationTime')));
      }
      const jobGet = path === null ? null : /^\/jobs\/([^/]+)$/.exec(path);
      if (req.method === 'GET' && jobGet) {
        const job = jobs.get(decodeURIComponent(jobGet[1]!));
        if (!job) throw bigQueryError.notFound('Job');
        const o = job.outcome;
        return sendJson(res, 200, {
          kind: 'bigquery#job',
          jobReference: job.reference,
          status:
            o instanceof HttpFailure
              ? { state: 'DONE', errorResult: (o.body as { error: { errors: unknown[] } }).error.errors[0] }
              : { state: o ? 'DONE' : 'RUNNING' },
          statistics:
            o && !(o instanceof HttpFailure) && o.dmlStats
              ? {
                  query: {
                    numDmlAffectedRows: o.numDmlAffectedRows,
                    dmlStats: o.dmlStats,
                    statementType: 'MERGE',
                  },
                }
              : { query: { statementType: 'SELECT' } },
        });
      }
      const tableGet = path === null ? null : /^\/datasets\/([^/]+)\/tables\/([^/]+)$/.exec(path);
      if (req.method === 'GET' && tableGet) {
        return sendJson(res, 200, {
          kind: 'bigquery#table',
          tableReference: { projectId, datasetId: tableGet[1], tableId: tableGet[2] },
          timePartitioning: { type: 'DAY', field: 'processed_at' },
        });
      }
      throw bigQueryError.notFound(`${req.method} ${url.pathname}`);
    } catch (error) {
      // A request body that is not JSON: BigQuery's 400 `invalid`.
      if (error instanceof SyntaxError)
        return sendJson(res, 400, errorBody(400, 'INVALID_ARGUMENT', 'invalid', error.message));
      answerFailure(res, error);
    }
  }

  const server: Server = createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    route(req, res).catch((error: unknown) => {
      sendJson(res, 500, errorBody(500, 'INTERNAL', 'internalError', `bigquery-sim: ${String(error)}`));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const all = (table?: string) =>
    table ? (tables.get(table)?.rows ?? []) : [...tables.values()].flatMap((t) => t.rows);
  return {
    url: `http://127.0.0.1:${port}`,
    projectId,
    stats,
    rows: (table) => all(table).map((r) => ({ ...r })),
    viewRows(table) {
      const first = new Map<string, SimRow>();
      for (const r of all(table)) {
        const seen = first.get(r.dedup_key!);
        const at = Date.parse(r.processed_at!);
        const seenAt = seen ? Date.parse(seen.processed_at!) : Number.POSITIVE_INFINITY;
        const earlier = at < seenAt || (at === seenAt && r.message_id! < seen!.message_id!);
        if (earlier) first.set(r.dedup_key!, r);
      }
      return [...first.values()];
    },
    outstanding(table) {
      const t = tables.get(table);
      return { running: t?.running ?? 0, queued: t?.queue.length ?? 0 };
    },
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
