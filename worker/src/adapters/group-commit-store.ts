import type { Row } from '../contract/row';
import { TransientError } from '../core/errors';
import type { BatchStore, Logger, Store } from '../core/ports';

/**
 * Group commit: a {@link Store} decorator that turns the `seen()` and `record()` calls of concurrent
 * deliveries into one `seenMany()` and one `recordMany()` of a {@link BatchStore}. `handle()` still
 * works on one delivery at a time and gets its own answer; only the store sees batches.
 *
 * Why: BigQuery allows 25 DML statements per 10 s per table (2 running, 20 queued), so one MERGE per
 * delivery caps a deployment at 2.5 documents/s. One MERGE per batch lifts that cap by the batch
 * size, and each statement's 10 MiB minimum bill is shared by the batch.
 *
 * - Lookups: at most one in flight, paced like the writes (a lookup bills 10 MiB too); the calls
 *   that arrive meanwhile form the next lookup.
 * - Writes: at most one MERGE in flight, at least `minIntervalMs` between two (the instance's share
 *   of the table's DML budget). A batch closes at `maxRows` rows, or `maxWaitMs` after its first row.
 * - Duplicates inside a batch: the first row of a key goes to the store, the later ones answer
 *   "not inserted" (the delivery reports `duplicate`).
 * - A failed batch fails each of its deliveries with the store's error (a transient one: 503, and
 *   Pub/Sub retries; the analyses wait in the memo). When the store refuses a batch outright (not a
 *   transient error), halving finds the row it refuses: that delivery fails alone, the others go
 *   in; when both halves are refused the fault is not one row and every delivery gets the error.
 */

export interface GroupCommitOptions {
  /** A batch closes at this many rows. */
  maxRows: number;
  /** … or this long after its first row arrived. */
  maxWaitMs: number;
  /** The least time between the starts of two writes. */
  minIntervalMs: number;
  logger?: Logger;
}

interface Waiter<Item, Answer> {
  item: Item;
  resolve(answer: Answer): void;
  reject(error: unknown): void;
}

/**
 * Collects items and runs them through `commit` in batches, one batch at a time. Exported for the
 * batcher's own tests.
 */
export class Batcher<Item, Answer> {
  private queue: Array<Waiter<Item, Answer>> = [];
  private busy = false;
  private timer: NodeJS.Timeout | undefined;
  private firstArrivalMs = 0;
  private lastStartMs = Number.NEGATIVE_INFINITY;
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly commit: (items: Item[]) => Promise<Array<PromiseSettledResult<Answer>>>,
    private readonly options: { maxItems: number; maxWaitMs: number; minIntervalMs: number },
    private readonly nowMs: () => number = () => performance.now(),
  ) {}

  add(item: Item): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      if (this.queue.length === 0) this.firstArrivalMs = this.nowMs();
      this.queue.push({ item, resolve, reject });
      this.schedule();
    });
  }

  /** Resolves when nothing is queued or in flight (for shutdown). */
  idle(): Promise<void> {
    if (!this.busy && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Time until the earliest moment the next batch may start. */
  private delayMs(): number {
    const now = this.nowMs();
    const full = this.queue.length >= this.options.maxItems;
    const closesAt = full ? now : this.firstArrivalMs + this.options.maxWaitMs;
    const allowedAt = this.lastStartMs + this.options.minIntervalMs;
    return Math.max(0, closesAt - now, allowedAt - now);
  }

  private schedule(): void {
    if (this.busy || this.queue.length === 0) return;
    const delay = this.delayMs();
    if (delay <= 0) {
      this.clearTimer();
      void this.flush();
      return;
    }
    // A full batch may start earlier than the timer set for a partial one: re-arm it.
    this.clearTimer();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.schedule();
    }, delay);
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async flush(): Promise<void> {
    this.busy = true;
    this.lastStartMs = this.nowMs();
    const batch = this.queue.splice(0, this.options.maxItems);
    if (this.queue.length > 0) this.firstArrivalMs = this.nowMs();
    try {
      const answers = await this.commit(batch.map((w) => w.item));
      batch.forEach((w, i) => {
        const answer = answers[i]!;
        if (answer.status === 'fulfilled') w.resolve(answer.value);
        else w.reject(answer.reason);
      });
    } catch (error) {
      for (const w of batch) w.reject(error);
    } finally {
      this.busy = false;
      if (this.queue.length > 0) this.schedule();
      else for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }
}

/** The `Store` that `handle()` sees, batching into a {@link BatchStore}. */
export class GroupCommitStore implements Store {
  private readonly lookups: Batcher<string, boolean>;
  private readonly writes: Batcher<Row, boolean>;
  /** MERGE statements sent (batches and split halves), for logs and the benchmark. */
  statements = 0;

  constructor(
    private readonly inner: BatchStore,
    private readonly options: GroupCommitOptions,
    nowMs?: () => number,
  ) {
    this.lookups = new Batcher(
      async (keys) => {
        const found = await inner.seenMany([...new Set(keys)]);
        return keys.map((k) => ({ status: 'fulfilled', value: found.has(k) }) as const);
      },
      // A lookup is not DML, but it bills BigQuery's 10 MiB minimum like any statement: it gathers
      // for as long as a write does, so a burst pays for a few large lookups, not one per delivery.
      { maxItems: options.maxRows, maxWaitMs: options.maxWaitMs, minIntervalMs: options.minIntervalMs },
      nowMs,
    );
    this.writes = new Batcher(
      (rows) => this.commit(rows),
      {
        maxItems: options.maxRows,
        maxWaitMs: options.maxWaitMs,
        minIntervalMs: options.minIntervalMs,
      },
      nowMs,
    );
  }

  seen(dedupKey: string): Promise<boolean> {
    return this.lookups.add(dedupKey);
  }

  record(row: Row): Promise<boolean> {
    return this.writes.add(row);
  }

  ping(): Promise<void> {
    return this.inner.ping();
  }

  /** Lets queued writes finish, then closes the inner store. */
  async close(): Promise<void> {
    await Promise.all([this.lookups.idle(), this.writes.idle()]);
    await this.inner.close?.();
  }

  /** One batch: in-batch duplicates answered first, the rest in one write (split on refusal). */
  private async commit(rows: Row[]): Promise<Array<PromiseSettledResult<boolean>>> {
    const firstOfKey = new Map<string, number>();
    rows.forEach((row, i) => {
      if (!firstOfKey.has(row.dedup_key)) firstOfKey.set(row.dedup_key, i);
    });
    const unique = [...firstOfKey.values()].map((i) => rows[i]!);
    const { inserted, failed } = await this.write(unique);
    this.options.logger?.debug('group commit', {
      rows: rows.length,
      distinctKeys: unique.length,
      inserted: inserted.size,
      failed: failed.size,
    });
    return rows.map((row, i) => {
      const first = firstOfKey.get(row.dedup_key) === i;
      if (first && failed.has(row.dedup_key))
        return { status: 'rejected', reason: failed.get(row.dedup_key) };
      return { status: 'fulfilled', value: first && inserted.has(row.dedup_key) };
    });
  }

  /**
   * Writes rows in one statement. A transient failure fails them all at once (Pub/Sub retries).
   * A refusal of several rows goes to {@link isolate}.
   */
  private async write(rows: Row[]): Promise<{ inserted: Set<string>; failed: Map<string, unknown> }> {
    try {
      return { inserted: await this.attempt(rows), failed: new Map() };
    } catch (error) {
      if (rows.length < 2 || error instanceof TransientError) throw error;
      this.options.logger?.warn('the store refused a batch: looking for the row it refuses', {
        rows: rows.length,
        error: error instanceof Error ? error.message : String(error),
      });
      const failed = new Map<string, unknown>();
      const inserted = await this.isolate(rows, error, failed);
      return { inserted, failed };
    }
  }

  /**
   * Finds the row a store refuses by halving: each half is tried once; when both are refused the
   * fault is not one row and every row gets the error; otherwise only the refused half is halved
   * again. So one bad row costs about 2·log2(batch) statements, and holds each good row back once.
   */
  private async isolate(rows: Row[], error: unknown, failed: Map<string, unknown>): Promise<Set<string>> {
    const middle = Math.ceil(rows.length / 2);
    const halves = [rows.slice(0, middle), rows.slice(middle)];
    const inserted = new Set<string>();
    const refused: Array<{ half: Row[]; error: unknown }> = [];
    for (const half of halves) {
      await pause(this.options.minIntervalMs);
      try {
        for (const key of await this.attempt(half)) inserted.add(key);
      } catch (halfError) {
        if (halfError instanceof TransientError) throw halfError;
        refused.push({ half, error: halfError });
      }
    }
    if (refused.length === halves.length) throw error;
    for (const { half, error: halfError } of refused) {
      if (half.length === 1) failed.set(half[0]!.dedup_key, halfError);
      else for (const key of await this.isolate(half, halfError, failed)) inserted.add(key);
    }
    return inserted;
  }

  private attempt(rows: Row[]): Promise<Set<string>> {
    this.statements += 1;
    return this.inner.recordMany(rows);
  }
}

function pause(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}
