import { bigQueryError } from '../../worker/src/adapters/bigquery-store';
import { COST_DEFAULTS, LIMITS } from '../../worker/src/contract/cost-model';
import type { Row } from '../../worker/src/contract/row';
import { BIGQUERY_DML_LIMITS } from '../../worker/src/contract/settings';
import type { BatchStore } from '../../worker/src/core/ports';
import { batchStoreOf } from '../batch-store';
import { type SimClock, SlidingWindowLimit } from '../time';
import { type Latency, mergeLatency, uniformLatency } from './latency';

/**
 * The BigQuery table at the port the worker's BigQueryStore implements (`BatchStore`), for the
 * sweep: group commit runs on it unchanged, and every refusal is the error BigQueryStore would
 * throw, built by its own `bigQueryError`. Unlike the fault simulator's warehouse it keeps an index,
 * so a 100,000-document backfill stays cheap, and it bills.
 *
 * What it holds to (documented): 2 mutating DML running and 20 queued per table, then "Too many DML
 * statements outstanding"; 25 DML statements per 10 s per table, then 403 `rateLimitExceeded`;
 * an insert-only MERGE matches against the table as it was when it started; every statement bills
 * at least 10 MiB; `maximumBytesBilled` is checked against the estimate before the statement runs,
 * and a statement over it fails with `bytesBilledLimitExceeded`.
 *
 * What it assumes: the table is **pre-filled** with 15 days at the cost model's `documentsPerDay`
 * (spread evenly, so they age out of the dedup window as simulated days pass); a windowed
 * statement's estimate is every row in the window × the bytes of `dedup_key` + `processed_at`
 * (the cost model's `lookupBytesPerRow`; clustering prunes only at run time, so the estimate is the
 * whole window), and it bills that estimate (the upper bound); a MERGE takes the one MERGE latency
 * (contract/cost-model.ts), a lookup 0.5–1.5 s, a `jobs.list` (the count of writers) 0.1–0.3 s and
 * nothing billed; refused statements bill nothing.
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
  private readonly rowsPerKey = new Map<string, number>();
  private readonly insertedAtMs: number[] = [];
  private insertedHead = 0;
  private running = 0;
  private readonly queue: Array<() => void> = [];
  private readonly rate: SlidingWindowLimit;
  private readonly merge: Latency;
  private readonly lookup: Latency;
  private readonly listLatency: Latency;
  /** When each instance's store last started a MERGE (the job's creation time). */
  private readonly lastMergeMs = new Map<number, number>();
  private nextInstance = 0;

  constructor(
    private readonly time: SimClock,
    private readonly options: {
      seed: number;
      dedupWindowDays: number;
      maximumBytesBilled: number;
      /** Rows a day in the pre-filled table (default: the cost model's documentsPerDay). */
      documentsPerDay?: number;
      /** Days pre-filled (default: the dedup window). */
      prefilledDays?: number;
    },
  ) {
    this.rate = new SlidingWindowLimit(BIGQUERY_DML_LIMITS.statementsPerWindow, 10_000, () => time.nowMs());
    this.merge = mergeLatency(options.seed);
    this.lookup = uniformLatency(500, 1_500, options.seed + 1);
    // A jobs.list call: a metadata read, assumed 100–300 ms (not documented).
    this.listLatency = uniformLatency(100, 300, options.seed + 2);
  }

  /** Rows the pre-filled table starts with. */
  get prefilledRows(): number {
    return Math.round(
      (this.options.documentsPerDay ?? COST_DEFAULTS.documentsPerDay) *
        (this.options.prefilledDays ?? this.options.dedupWindowDays),
    );
  }

  /** Rows inside the dedup window now: what a windowed statement's estimate covers. */
  rowsInWindow(): number {
    const now = this.time.nowMs();
    const windowMs = this.options.dedupWindowDays * DAY_MS;
    const prefilledMs = (this.options.prefilledDays ?? this.options.dedupWindowDays) * DAY_MS;
    // Pre-filled rows were written evenly over the `prefilledMs` before the start: those written
    // after `now - windowMs` are still in the window.
    const prefilled = this.prefilledRows * Math.max(0, Math.min(1, (windowMs - now) / prefilledMs));
    while (
      this.insertedHead < this.insertedAtMs.length &&
      this.insertedAtMs[this.insertedHead]! <= now - windowMs
    )
      this.insertedHead++;
    return prefilled + (this.insertedAtMs.length - this.insertedHead);
  }

  /** The pre-run estimate of one windowed statement. */
  estimateBytes(): number {
    return this.rowsInWindow() * COST_DEFAULTS.lookupBytesPerRow;
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
    const recordMany = (rows: readonly Row[]) => {
      this.lastMergeMs.set(instance, this.time.nowMs());
      return this.runMerge(rows);
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
  private bill(operation: string): void {
    const estimate = this.estimateBytes();
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
    this.bill('seen');
    this.stats.lookups++;
    await this.time.sleep(this.lookup());
    return new Set(keys.filter((k) => this.rowsPerKey.has(k)));
  }

  private async runMerge(rows: readonly Row[]): Promise<Set<string>> {
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
    this.bill('record');
    if (this.running >= BIGQUERY_DML_LIMITS.running)
      await new Promise<void>((resolve) => this.queue.push(resolve));
    else this.running++;
    try {
      this.stats.merges++;
      const present = new Set(rows.map((r) => r.dedup_key).filter((k) => this.rowsPerKey.has(k)));
      await this.time.sleep(this.merge());
      const inserted = new Set<string>();
      for (const row of rows) {
        if (present.has(row.dedup_key) || inserted.has(row.dedup_key)) continue;
        this.raw.push(row);
        this.rowsPerKey.set(row.dedup_key, (this.rowsPerKey.get(row.dedup_key) ?? 0) + 1);
        this.insertedAtMs.push(this.time.nowMs());
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
