import { BigQuery } from '@google-cloud/bigquery';
import {
  batchMergeSql,
  batchMergeStatement,
  bigQueryError,
  keyDayGroups,
  lookupSinceDay,
  MAX_KEY_DAYS_PER_STATEMENT,
  type Statement,
  statementTimeoutMs,
} from '../../worker/src/adapters/stores/bigquery-store';
import { COST_DEFAULTS, LIMITS } from '../../worker/src/contract/cost-model';
import { keyDay, type Row } from '../../worker/src/contract/row';
import { BIGQUERY_DML_LIMITS, MIN_STATEMENT_MS } from '../../worker/src/contract/settings';
import { type Deadline, notStarted } from '../../worker/src/core/deadline';
import * as errors from '../../worker/src/core/errors';
import type { BatchStore } from '../../worker/src/core/ports';
import type { FaultLog, FaultSchedule } from '../faults/schedule';
import { type SimClock, SlidingWindowLimit } from '../time';
import { type Latency, mergeLatency, uniformLatency } from './latency';

/**
 * The BigQuery table, in process, at the port the worker's BigQueryStore implements (`BatchStore`),
 * for the fault simulator, the sweep and the growth stage: group commit runs on it unchanged, and
 * every failure is the error BigQueryStore would throw, built by its own `bigQueryError` mapping
 * from BigQuery's documented error texts. The fault simulator also reaches it through the client
 * model (sim/faults/bigquery-client.ts), where the adapter's own jobs run.
 *
 * What it holds to (documented): the table is partitioned by key day (contract/row.ts), written as
 * BigQueryStore writes it, one MERGE per `keyDayGroups` group; a MERGE matches a key in the row's
 * own key day only, against the table as it was when the statement started, and inserts when it
 * ends (so two MERGEs of one new key that overlap both insert); `processed_at` is stamped at the
 * statement's start where the MERGE stamps it with `CURRENT_TIMESTAMP()`; a lookup reads the key
 * days since `lookupSinceDay(now)`; 2 mutating DML statements run and 20 wait per table, beyond that
 * "Too many DML statements outstanding"; a statement still running (or queued) at its `jobTimeoutMs`
 * ends with BigQuery's timeout error and does not commit; a request over 10 MB is refused before it
 * becomes a job. With `published` (the sweep): 25 DML statements per 10 s per table, then 403
 * `rateLimitExceeded`; `maximumBytesBilled` checked against the pre-run estimate (the partitions a
 * constant filter on the key day leaves, times the bytes of `dedup_key` + `key_day`), and every
 * statement billing at least 10 MiB.
 *
 * What it assumes: the stop at `jobTimeoutMs` always succeeds (BigQuery says it "may not always
 * succeed in canceling it before the job completes"; the key's lease held past that bound is what
 * covers a stop that fails, docs/testing.md); with `published`, the table is pre-filled with
 * `prefilledDays` days at `documentsPerDay`, spread evenly up to the start, and a statement bills
 * its whole estimate (clustering may prune blocks while it runs: the pessimistic side).
 *
 * Each statement follows a plan: its duration and the fault it meets. The fault simulator's come
 * from the seed's schedule (concurrent-update errors, a full DML queue, slow statements that commit
 * late, hung ones that never answer, answers lost); the sweep's are latency draws (a MERGE the cost
 * model's latency or the cell's, a lookup 0.5–1.5 s), drawn when the statement starts to run. Poison
 * documents' rows are refused whole (a 400 that names no row); a killed instance's statements never
 * arrive.
 */

/** A row of the raw table, with what the checks need to know about how it got there. */
export interface RawRow {
  /** The row's identity in the table (its place in insertion order). */
  id: number;
  row: Row;
  /** When its MERGE committed (simulated ms). */
  committedAtMs: number;
  statement: number;
  instance: number;
  /** Its key day (the table's partition), as its MERGE computed it. */
  keyDay: string;
}

export interface StatementRecord {
  index: number;
  kind: 'lookup' | 'merge';
  instance: number;
  keys: string[];
  startedAtMs: number;
  endedAtMs?: number;
  outcome?: string;
}

export interface WarehouseStats {
  lookups: number;
  merges: number;
  billedBytes: number;
  refusedQueueFull: number;
  refusedRate: number;
  refusedBytesBilled: number;
  /** The largest estimate any statement had. */
  maxEstimateBytes: number;
}

type StatementFault = FaultSchedule['bigquery']['statements'][number];

/** One statement's plan: what goes wrong, and how long it runs (asked once, when it starts to run). */
interface Plan {
  fault?: StatementFault['fault'];
  unknown?: StatementFault['unknown'];
  durationMs: () => number;
  /** The schedule's latency, as the fault log names it. */
  plannedMs?: number;
}

export interface WarehouseOptions {
  /** The table's name in error texts. */
  table: string;
  /** The fault simulator's: the schedule's plans, its poison documents and where faults are logged. */
  faults?: {
    schedule: FaultSchedule['bigquery'];
    poisonKeys: ReadonlySet<string>;
    log: FaultLog;
  };
  /** The sweep's and the growth stage's: latencies, the DML rate limit, billing against a pre-filled table. */
  published?: {
    seed: number;
    redeliveryWindowDays: number;
    maximumBytesBilled: number;
    /** Rows a day in the pre-filled table (default: the cost model's documentsPerDay). */
    documentsPerDay?: number;
    /** The table's age: days pre-filled before the start (default: the redelivery window). */
    prefilledDays?: number;
    /** A MERGE's latency (default: the cost model's). */
    mergeLatency?: Latency;
  };
}

const DAY_MS = 86_400_000;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/**
 * BigQuery's limit on the size of one request (jobs.insert, jobs.query), parameters included:
 * "Maximum request size: 10 MB" (BigQuery quotas, query jobs). The API's refusal names it in bytes
 * ("Request payload size exceeds the limit: 10485760 bytes."), so the model takes 10 MiB.
 */
export const REQUEST_LIMIT_BYTES = 10_485_760;

/** The outcome recorded for a MERGE request refused for its size (it never became a job). */
export const REFUSED_TOO_LARGE = 'refused: request too large';

/** A client to build statements with, as the adapter does (no call is ever made with it). */
const STATEMENT_BUILDER = new BigQuery({ projectId: 'docline-sim' });

/**
 * The bytes of a statement's jobs.insert request as the client library sends it: the SQL and its
 * named parameters, each turned into its REST form (`queryParameters`) by the library's own
 * `valueToQueryParameter_`, then JSON.
 */
export function requestBytes(statement: Pick<Statement, 'query' | 'params' | 'types'>): number {
  const types = statement.types as Record<string, Parameters<typeof BigQuery.valueToQueryParameter_>[1]>;
  const queryParameters = Object.entries(statement.params as Record<string, unknown>).map(
    ([name, value]) => ({ name, ...BigQuery.valueToQueryParameter_(value, types[name]) }),
  );
  return Buffer.byteLength(
    JSON.stringify({
      configuration: {
        query: { query: statement.query, useLegacySql: false, parameterMode: 'named', queryParameters },
      },
    }),
  );
}

/** The bytes of the batched MERGE that writes `rows` (the adapter's own statement for them). */
export function mergeRequestBytes(rows: readonly Row[], now: Date): number {
  const dayOfRow = (row: Row) => keyDay(row, now);
  const days = [...new Set(rows.map(dayOfRow))].slice(0, MAX_KEY_DAYS_PER_STATEMENT);
  return requestBytes(
    batchMergeStatement(STATEMENT_BUILDER, 'docline-sim.docline.documents', rows, days, dayOfRow),
  );
}

/** BigQuery's answer to a request over {@link REQUEST_LIMIT_BYTES}: a 400 before any job exists. */
export function requestTooLarge(): Error {
  return apiError(400, 'badRequest', `Request payload size exceeds the limit: ${REQUEST_LIMIT_BYTES} bytes.`);
}

/**
 * Whether the store's MERGE stamps `processed_at` itself with `CURRENT_TIMESTAMP()`. GoogleSQL
 * records that time at the start of the statement (not when it commits), so the model stamps the
 * time the statement started running; otherwise the row keeps the time the worker gave it.
 */
const MERGE_STAMPS_PROCESSED_AT = /CURRENT_TIMESTAMP\(\)/.test(
  batchMergeSql('docline-sim.docline.documents'),
);

export class Warehouse {
  readonly raw: RawRow[] = [];
  readonly statements: StatementRecord[] = [];
  readonly stats: WarehouseStats = {
    lookups: 0,
    merges: 0,
    billedBytes: 0,
    refusedQueueFull: 0,
    refusedRate: 0,
    refusedBytesBilled: 0,
    maxEstimateBytes: 0,
  };
  /** When (simulated ms) each key's first row was committed. */
  readonly firstRowAtMs = new Map<string, number>();
  /** Rows of the pre-filled table (0 without `published`). */
  readonly prefilledRows: number = 0;
  /** Called after every commit (the view readers look then). */
  onCommit: () => void = () => {};
  /** The key days each key has rows in. */
  private readonly daysOfKey = new Map<string, Set<string>>();
  /** Rows in each key-day partition: the pre-filled ones, then the run's. */
  private readonly partitionRows = new Map<string, number>();
  private running = 0;
  private readonly queue: Array<() => void> = [];
  private next = 0;
  private nextInstance = 0;
  /** When each instance's store last started a MERGE (the job's creation time). */
  private readonly lastMergeMs = new Map<number, number>();
  private readonly rate?: SlidingWindowLimit;
  private readonly mergeLatency?: Latency;
  private readonly lookupLatency?: Latency;
  private readonly listLatency?: Latency;

  constructor(
    private readonly time: SimClock,
    private readonly options: WarehouseOptions,
  ) {
    const published = options.published;
    if (!published) return;
    this.rate = new SlidingWindowLimit(BIGQUERY_DML_LIMITS.statementsPerWindow, 10_000, () => time.nowMs());
    this.mergeLatency = published.mergeLatency ?? mergeLatency(published.seed);
    this.lookupLatency = uniformLatency(500, 1_500, published.seed + 1);
    // A jobs.list call: a metadata read, assumed 100–300 ms (not documented).
    this.listLatency = uniformLatency(100, 300, published.seed + 2);
    // Pre-filled rows, spread evenly over the `prefilledDays` before now, each in its day's partition.
    const perDay = published.documentsPerDay ?? COST_DEFAULTS.documentsPerDay;
    // Key days are wall-clock days: the simulated clock as the worker sees it.
    const startMs = time.clock.now().getTime();
    const fromMs = startMs - (published.prefilledDays ?? published.redeliveryWindowDays) * DAY_MS;
    let total = 0;
    for (let dayStart = Math.floor(fromMs / DAY_MS) * DAY_MS; dayStart < startMs; dayStart += DAY_MS) {
      const overlap = Math.min(startMs, dayStart + DAY_MS) - Math.max(fromMs, dayStart);
      const rows = (perDay * overlap) / DAY_MS;
      this.partitionRows.set(dayOf(dayStart), rows);
      total += rows;
    }
    this.prefilledRows = Math.round(total);
  }

  /** The pre-run estimate of a statement reading these key days' partitions. */
  estimateBytesOf(days: Iterable<string>): number {
    let rows = 0;
    for (const day of days) rows += this.partitionRows.get(day) ?? 0;
    return rows * COST_DEFAULTS.lookupBytesPerRow;
  }

  /** The key days a lookup made now reads. */
  lookupDays(): string[] {
    const since = lookupSinceDay(this.time.clock.now());
    return [...this.partitionRows.keys()].filter((d) => d >= since);
  }

  /** The pre-run estimate of a lookup made now. */
  estimateBytes(): number {
    return this.estimateBytesOf(this.lookupDays());
  }

  /**
   * The rows of the key days from `since` on, and before `until` when given: what one statement of
   * reconcile's comparison reads (every row of its days, of any prefix), however far back `since` is.
   */
  rowsBetween(since: string, until?: string): number {
    let rows = 0;
    for (const [day, n] of this.partitionRows)
      if (day >= since && (until === undefined || day < until)) rows += n;
    return rows;
  }

  /** Distinct keys with a row (the `documents` view's row count). */
  get viewRows(): number {
    return this.daysOfKey.size;
  }

  has(key: string): boolean {
    return this.daysOfKey.has(key);
  }

  /**
   * What the `documents` view returns: per dedup key the first row by `processed_at`, then
   * `message_id` (the order of contract/views.ts).
   */
  view(): Map<string, RawRow> {
    const first = new Map<string, RawRow>();
    for (const r of this.raw) {
      const seen = first.get(r.row.dedup_key);
      if (
        !seen ||
        r.row.processed_at < seen.row.processed_at ||
        (r.row.processed_at === seen.row.processed_at && r.row.message_id < seen.row.message_id)
      )
        first.set(r.row.dedup_key, r);
    }
    return first;
  }

  /**
   * The `BatchStore` of one instance; `alive()` false once the instance is killed. With `published`,
   * its `writers()` is what BigQuery's `jobs.list` tells the real store: the instances whose MERGE
   * jobs were created in the last minute (this one counted), free.
   */
  store(instance = this.nextInstance++, alive: () => boolean = () => true): BatchStore {
    const listLatency = this.listLatency;
    const seenMany = (keys: readonly string[], deadline?: Deadline) =>
      this.submit(instance, alive, [...keys], undefined, deadline);
    const recordMany = async (rows: readonly Row[], deadline?: Deadline) => {
      // The store's own split: one MERGE per group of at most two key days.
      const inserted = new Set<string>();
      for (const group of keyDayGroups(rows, (row) => keyDay(row, this.time.clock.now()))) {
        this.lastMergeMs.set(instance, this.time.nowMs());
        for (const key of await this.submit(
          instance,
          alive,
          group.rows.map((r) => r.dedup_key),
          group.rows,
          deadline,
        ))
          inserted.add(key);
      }
      return inserted;
    };
    const writers = async () => {
      await this.time.sleep(listLatency!());
      const since = this.time.nowMs() - 60_000;
      let count = 0;
      for (const [other, atMs] of this.lastMergeMs) if (other !== instance && atMs > since) count++;
      return count + 1;
    };
    return {
      seenMany,
      recordMany,
      ping: async () => {},
      ...(listLatency ? { writers } : {}),
    };
  }

  /** One statement at the `BatchStore` port: its outcome as `BigQueryStore` would throw it. */
  private submit(
    instance: number,
    alive: () => boolean,
    keys: string[],
    rows?: readonly Row[],
    deadline?: Deadline,
  ): Promise<Set<string>> {
    const operation = rows ? 'record' : 'seen';
    // As BigQueryStore: a statement the delivery has too little time left for is not sent.
    const leftMs = deadline?.remainingMs() ?? Number.POSITIVE_INFINITY;
    if (leftMs < MIN_STATEMENT_MS) return Promise.reject(notStarted(`BigQuery ${operation}`, leftMs));
    const since = this.options.published ? lookupSinceDay(this.time.clock.now()) : undefined;
    const job = this.execute(instance, alive, keys, rows, statementTimeoutMs(deadline), since);
    const mapped = job.done.catch((error: unknown) => {
      throw bigQueryError(error, operation);
    });
    if (job.lost === 'lostAfterCommit') return mapped.then(() => Promise.reject(outcomeUnknown(job.index)));
    if (job.lost === 'resetWhilePolling') {
      void mapped.catch(() => undefined);
      return this.time.sleep(job.lostAfterMs).then(() => Promise.reject(outcomeUnknown(job.index)));
    }
    return mapped;
  }

  /** Records a MERGE request refused for its size (it never became a job). */
  refusedTooLarge(instance: number, keys: string[]): void {
    this.statements.push({
      index: this.statements.length,
      kind: 'merge',
      instance,
      keys,
      startedAtMs: this.time.nowMs(),
      endedAtMs: this.time.nowMs(),
      outcome: REFUSED_TOO_LARGE,
    });
  }

  /** Whether the MERGE of `rows` is a request over BigQuery's size limit. */
  tooLarge(rows: readonly Row[]): boolean {
    return mergeRequestBytes(rows, this.time.clock.now()) > REQUEST_LIMIT_BYTES;
  }

  /** The next statement's plan: the schedule's (the fault simulator), or latency draws. */
  private plan(kind: StatementRecord['kind']): Plan {
    if (!this.options.faults) {
      const draw = kind === 'merge' ? this.mergeLatency : this.lookupLatency;
      if (!draw) return { durationMs: () => 1_000 };
      let drawn: number | undefined;
      return { durationMs: () => (drawn ??= draw()) };
    }
    const planned = this.options.faults.schedule.statements[this.next++] ?? { latencyMs: 1_000 };
    // A lookup reads, it does not write: half a statement's time.
    const durationMs = kind === 'lookup' ? planned.latencyMs / 2 : planned.latencyMs;
    return {
      fault: planned.fault,
      unknown: planned.unknown,
      durationMs: () => durationMs,
      plannedMs: planned.latencyMs,
    };
  }

  private injected(kind: Parameters<FaultLog['injected']>[0], keys: string[], detail: string): void {
    this.options.faults?.log.injected(kind, keys, detail);
  }

  /** Bills one statement (with `published`), or refuses it for the cap before it runs. */
  private bill(estimate: number): void {
    const published = this.options.published;
    if (!published) return;
    this.stats.maxEstimateBytes = Math.max(this.stats.maxEstimateBytes, estimate);
    if (estimate > published.maximumBytesBilled) {
      this.stats.refusedBytesBilled++;
      throw apiError(
        400,
        'bytesBilledLimitExceeded',
        `Query exceeded limit for bytes billed: ${published.maximumBytesBilled}. ${Math.ceil(estimate)} or higher required.`,
      );
    }
    this.stats.billedBytes += Math.max(LIMITS.minBilledBytesPerTable, estimate);
  }

  /**
   * One statement, as BigQuery runs it: `done` settles with the keys found (a lookup) or inserted
   * (a MERGE), or fails with BigQuery's error as its API answers it. `lost` says that the client
   * does not get that answer (the schedule's `outcomeUnknown`): after the commit, or while the job
   * runs on (`lostAfterMs` after it starts). `timeoutMs`: the job's `jobTimeoutMs`; `since`: a
   * lookup's first key day (none: every row).
   */
  execute(
    instance: number,
    alive: () => boolean,
    keys: string[],
    rows: readonly Row[] | undefined,
    timeoutMs: number | undefined,
    since?: string,
  ): {
    index: number;
    done: Promise<Set<string>>;
    lost?: 'lostAfterCommit' | 'resetWhilePolling';
    lostAfterMs: number;
  } {
    const kind: StatementRecord['kind'] = rows ? 'merge' : 'lookup';
    // A killed instance sends nothing.
    if (!alive()) return { index: -1, done: new Promise(() => {}), lostAfterMs: 0 };
    // A request over the size limit is refused as it arrives: no job, no DML slot, no plan (those
    // belong to statements that run).
    if (rows && this.tooLarge(rows)) {
      this.refusedTooLarge(instance, keys);
      return { index: -1, done: Promise.reject(requestTooLarge()), lostAfterMs: 0 };
    }
    const stopAtMs = timeoutMs === undefined ? Number.POSITIVE_INFINITY : this.time.nowMs() + timeoutMs;
    const plan = this.plan(kind);
    const record: StatementRecord = {
      index: this.statements.length,
      kind,
      instance,
      keys,
      startedAtMs: this.time.nowMs(),
    };
    this.statements.push(record);
    const job = (done: Promise<Set<string>>) => ({ index: record.index, done, lostAfterMs: 0 });
    const end = (outcome: string) => {
      record.endedAtMs = this.time.nowMs();
      record.outcome = outcome;
    };
    const refuse = (outcome: string, error: Error) => {
      end(outcome);
      return job(Promise.reject(error));
    };
    if (kind === 'merge' && plan.fault === 'dmlQueueFull') {
      this.injected('bigquery.dmlQueueFull', keys, `statement ${record.index}`);
      end('dml queue full');
      return job(this.time.sleep(200).then(() => Promise.reject(this.queueFull())));
    }
    if (
      kind === 'merge' &&
      this.running >= BIGQUERY_DML_LIMITS.running &&
      this.queue.length >= BIGQUERY_DML_LIMITS.queued
    ) {
      this.stats.refusedQueueFull++;
      return refuse('dml queue full (limit)', this.queueFull());
    }
    if (kind === 'merge' && this.rate && !this.rate.tryTake()) {
      this.stats.refusedRate++;
      return refuse(
        'dml rate limit',
        apiError(
          403,
          'rateLimitExceeded',
          'Exceeded rate limits: too many table dml insert operations for this table.',
        ),
      );
    }
    try {
      this.bill(
        this.estimateBytesOf(
          kind === 'merge' ? new Set(rows!.map((r) => keyDay(r, this.time.clock.now()))) : this.lookupDays(),
        ),
      );
    } catch (error) {
      return refuse('over maximumBytesBilled', error as Error);
    }
    const now = this.time.nowMs();
    const outage = (this.options.faults?.schedule.outages ?? []).find(
      (o) => now >= o.atMs && now < o.atMs + o.forMs,
    );
    if (outage) {
      this.injected(
        'bigquery.outage',
        keys,
        `statement ${record.index} (${kind}): 503 (outage of ${outage.forMs} ms)`,
      );
      end('outage');
      return job(
        this.time
          .sleep(1_000)
          .then(() =>
            Promise.reject(
              apiError(
                503,
                'backendError',
                'Error encountered during execution. Retrying may solve the problem.',
              ),
            ),
          ),
      );
    }
    if (plan.fault === 'hung') {
      this.injected('bigquery.hungStatement', keys, `statement ${record.index} (${kind}) never answers`);
      end('hung');
      return job(new Promise(() => {}));
    }
    if (plan.fault === 'slow')
      this.injected(
        'bigquery.slowStatement',
        keys,
        `statement ${record.index} (${kind}) takes ${plan.plannedMs} ms`,
      );
    const done =
      kind === 'lookup'
        ? this.lookup(keys, plan, stopAtMs, timeoutMs, since, end)
        : this.merge(instance, keys, rows!, plan, stopAtMs, timeoutMs, record.index, end);
    if (kind === 'merge' && plan.fault === 'outcomeUnknown') {
      const lost = plan.unknown ?? 'lostAfterCommit';
      this.injected(
        'bigquery.outcomeUnknown',
        keys,
        lost === 'lostAfterCommit'
          ? `statement ${record.index}: its answer is lost`
          : `statement ${record.index}: the client loses the job while it runs on`,
      );
      return { index: record.index, done, lost, lostAfterMs: Math.min(plan.durationMs() / 2, 1_000) };
    }
    return job(done);
  }

  private async lookup(
    keys: string[],
    plan: Plan,
    stopAtMs: number,
    timeoutMs: number | undefined,
    since: string | undefined,
    end: (outcome: string) => void,
  ): Promise<Set<string>> {
    this.stats.lookups++;
    // A query is stopped at its jobTimeoutMs too.
    if (this.time.nowMs() + plan.durationMs() > stopAtMs) {
      await this.time.sleep(Math.max(0, stopAtMs - this.time.nowMs()));
      end('timed out');
      throw timedOut(timeoutMs ?? 0);
    }
    await this.time.sleep(plan.durationMs());
    end('ok');
    return new Set(
      keys.filter((k) => {
        const days = this.daysOfKey.get(k);
        return days !== undefined && (since === undefined || [...days].some((d) => d >= since));
      }),
    );
  }

  private async merge(
    instance: number,
    keys: string[],
    rows: readonly Row[],
    plan: Plan,
    stopAtMs: number,
    timeoutMs: number | undefined,
    statement: number,
    end: (outcome: string) => void,
  ): Promise<Set<string>> {
    if (this.running >= BIGQUERY_DML_LIMITS.running) {
      // Queued: stopped at its jobTimeoutMs like a running job (it leaves the queue, never runs).
      const admitted = await new Promise<boolean>((resolve) => {
        const admit = () => {
          timer?.cancel();
          resolve(true);
        };
        const timer = Number.isFinite(stopAtMs)
          ? this.time.after(Math.max(0, stopAtMs - this.time.nowMs()), () => {
              this.queue.splice(this.queue.indexOf(admit), 1);
              resolve(false);
            })
          : undefined;
        this.queue.push(admit);
      });
      if (!admitted) {
        end('failed: timed out while queued');
        throw timedOut(timeoutMs ?? 0);
      }
    } else this.running++;
    try {
      this.stats.merges++;
      const startedAt = this.time.clock.now();
      const dayOfRow = (row: Row) => keyDay(row, startedAt);
      // A key matches a row of its key in its own key day, as the table was when the MERGE started.
      const present = new Set(rows.filter((r) => this.daysOfKey.get(r.dedup_key)?.has(dayOfRow(r))));
      // Stopped at its jobTimeoutMs: still running then (queued included), it never commits.
      if (this.time.nowMs() + plan.durationMs() > stopAtMs) {
        await this.time.sleep(Math.max(0, stopAtMs - this.time.nowMs()));
        throw timedOut(timeoutMs ?? 0);
      }
      await this.time.sleep(plan.durationMs());
      if (plan.fault === 'concurrentUpdate') {
        this.injected('bigquery.concurrentUpdate', keys, `statement ${statement}`);
        throw apiError(
          400,
          'invalidQuery',
          `Could not serialize access to table ${this.options.table} due to concurrent update`,
        );
      }
      const poison = rows.filter((r) => this.options.faults?.poisonKeys.has(r.dedup_key));
      if (poison.length > 0) {
        this.injected(
          poison.length === 1
            ? 'bigquery.refusedOneRow'
            : poison.length === 2
              ? 'bigquery.refusedTwoRows'
              : 'bigquery.refusedManyRows',
          poison.map((r) => r.dedup_key),
          `statement ${statement} refused (${keys.length} rows)`,
        );
        throw apiError(400, 'invalidQuery', 'Query error: Invalid JSON payload in a parameter value.');
      }
      const inserted = new Set<string>();
      for (const row of rows) {
        if (present.has(row)) continue;
        const day = dayOfRow(row);
        const stored = MERGE_STAMPS_PROCESSED_AT ? { ...row, processed_at: startedAt.toISOString() } : row;
        this.raw.push({
          id: this.raw.length,
          row: stored,
          committedAtMs: this.time.nowMs(),
          statement,
          instance,
          keyDay: day,
        });
        const days = this.daysOfKey.get(row.dedup_key);
        if (days) days.add(day);
        else {
          this.daysOfKey.set(row.dedup_key, new Set([day]));
          this.firstRowAtMs.set(row.dedup_key, this.time.nowMs());
        }
        this.partitionRows.set(day, (this.partitionRows.get(day) ?? 0) + 1);
        inserted.add(row.dedup_key);
      }
      end(`inserted ${inserted.size}`);
      this.onCommit();
      return inserted;
    } catch (error) {
      end(`failed: ${error instanceof Error ? error.message.slice(0, 80) : String(error)}`);
      throw error;
    } finally {
      const next = this.queue.shift();
      if (next) next();
      else this.running--;
    }
  }

  private queueFull(): Error {
    return apiError(
      400,
      'resourcesExceeded',
      `Resources exceeded during query execution: Too many DML statements outstanding against table ${this.options.table}, limit is ${BIGQUERY_DML_LIMITS.queued}.`,
    );
  }
}

/** An error as BigQuery's API answers it (what the client library throws). */
function apiError(code: number, reason: string, message: string): Error {
  return Object.assign(new Error(message), { code, errors: [{ reason, message }] });
}

/**
 * What the store adapter throws for a write whose outcome it could not learn: the worker's
 * `OutcomeUnknownError` where it has one, else the transient error BigQuery's 503 maps to.
 */
function outcomeUnknown(statement: number): Error {
  const Unknown = (errors as Record<string, unknown>).OutcomeUnknownError as
    | (new (
        code: string,
        message: string,
      ) => Error)
    | undefined;
  const message = `the outcome of statement ${statement} is unknown (its answer was lost)`;
  if (Unknown) return new Unknown('bigquery_outcome_unknown', message);
  return bigQueryError(
    apiError(503, 'backendError', `Error encountered during execution: ${message}`),
    'record',
  );
}

/** BigQuery's answer to a job stopped at its `jobTimeoutMs`. */
function timedOut(timeoutMs: number): Error {
  return apiError(400, 'timeout', `Job timed out after ${Math.ceil(timeoutMs / 1000)} sec`);
}
