import type { BigQuery } from '@google-cloud/bigquery';
import {
  batchLookupSql,
  batchMergeSql,
  LOOKUP_PARAMETER,
  MAX_KEY_DAYS_PER_STATEMENT,
  type Statement,
  winnersSql,
} from '../../worker/src/adapters/stores/bigquery-store';
import { COLUMNS, type Row } from '../../worker/src/contract/row';
import { REQUEST_LIMIT_BYTES, requestBytes, requestTooLarge, type Warehouse } from '../models/warehouse';
import type { SimClock } from '../time';
import type { FaultLog, FaultSchedule } from './schedule';

/**
 * The `@google-cloud/bigquery` client as the worker's real `BigQueryStore` uses it, over the
 * fault simulator's warehouse, so the adapter's own jobs run: jobs.insert (`createQueryJob`, with
 * the job id or prefix the adapter chooses and its `jobTimeoutMs`), getQueryResults (which waits at
 * most 10 s for the job and then answers `jobComplete: false`), jobs.get (`job(id).getMetadata()`,
 * the job's true state), jobs.list (`getJobs`, the jobs of every instance, for `writers()`), and
 * jobs.query for statements without a bound. The statements are recognised by their text (the
 * adapter's own SQL builders) and read parameter by parameter.
 *
 * A request over BigQuery's size limit (the SQL and its parameters as the library serializes them)
 * is refused by jobs.insert itself, with BigQuery's 400: no job exists.
 *
 * A job whose answer the schedule loses (`outcomeUnknown`) answers getQueryResults with a 503: after
 * it committed, or while it still runs; jobs.get still tells the truth. A killed instance's calls
 * never answer.
 *
 * The schedule's `inserts` lose the answer of a jobs.insert (a 503 the client surfaces): after the
 * job was created, when jobs.get answers 404 until the job is visible and an insert of its id
 * again answers 409 (BigQuery's `duplicate`, "Already Exists"); or before it reached BigQuery, when
 * no job exists. They also rate-limit a job's first polls (getQueryResults and jobs.get answer 403
 * `rateLimitExceeded`). Job ids are unique in a project: an insert of an id that exists is refused.
 */

/** How long jobs.query and getQueryResults wait for a job before `jobComplete: false` (BigQuery's ~10 s). */
const QUERY_WAIT_MS = 10_000;
/** The latency of a jobs.insert, jobs.get or jobs.list call (assumed). */
const CALL_MS = 100;

interface SimJob {
  id: string;
  createdMs: number;
  state: 'RUNNING' | 'DONE';
  /** What the statement returns: rows (a query) or the inserted count (a MERGE). */
  rows?: Array<Record<string, string>>;
  inserted?: number;
  error?: Error;
  lost?: 'lostAfterCommit' | 'resetWhilePolling';
  lostAtMs: number;
  /** Its lost answer has been given (once). */
  reported?: boolean;
  settled: Promise<void>;
  /** jobs.get answers 404 before this (a job whose insert answer was lost is not visible yet). */
  visibleAtMs?: number;
  /** Polls still to be answered 403 `rateLimitExceeded`. */
  rateLimitedPolls?: number;
  keys: string[];
}

type Parameter = string | null | { value: string };

/** The clients of every instance share one project's jobs. */
export class BigQueryClients {
  private readonly jobs = new Map<string, SimJob>();
  private next = 0;

  /** jobs.insert calls made so far (the index of the schedule's next `inserts` entry). */
  private inserted = 0;

  constructor(
    private readonly time: SimClock,
    private readonly warehouse: Warehouse,
    private readonly table: string,
    private readonly inserts: NonNullable<FaultSchedule['bigquery']['inserts']> = [],
    private readonly faults?: FaultLog,
  ) {}

  /** The client of instance `instance`; `alive()` false once it is killed. */
  client(instance: number, alive: () => boolean): BigQuery {
    const never = <T>() => new Promise<T>(() => {});
    const call = async <T>(act: () => T | Promise<T>): Promise<T> => {
      if (!alive()) return never<T>();
      await this.time.sleep(CALL_MS);
      if (!alive()) return never<T>();
      return act();
    };
    const handle = (job: SimJob) => ({
      id: job.id,
      getQueryResults: () => call(() => this.polled(job, 'getQueryResults', () => this.results(job))),
      getMetadata: () =>
        call(() => {
          if (job.visibleAtMs !== undefined && this.time.nowMs() < job.visibleAtMs) throw notFound(job.id);
          return this.polled(job, 'jobs.get', () => [this.metadata(job)]);
        }),
    });
    return {
      timestamp: (value: Date | string) => ({
        value: value instanceof Date ? value.toISOString() : new Date(value).toISOString(),
      }),
      // A DATE parameter (the key day the adapter's statements prune their partitions with).
      date: (value: string) => ({ value }),
      createQueryJob: (query: QueryLike) =>
        call(() => {
          if (query.jobId !== undefined && this.jobs.has(query.jobId)) throw alreadyExists(query.jobId);
          const plan = this.inserts[this.inserted++] ?? {};
          if (plan.answer === 'neverArrived') {
            this.faults?.injected(
              'bigquery.insertAnswerLost',
              [],
              'a jobs.insert lost before it reached BigQuery',
            );
            throw lostAnswer();
          }
          const job = this.start(instance, alive, query);
          if (plan.rateLimitedPolls) job.rateLimitedPolls = plan.rateLimitedPolls;
          if (plan.answer === 'lost') {
            job.visibleAtMs = this.time.nowMs() + (plan.visibleAfterMs ?? 0);
            this.faults?.injected(
              'bigquery.insertAnswerLost',
              job.keys,
              // Job ids are the worker's own random choice: no fault's words name one (a seed replays them).
              `a job created, its jobs.insert answer lost (visible to jobs.get after ${plan.visibleAfterMs ?? 0} ms)`,
            );
            throw lostAnswer();
          }
          return [handle(job)];
        }),
      job: (id: string) => {
        const job = this.jobs.get(id);
        return job
          ? handle(job)
          : {
              id,
              getMetadata: () => call(() => Promise.reject(notFound(id))),
            };
      },
      query: (query: QueryLike) =>
        call(async () => {
          const job = this.start(instance, alive, query);
          await job.settled;
          return this.results(job);
        }),
      getJobs: (options: { minCreationTime?: string }) =>
        call(() => {
          const since = Number(options.minCreationTime ?? 0);
          const epochNow = this.time.clock.now().getTime();
          return [
            [...this.jobs.values()]
              .filter((j) => epochNow - (this.time.nowMs() - j.createdMs) >= since)
              .map((j) => ({ id: j.id })),
          ];
        }),
      dataset: () => ({ table: () => ({ getMetadata: () => call(() => [{}]) }) }),
    } as unknown as BigQuery;
  }

  /** jobs.insert: the statement starts now in the warehouse. */
  private start(instance: number, alive: () => boolean, query: QueryLike): SimJob {
    const id = query.jobId ?? `${query.jobPrefix ?? 'job_'}${String(this.next++).padStart(8, '0')}`;
    const params = query.params ?? {};
    const text = query.query;
    const timeoutMs = query.jobTimeoutMs;
    let keys: string[];
    let rows: Row[] | undefined;
    let winners = false;
    // The batched statements name as many key days as their rows carry (the table's partitions).
    const days = (build: (table: string, dayCount: number) => string) =>
      Array.from({ length: MAX_KEY_DAYS_PER_STATEMENT }, (_, i) => build(this.table, i + 1)).includes(text);
    if (days(batchMergeSql)) {
      rows = (params.rows as Array<Record<string, Parameter>>).map(rowOf);
      keys = rows.map((r) => r.dedup_key);
    } else if (text === batchLookupSql(this.table)) keys = params.keys as string[];
    else if (days(winnersSql)) {
      keys = params.keys as string[];
      winners = true;
    } else
      throw Object.assign(new Error(`the warehouse does not know this statement: ${text}`), { code: 400 });
    if (requestBytes({ query: text, params, types: query.types ?? {} }) > REQUEST_LIMIT_BYTES) {
      this.warehouse.refusedTooLarge(instance, keys);
      throw requestTooLarge();
    }
    // A lookup reads the key days from its parameter on (the table's partitions).
    const sinceDay = textOf(params[LOOKUP_PARAMETER] as Parameter | undefined) ?? undefined;
    const run = this.warehouse.execute(instance, alive, keys, rows, timeoutMs, sinceDay);
    const job: SimJob = {
      id,
      keys,
      createdMs: this.time.nowMs(),
      state: 'RUNNING',
      lostAtMs: this.time.nowMs() + run.lostAfterMs,
      settled: Promise.resolve(),
      ...(run.lost ? { lost: run.lost } : {}),
    };
    job.settled = run.done.then(
      (found) => {
        job.state = 'DONE';
        if (rows) job.inserted = found.size;
        else if (winners)
          job.rows = this.warehouse.raw
            .filter((r) => found.has(r.row.dedup_key))
            .map((r) => ({ dedup_key: r.row.dedup_key, message_id: r.row.message_id }));
        else job.rows = [...found].map((k) => ({ dedup_key: k, found: '1' }));
      },
      (error: Error) => {
        job.state = 'DONE';
        job.error = error;
      },
    );
    this.jobs.set(id, job);
    return job;
  }

  /** A poll of `job`, answered 403 `rateLimitExceeded` while the schedule rate-limits its polls. */
  private polled<T>(job: SimJob, method: string, answer: () => T): T {
    if (job.rateLimitedPolls) {
      job.rateLimitedPolls--;
      this.faults?.injected(
        'bigquery.pollRateLimited',
        job.keys,
        `${method} of a job of ${job.keys.length} key(s): 403 rateLimitExceeded`,
      );
      throw rateLimited();
    }
    return answer();
  }

  /** getQueryResults: waits up to 10 s for the job; its rows or DML statistics, or its error. */
  private async results(job: SimJob): Promise<unknown> {
    const waited = await Promise.race([
      job.settled.then(() => true),
      this.time.sleep(QUERY_WAIT_MS).then(() => false),
    ]);
    if (job.lost === 'resetWhilePolling' && this.time.nowMs() >= job.lostAtMs && !job.reported) {
      job.reported = true;
      throw lostAnswer();
    }
    if (!waited) return [[], null, { jobComplete: false }];
    if (job.lost === 'lostAfterCommit' && !job.reported) {
      job.reported = true;
      throw lostAnswer();
    }
    if (job.error) throw job.error;
    if (job.inserted !== undefined)
      return [[], null, { jobComplete: true, dmlStats: { insertedRowCount: String(job.inserted) } }];
    return [job.rows ?? [], null, { jobComplete: true }];
  }

  /** jobs.get: the job's true state. */
  private metadata(job: SimJob): unknown {
    if (job.state === 'RUNNING') return { id: job.id, status: { state: 'RUNNING' } };
    if (job.error) {
      const e = job.error as Error & { errors?: Array<{ reason?: string; message?: string }> };
      return { id: job.id, status: { state: 'DONE', errorResult: e.errors?.[0] ?? { message: e.message } } };
    }
    return {
      id: job.id,
      status: { state: 'DONE' },
      statistics: { query: { dmlStats: { insertedRowCount: String(job.inserted ?? 0) } } },
    };
  }
}

interface QueryLike {
  query: string;
  params?: Record<string, unknown>;
  types?: Statement['types'];
  jobTimeoutMs?: number;
  jobId?: string;
  jobPrefix?: string;
}

/** A 503 with no outcome: the answer of a job lost on the way (a reset, a 5xx while polling). */
function lostAnswer(): Error {
  return Object.assign(new Error('Error encountered during execution. Retrying may solve the problem.'), {
    code: 503,
    errors: [{ reason: 'backendError', message: 'Error encountered during execution.' }],
  });
}

/** jobs.get of a job that does not exist (or is not visible yet). */
function notFound(id: string): Error {
  return Object.assign(new Error(`Not found: Job docline-sim:EU.${id}`), {
    code: 404,
    errors: [{ reason: 'notFound', message: `Not found: Job docline-sim:EU.${id}` }],
  });
}

/** jobs.insert of an id that exists: BigQuery's 409. */
function alreadyExists(id: string): Error {
  return Object.assign(new Error(`Already Exists: Job docline-sim:EU.${id}`), {
    code: 409,
    errors: [{ reason: 'duplicate', message: `Already Exists: Job docline-sim:EU.${id}` }],
  });
}

/** A call refused for the API's request rate: BigQuery's 403 `rateLimitExceeded`. */
function rateLimited(): Error {
  const message = 'Exceeded rate limits: too many api requests per user per method for this user_method.';
  return Object.assign(new Error(message), { code: 403, errors: [{ reason: 'rateLimitExceeded', message }] });
}

/** A parameter's value as text (a typed one, such as a DATE, carries it in `value`); null when unset. */
function textOf(parameter: Parameter | undefined): string | null {
  if (parameter === null || parameter === undefined) return null;
  return typeof parameter === 'object' ? parameter.value : parameter;
}

/** A row back from its query parameters (the inverse of `rowParameters`). */
function rowOf(params: Record<string, Parameter>): Row {
  const row: Record<string, unknown> = {};
  for (const column of COLUMNS) {
    const text = textOf(params[column.name]);
    if (text === null) {
      row[column.name] = null;
      continue;
    }
    row[column.name] =
      column.type === 'INT64' ? Number(text) : column.type === 'JSON' ? JSON.parse(text) : String(text);
  }
  return row as unknown as Row;
}
