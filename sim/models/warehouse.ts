import { bigQueryError, keyDayGroups, lookupSinceDay } from '../../worker/src/adapters/stores/bigquery-store';
import { COST_DEFAULTS, LIMITS } from '../../worker/src/contract/cost-model';
import { keyDay, type Row } from '../../worker/src/contract/row';
import { BIGQUERY_DML_LIMITS } from '../../worker/src/contract/settings';
import type { BatchStore } from '../../worker/src/core/ports';
import { batchStoreOf } from '../batch-store';
import { type SimClock, SlidingWindowLimit } from '../time';
import { type Latency, mergeLatency, uniformLatency } from './latency';

/**
 * The BigQuery table at the port the worker's BigQueryStore implements (`BatchStore`), for the
 * sweep and the growth stage: group commit runs on it unchanged, and every refusal is the error
 * BigQueryStore would throw, built by its own `bigQueryError`. Unlike the fault simulator's
 * warehouse it keeps an index, so a 100,000-document backfill stays cheap, and it bills.
 *
 * It models the key-day layout (contract/row.ts) statement by statement as BigQueryStore sends
 * them: a lookup reads the key days since `lookupSinceDay(now)`; a batch is written in one MERGE per
 * `keyDayGroups` group (the store's own function), each reading the partitions of its key days; a
 * key matches a row of its key in its own key day.
 *
 * What it holds to (documented): 2 mutating DML running and 20 queued per table, then "Too many DML
 * statements outstanding"; 25 DML statements per 10 s per table, then 403 `rateLimitExceeded`; an
 * insert-only MERGE matches against the table as it was when it started; every statement bills at
 * least 10 MiB (one table referenced); `maximumBytesBilled` is checked against the estimate before
 * the statement runs, and a statement over it fails with `bytesBilledLimitExceeded`; the pre-run
 * estimate of a partitioned table counts the partitions a filter on the partitioning column by
 * constant parameters leaves, and only the columns the statement references.
 *
 * What it assumes: the table is **pre-filled** with `prefilledDays` days (the table's age) at
 * `documentsPerDay`, spread evenly up to the start, each row in the key day of its time; a
 * statement's estimate is the rows of the partitions it reads × the bytes of `dedup_key` + `key_day`
 * (the cost model's `lookupBytesPerRow`), and it bills that estimate (clustering may prune blocks
 * while it runs: billing the upper bound is the pessimistic side); a MERGE takes the one MERGE
 * latency (contract/cost-model.ts, or the cell's), a lookup 0.5–1.5 s, a `jobs.list` (the count of
 * writers) 0.1–0.3 s and nothing billed; refused statements bill nothing.
 */
export interface WarehouseStats {
  lookups: number;
  merges: number;
  billedBytes: number;
  refusedQueueFull: number;
  refusedRate: number;
  refusedBytesBilled: number;
  /** The largest estimate any statement had, and the cap it was checked against. */
  maxEstimateBytes: number;
}

const DAY_MS = 86_400_000;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

export class SweepWarehouse {
  readonly stats: WarehouseStats = {
    lookups: 0,
    merges: 0,
    billedBytes: 0,
    refusedQueueFull: 0,
    refusedRate: 0,
    refusedBytesBilled: 0,
    maxEstimateBytes: 0,
  };
  /** Rows inserted during the run, in order (raw: two rows of one key possible). */
  readonly raw: Row[] = [];
  /** When (simulated ms) each key's first row was committed. */
  readonly firstRowAtMs = new Map<string, number>();
  /** Rows of each key (the run's), and the key day of its first row. */
  private readonly rowsPerKey = new Map<string, number>();
  private readonly keyDayOf = new Map<string, string>();
  /** Rows in each key-day partition: the pre-filled ones, then the run's. */
  private readonly partitionRows = new Map<string, number>();
  private running = 0;
  private readonly queue: Array<() => void> = [];
  private readonly rate: SlidingWindowLimit;
  private readonly merge: Latency;
  private readonly lookup: Latency;
  private readonly listLatency: Latency;
  /** When each instance's store last started a MERGE (the job's creation time). */
  private readonly lastMergeMs = new Map<number, number>();
  private nextInstance = 0;
  readonly prefilledRows: number;

  constructor(
    private readonly time: SimClock,
    private readonly options: {
      seed: number;
      redeliveryWindowDays: number;
      maximumBytesBilled: number;
      /** Rows a day in the pre-filled table (default: the cost model's documentsPerDay). */
      documentsPerDay?: number;
      /** The table's age: days pre-filled before the start (default: the redelivery window). */
      prefilledDays?: number;
      /** A MERGE's latency (default: the cost model's). */
      mergeLatency?: Latency;
    },
  ) {
    this.rate = new SlidingWindowLimit(BIGQUERY_DML_LIMITS.statementsPerWindow, 10_000, () => time.nowMs());
    this.merge = options.mergeLatency ?? mergeLatency(options.seed);
    this.lookup = uniformLatency(500, 1_500, options.seed + 1);
    // A jobs.list call: a metadata read, assumed 100–300 ms (not documented).
    this.listLatency = uniformLatency(100, 300, options.seed + 2);
    // Pre-filled rows, spread evenly over the `prefilledDays` before now, each in its day's partition.
    const perDay = options.documentsPerDay ?? COST_DEFAULTS.documentsPerDay;
    // Key days are wall-clock days: the simulated clock as the worker sees it.
    const startMs = time.clock.now().getTime();
    const fromMs = startMs - (options.prefilledDays ?? options.redeliveryWindowDays) * DAY_MS;
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
    return this.rowsPerKey.size;
  }

  has(key: string): boolean {
    return this.rowsPerKey.has(key);
  }

  /**
   * The worker's store of one instance. Its `writers()` is what BigQuery's `jobs.list` tells the real
   * store: the instances whose MERGE jobs were created in the last minute (this one counted), free.
   */
  store(): BatchStore {
    const instance = this.nextInstance++;
    const seenMany = (keys: readonly string[]) => this.runLookup(keys);
    const recordMany = async (rows: readonly Row[]) => {
      // The store's own split: one MERGE per group of at most two key days.
      const now = this.time.clock.now();
      const inserted = new Set<string>();
      for (const group of keyDayGroups(rows, (row) => keyDay(row, now))) {
        this.lastMergeMs.set(instance, this.time.nowMs());
        for (const key of await this.runMerge(group.rows, group.days, now)) inserted.add(key);
      }
      return inserted;
    };
    return {
      ...batchStoreOf(seenMany, recordMany),
      writers: async () => {
        await this.time.sleep(this.listLatency());
        const since = this.time.nowMs() - 60_000;
        let count = 0;
        for (const [other, atMs] of this.lastMergeMs) if (other !== instance && atMs > since) count++;
        return count + 1;
      },
    };
  }

  /** Bills one statement, or refuses it for the cap (before it runs). */
  private bill(operation: string, estimate: number): void {
    this.stats.maxEstimateBytes = Math.max(this.stats.maxEstimateBytes, estimate);
    if (estimate > this.options.maximumBytesBilled) {
      this.stats.refusedBytesBilled++;
      throw bigQueryError(
        {
          code: 400,
          errors: [{ reason: 'bytesBilledLimitExceeded' }],
          message: `Query exceeded limit for bytes billed: ${this.options.maximumBytesBilled}. ${Math.ceil(estimate)} or higher required.`,
        },
        operation,
      );
    }
    this.stats.billedBytes += Math.max(LIMITS.minBilledBytesPerTable, estimate);
  }

  private async runLookup(keys: readonly string[]): Promise<Set<string>> {
    const days = this.lookupDays();
    this.bill('seen', this.estimateBytesOf(days));
    this.stats.lookups++;
    await this.time.sleep(this.lookup());
    const read = new Set(days);
    return new Set(keys.filter((k) => read.has(this.keyDayOf.get(k) ?? '')));
  }

  private async runMerge(rows: readonly Row[], days: string[], now: Date): Promise<Set<string>> {
    if (this.running >= BIGQUERY_DML_LIMITS.running && this.queue.length >= BIGQUERY_DML_LIMITS.queued) {
      this.stats.refusedQueueFull++;
      throw bigQueryError(
        {
          code: 400,
          errors: [{ reason: 'resourcesExceeded' }],
          message: `Resources exceeded during query execution: Too many DML statements outstanding against table docline-sweep:docline.documents, limit is ${BIGQUERY_DML_LIMITS.queued}.`,
        },
        'record',
      );
    }
    if (!this.rate.tryTake()) {
      this.stats.refusedRate++;
      throw bigQueryError(
        {
          code: 403,
          errors: [{ reason: 'rateLimitExceeded' }],
          message: 'Exceeded rate limits: too many table dml insert operations for this table.',
        },
        'record',
      );
    }
    this.bill('record', this.estimateBytesOf(days));
    if (this.running >= BIGQUERY_DML_LIMITS.running)
      await new Promise<void>((resolve) => this.queue.push(resolve));
    else this.running++;
    try {
      this.stats.merges++;
      const dayOfRow = (row: Row) => keyDay(row, now);
      // A key matches a row of its key in its own key day, as the table was when the MERGE started.
      const present = new Set(
        rows.map((r) => r.dedup_key).filter((k, i) => this.keyDayOf.get(k) === dayOfRow(rows[i]!)),
      );
      await this.time.sleep(this.merge());
      const inserted = new Set<string>();
      for (const row of rows) {
        if (present.has(row.dedup_key) || inserted.has(row.dedup_key)) continue;
        const day = dayOfRow(row);
        this.raw.push(row);
        this.rowsPerKey.set(row.dedup_key, (this.rowsPerKey.get(row.dedup_key) ?? 0) + 1);
        if (!this.keyDayOf.has(row.dedup_key)) {
          this.keyDayOf.set(row.dedup_key, day);
          this.firstRowAtMs.set(row.dedup_key, this.time.nowMs());
        }
        this.partitionRows.set(day, (this.partitionRows.get(day) ?? 0) + 1);
        inserted.add(row.dedup_key);
      }
      return inserted;
    } finally {
      const next = this.queue.shift();
      if (next) next();
      else this.running--;
    }
  }
}
