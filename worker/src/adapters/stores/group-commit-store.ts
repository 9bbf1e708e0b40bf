import type { Row } from '../../contract/row';
import { MIN_STATEMENT_MS, mergeIntervalForLatencyMs } from '../../contract/settings';
import { Deadline, DeadlineError, notStarted } from '../../core/deadline';
import { ConfigurationError, OutcomeUnknownError, RowRefusalError, TransientError } from '../../core/errors';
import { writeMayStillCommit } from '../../core/handle';
import type { BatchStore, Logger, Store } from '../../core/ports';
import { probe } from '../../core/probes';

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
 *   of the table's DML budget), stretched when MERGEs take long so that the deployment's MERGEs fit
 *   the table's 2 running DML slots instead of queueing in BigQuery behind each other
 *   (`mergeIntervalForLatencyMs`, on the average latency of this instance's MERGEs). A batch closes
 *   at `maxRows` rows, at `maxBytes` bytes of rows (BigQuery refuses a request over 10 MB whole),
 *   or `maxWaitMs` after its first row. A key whose row the store refused is written alone next
 *   time, so that it fails alone.
 * - Duplicates inside a batch: the first row of a key goes to the store and the later ones share
 *   its fate: "not inserted" (the delivery reports `duplicate`) when it went in or was there
 *   already, its error when it failed. A duplicate is never acknowledged for a row that is not there.
 * - A failed batch fails each of its deliveries with the store's error (a transient one: 503, and
 *   Pub/Sub retries; the analyses wait in the memo). A statement refused for itself (its byte
 *   estimate, its access, a missing table: a configuration fault) fails the whole batch at once,
 *   in that one statement, with an ERROR line. Only when the store says a row's content was refused
 *   ({@link RowRefusalError}) does halving find the rows it refuses, recursively in every refused
 *   half: those deliveries fail, every other row goes in. The search is bounded in statements
 *   (`maxIsolationStatements`), paced like any write, and bounded by the deliveries' deadlines.
 * - Deadlines: every call carries its delivery's deadline. A delivery with less than
 *   `minStatementMs` left is not put in a statement (it is answered 503 at once); a statement runs
 *   with the earliest deadline of its rows, and is given up at that deadline (its deliveries get a
 *   {@link DeadlineError}, 503) so that one hung statement never holds the batcher: the next batch
 *   starts. A statement given up may still land in BigQuery later; its retry then answers
 *   `duplicate`, which is what idempotence asks.
 * - Scale-in: {@link GroupCommitStore.drain} sends what waits at once (still paced).
 */

/**
 * How often group commit asks the store how many instances write (a free metadata call), in paces:
 * every 2 × `minIntervalMs` (10 s with the defaults).
 */
export const WRITERS_REFRESH_PACES = 2;
/**
 * The bytes of rows one statement carries at most: BigQuery's request limit is 10 MB, parameters
 * included; this leaves room for the statement, the types and the estimate's error.
 */
export const BATCH_MAX_BYTES = 6 * 1024 * 1024;

/**
 * What one row weighs in a statement's request, estimated from its JSON: each value travels as a
 * typed parameter (`{"value": "…"}` under its column's name), and the analysis as JSON text inside
 * a string, its quotes escaped, hence twice its JSON and a fixed cost per column.
 */
export function rowBytes(row: Row): number {
  return 2 * Buffer.byteLength(JSON.stringify(row)) + PARAMETER_BYTES_PER_COLUMN * Object.keys(row).length;
}
const PARAMETER_BYTES_PER_COLUMN = 48;

/** Keys whose row the store refused that a group commit remembers, to write them alone next time. */
const MAX_REFUSED_KEYS = 1_000;

/** The longest a count of the writers may take (a metadata call). */
const WRITERS_COUNT_TIMEOUT_MS = 10_000;

export interface GroupCommitOptions {
  /** A batch closes at this many rows. */
  maxRows: number;
  /**
   * … or at this many bytes of rows, as the statement sends them (estimated, {@link rowBytes}):
   * BigQuery refuses a request over 10 MB whole, so a burst of large invoices must not fill one
   * batch (default {@link BATCH_MAX_BYTES}). A row larger than this goes alone.
   */
  maxBytes?: number;
  /** … or this long after its first row arrived. */
  maxWaitMs: number;
  /** The least time between the starts of two writes. */
  minIntervalMs: number;
  /** A delivery with less time than this left is not put in a statement (default 2 s). */
  minStatementMs?: number;
  /** Statements one refused batch may spend finding the rows the store refuses (default 32). */
  maxIsolationStatements?: number;
  logger?: Logger;
}

/** What a batch's statements did: the keys whose row went in, and the error of each key that failed. */
type BatchOutcome = { inserted: Set<string>; failed: Map<string, unknown> };

/** An item of a batch with the deadline of the delivery that waits for it. */
interface Pending<T> {
  value: T;
  deadline: Deadline;
}

const NO_DEADLINE = Deadline.none();

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
  private queue: Array<Waiter<Item, Answer> & { bytes: number }> = [];
  private queuedBytes = 0;
  private busy = false;
  private timer: NodeJS.Timeout | undefined;
  private firstArrivalMs = 0;
  private lastStartMs = Number.NEGATIVE_INFINITY;
  private idleWaiters: Array<() => void> = [];
  private draining = false;
  private immediate: NodeJS.Immediate | undefined;

  constructor(
    private readonly commit: (items: Item[]) => Promise<Array<PromiseSettledResult<Answer>>>,
    private readonly options: {
      maxItems: number;
      maxWaitMs: number;
      minIntervalMs: number;
      /** The interval now, when it moves (default `minIntervalMs`). */
      intervalMs?: () => number;
      /** A batch also closes at this weight of its items (`sizeOf`); an item heavier goes alone. */
      maxBytes?: number;
      sizeOf?: (item: Item) => number;
    },
    private readonly nowMs: () => number = () => performance.now(),
  ) {}

  add(item: Item): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      if (this.queue.length === 0) this.firstArrivalMs = this.nowMs();
      const bytes = this.options.sizeOf?.(item) ?? 0;
      this.queue.push({ item, resolve, reject, bytes });
      this.queuedBytes += bytes;
      this.schedule();
    });
  }

  /** Whether what waits fills a batch: its rows, or its bytes. */
  private full(): boolean {
    return (
      this.draining ||
      this.queue.length >= this.options.maxItems ||
      this.queuedBytes >= (this.options.maxBytes ?? Number.POSITIVE_INFINITY)
    );
  }

  /** Scale-in: what waits is sent at once, without waiting for its batch to fill (still paced). */
  drain(): void {
    this.draining = true;
    this.schedule();
  }

  /** Resolves when nothing is queued or in flight (for shutdown). */
  idle(): Promise<void> {
    if (!this.busy && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** How many of the first items waiting make the next batch: at most maxItems, and maxBytes (one at least). */
  private batchLength(): number {
    const maxBytes = this.options.maxBytes ?? Number.POSITIVE_INFINITY;
    let bytes = 0;
    let n = 0;
    for (const w of this.queue) {
      if (n >= this.options.maxItems || (n > 0 && bytes + w.bytes > maxBytes)) break;
      bytes += w.bytes;
      n += 1;
    }
    return n;
  }

  /** Time until the earliest moment the next batch may start. */
  private delayMs(): number {
    const now = this.nowMs();
    const closesAt = this.full() ? now : this.firstArrivalMs + this.options.maxWaitMs;
    const allowedAt = this.lastStartMs + (this.options.intervalMs?.() ?? this.options.minIntervalMs);
    return Math.max(0, closesAt - now, allowedAt - now);
  }

  private schedule(): void {
    if (this.busy || this.queue.length === 0) return;
    const delay = this.delayMs();
    if (delay <= 0) {
      this.clearTimer();
      if (this.full() || this.options.maxWaitMs > 0) {
        void this.flush();
        return;
      }
      // With no wait to gather (SQLite's pace), a batch still takes every row that arrives in
      // this turn of the event loop: a synchronous store blocks the loop while it commits, so
      // nothing could join a batch "in flight", and one commit per row would pay one fsync each.
      if (!this.immediate)
        this.immediate = setImmediate(() => {
          this.immediate = undefined;
          if (!this.busy && this.queue.length > 0) void this.flush();
        });
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
    const batch = this.queue.splice(0, this.batchLength());
    for (const w of batch) this.queuedBytes -= w.bytes;
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
  private readonly lookups: Batcher<Pending<string>, boolean>;
  private readonly writes: Batcher<Pending<Row>, boolean>;
  private readonly minStatementMs: number;
  private readonly maxIsolationStatements: number;
  /** MERGE statements sent (batches and split halves), for logs and the benchmark. */
  statements = 0;
  /** The average latency of this instance's MERGEs that answered (EWMA, 1/8); 0 until one has. */
  private mergeMs = 0;
  /** The instances writing, as the store last counted them (1 until it has). */
  private writers = 1;
  private writersAtMs = Number.NEGATIVE_INFINITY;
  private countingWriters = false;
  private readonly nowMs: () => number;
  /**
   * Keys whose row the store refused (found alone by the search, or refused alone): the next time
   * such a row comes it is written in a statement of its own, so that it fails alone instead of
   * failing a whole batch and spending the search's statements again. Bounded: oldest forgotten.
   */
  private readonly refusedKeys = new Set<string>();
  /**
   * Keys whose statement may still commit (its answer was lost, or its delivery's deadline cut the
   * wait), each until that statement's bound (the earliest deadline of its rows, its `jobTimeoutMs`).
   * Another row of such a key (a second delivery of it on this instance, sharing the key's write
   * turn) is not sent before that bound: two MERGEs of a new key that overlap both insert. It is
   * answered as unknown too, so its delivery keeps the key's lease to the bound and is retried.
   */
  private readonly mayStillCommit = new Map<string, Deadline>();

  constructor(
    private readonly inner: BatchStore,
    private readonly options: GroupCommitOptions,
    nowMs: () => number = () => performance.now(),
  ) {
    this.nowMs = nowMs;
    this.minStatementMs = options.minStatementMs ?? MIN_STATEMENT_MS;
    this.maxIsolationStatements = options.maxIsolationStatements ?? 32;
    const batching = {
      maxItems: options.maxRows,
      maxWaitMs: options.maxWaitMs,
      minIntervalMs: options.minIntervalMs,
    };
    // A lookup is not DML, but it bills BigQuery's 10 MiB minimum like any statement: it gathers
    // for as long as a write does, so a burst pays for a few large lookups, not one per delivery.
    this.lookups = new Batcher((keys) => this.lookup(keys), batching, nowMs);
    this.writes = new Batcher(
      (rows) => this.commit(rows),
      {
        ...batching,
        intervalMs: () => this.writeIntervalMs,
        maxBytes: options.maxBytes ?? BATCH_MAX_BYTES,
        sizeOf: (item) => rowBytes(item.value),
      },
      nowMs,
    );
  }

  /** The least time between the starts of two writes now: the pace, stretched by slow MERGEs and by the writers. */
  get writeIntervalMs(): number {
    return mergeIntervalForLatencyMs(this.options.minIntervalMs, this.mergeMs, this.writers);
  }

  /**
   * Asks the store how many instances write (`BatchStore.writers`), at most once per
   * {@link WRITERS_REFRESH_PACES} paces and never in a write's way: the pace uses the last answer. A
   * failed count falls back to 1 (the pace of one writer), so a store that cannot tell costs bytes,
   * never time.
   */
  private refreshWriters(): void {
    const count = this.inner.writers?.bind(this.inner);
    const now = this.nowMs();
    const everyMs = WRITERS_REFRESH_PACES * this.options.minIntervalMs;
    if (!count || !(everyMs > 0) || this.countingWriters || now - this.writersAtMs < everyMs) return;
    this.countingWriters = true;
    this.writersAtMs = now;
    count(Deadline.after(WRITERS_COUNT_TIMEOUT_MS))
      .then(
        (n) => {
          this.writers = Number.isFinite(n) && n >= 1 ? Math.floor(n) : 1;
        },
        (error: unknown) => {
          this.writers = 1;
          this.options.logger?.debug('could not count the writers: pacing as one', {
            error: error instanceof Error ? error.message : String(error),
          });
        },
      )
      .finally(() => {
        this.countingWriters = false;
      });
  }

  seen(dedupKey: string, deadline: Deadline = NO_DEADLINE): Promise<boolean> {
    return this.lookups.add({ value: dedupKey, deadline });
  }

  record(row: Row, deadline: Deadline = NO_DEADLINE): Promise<boolean> {
    return this.writes.add({ value: row, deadline });
  }

  ping(): Promise<void> {
    return this.inner.ping();
  }

  /** Scale-in: sends the lookups and rows that wait now, without waiting for their batches to fill. */
  drain(): void {
    this.lookups.drain();
    this.writes.drain();
  }

  /** Lets queued writes finish, then closes the inner store. */
  async close(): Promise<void> {
    this.drain();
    await Promise.all([this.lookups.idle(), this.writes.idle()]);
    await this.inner.close?.();
  }

  /** One lookup for the keys whose deliveries can still wait for it. */
  private async lookup(items: Array<Pending<string>>): Promise<Array<PromiseSettledResult<boolean>>> {
    const { ready, late } = this.splitByTime(items, 'lookup');
    if (ready.length === 0) return late as Array<PromiseSettledResult<boolean>>;
    let found: Set<string>;
    try {
      const deadline = earliest(ready);
      found = await deadline.race(
        'BigQuery lookup',
        this.inner.seenMany([...new Set(ready.map((i) => i.value))], deadline),
      );
    } catch (error) {
      return items.map((_, i) => late[i] ?? { status: 'rejected', reason: error });
    }
    return items.map((item, i) => late[i] ?? { status: 'fulfilled', value: found.has(item.value) });
  }

  /**
   * One batch: the first row of each key goes to the store (split on refusal); a later row of the
   * same key shares the fate of that first row.
   */
  private async commit(items: Array<Pending<Row>>): Promise<Array<PromiseSettledResult<boolean>>> {
    const timed = this.splitByTime(items, 'write');
    const { late } = timed;
    const ready = this.afterEarlierStatements(timed.ready, late, items);
    const firstOfKey = new Map<string, Pending<Row>>();
    for (const item of ready)
      if (!firstOfKey.has(item.value.dedup_key)) firstOfKey.set(item.value.dedup_key, item);
    const unique = [...firstOfKey.values()];
    // A key the store refused before goes alone, after the others: it fails alone.
    const alone = unique.filter((item) => this.refusedKeys.has(item.value.dedup_key));
    const together = unique.filter((item) => !this.refusedKeys.has(item.value.dedup_key));
    let outcome: BatchOutcome;
    try {
      outcome = together.length > 0 ? await this.write(together) : { inserted: new Set(), failed: new Map() };
    } catch (error) {
      if (writeMayStillCommit(error)) this.noteMayStillCommit(together, earliest(together));
      // One row refused alone is proven refused: it goes alone next time.
      if (together.length === 1 && error instanceof RowRefusalError)
        this.rememberRefused(together[0]!.value.dedup_key);
      const wrote = new Set(alone.map((item) => item.value.dedup_key));
      const aloneOutcome = await this.writeAlone(alone);
      return items.map((item, i) => {
        if (late[i]) return late[i];
        const key = item.value.dedup_key;
        if (!wrote.has(key)) return { status: 'rejected', reason: error };
        return answerOf(item, firstOfKey, aloneOutcome);
      });
    }
    const aloneOutcome = await this.writeAlone(alone);
    for (const key of aloneOutcome.inserted) outcome.inserted.add(key);
    for (const [key, error] of aloneOutcome.failed) outcome.failed.set(key, error);
    for (const [key, error] of outcome.failed) {
      if (error instanceof RowRefusalError) this.rememberRefused(key);
      const item = firstOfKey.get(key);
      if (item && writeMayStillCommit(error)) this.noteMayStillCommit([item], item.deadline);
    }
    const { inserted, failed } = outcome;
    this.options.logger?.debug('group commit', {
      rows: items.length,
      distinctKeys: unique.length,
      inserted: inserted.size,
      failed: failed.size,
      late: items.length - ready.length,
    });
    return items.map((item, i) => late[i] ?? answerOf(item, firstOfKey, { inserted, failed }));
  }

  /**
   * The ready rows whose key has no earlier statement that may still commit; each other one is
   * answered now (in `late`, by its place in `items`) as an outcome unknown, not sent.
   */
  private afterEarlierStatements(
    ready: Array<Pending<Row>>,
    late: Array<PromiseSettledResult<boolean> | undefined>,
    items: Array<Pending<Row>>,
  ): Array<Pending<Row>> {
    for (const [key, bound] of this.mayStillCommit)
      if (bound.remainingMs() <= 0) this.mayStillCommit.delete(key);
    if (this.mayStillCommit.size === 0) return ready;
    return ready.filter((item) => {
      const bound = this.mayStillCommit.get(item.value.dedup_key);
      if (!bound) return true;
      late[items.indexOf(item)] = {
        status: 'rejected',
        reason: new OutcomeUnknownError(
          'bigquery_outcome_unknown',
          `an earlier statement of ${item.value.dedup_key} may still commit for ${Math.ceil(bound.remainingMs())} ms: not sent before then`,
        ),
      };
      return false;
    });
  }

  private noteMayStillCommit(items: Array<Pending<Row>>, bound: Deadline): void {
    for (const item of items) this.mayStillCommit.set(item.value.dedup_key, bound);
  }

  /** Rows of keys refused before, each in a statement of its own (paced like any write). */
  private async writeAlone(rows: Array<Pending<Row>>): Promise<BatchOutcome> {
    const inserted = new Set<string>();
    const failed = new Map<string, unknown>();
    for (const row of rows) {
      const key = row.value.dedup_key;
      if (row.deadline.remainingMs() < this.minStatementMs) {
        failed.set(key, notStarted('write', row.deadline.remainingMs()));
        continue;
      }
      try {
        if ((await this.attempt([row])).has(key)) inserted.add(key);
        this.refusedKeys.delete(key);
      } catch (error) {
        failed.set(key, error);
      }
    }
    return { inserted, failed };
  }

  private rememberRefused(key: string): void {
    this.refusedKeys.delete(key);
    this.refusedKeys.add(key);
    while (this.refusedKeys.size > MAX_REFUSED_KEYS)
      this.refusedKeys.delete(this.refusedKeys.values().next().value!);
  }

  /** Deliveries that can still wait for a statement, and the answers of those that cannot. */
  private splitByTime<T>(
    items: Array<Pending<T>>,
    what: string,
  ): { ready: Array<Pending<T>>; late: Array<PromiseSettledResult<boolean> | undefined> } {
    const ready: Array<Pending<T>> = [];
    const late = items.map((item) => {
      if (item.deadline.remainingMs() >= this.minStatementMs) {
        ready.push(item);
        return undefined;
      }
      return { status: 'rejected', reason: notStarted(what, item.deadline.remainingMs()) } as const;
    });
    return { ready, late };
  }

  /**
   * Writes rows in one statement. A transient failure fails them all at once (Pub/Sub retries).
   * A refusal of several rows goes to {@link isolate}.
   */
  private async write(rows: Array<Pending<Row>>): Promise<BatchOutcome> {
    try {
      return { inserted: await this.attempt(rows), failed: new Map() };
    } catch (error) {
      if (!(error instanceof RowRefusalError)) {
        // A statement refused for itself (its byte estimate, access, a missing table, its SQL) would
        // be refused again whatever rows it carried: searching the batch for a "bad row" would only
        // spend up to maxIsolationStatements of the table's DML budget and end in dead letters.
        if (error instanceof ConfigurationError)
          this.options.logger?.error(
            'the store refused the statement itself: every delivery of the batch fails, an operator must fix it',
            {
              code: error.code,
              rows: rows.length,
              error: error.message,
            },
          );
        throw error;
      }
      if (rows.length < 2) throw error;
      this.options.logger?.warn('the store refused a batch: looking for the rows it refuses', {
        rows: rows.length,
        error: error instanceof Error ? error.message : String(error),
      });
      const failed = new Map<string, unknown>();
      const inserted = await this.isolate(rows, error, failed, { left: this.maxIsolationStatements });
      return { inserted, failed };
    }
  }

  /**
   * Finds the rows a store refuses by halving: each half of a refused group is tried on its own,
   * and every half that is refused again is halved in turn, down to single rows. So k bad rows cost
   * about 2·k·log2(batch) statements and every good row goes in. Each statement waits the DML pace
   * first, is not started for deliveries whose deadline it could outlive, and the search stops at
   * `budget` statements: the rows still undecided then fail transiently (503, Pub/Sub retries them
   * in another batch).
   */
  private async isolate(
    rows: Array<Pending<Row>>,
    error: unknown,
    failed: Map<string, unknown>,
    budget: { left: number },
  ): Promise<Set<string>> {
    probe('batch.rowRefused');
    const middle = Math.ceil(rows.length / 2);
    const inserted = new Set<string>();
    const refused: Array<{ half: Array<Pending<Row>>; error: unknown }> = [];
    for (const half of [rows.slice(0, middle), rows.slice(middle)]) {
      const tried = await this.tryHalf(half, error, failed, budget);
      if ('refused' in tried) refused.push({ half: tried.rows, error: tried.refused });
      else for (const key of tried.inserted) inserted.add(key);
    }
    // Every refused half holds at least one refused row: search each of them, down to single rows.
    for (const { half, error: halfError } of refused) {
      if (half.length === 1) failed.set(half[0]!.value.dedup_key, halfError);
      else for (const key of await this.isolate(half, halfError, failed, budget)) inserted.add(key);
    }
    return inserted;
  }

  /** One statement for a half: its inserted keys, or its refusal; rows it cannot try are failed. */
  private async tryHalf(
    half: Array<Pending<Row>>,
    error: unknown,
    failed: Map<string, unknown>,
    budget: { left: number },
  ): Promise<{ inserted: Set<string> } | { refused: unknown; rows: Array<Pending<Row>> }> {
    const none = { inserted: new Set<string>() };
    if (budget.left <= 0) {
      const unfinished = new TransientError(
        'store_isolation_unfinished',
        `the store refused a batch and ${this.maxIsolationStatements} statements did not find every row it refuses: ` +
          'this row may be good, Pub/Sub retries it in another batch',
        { cause: error },
      );
      for (const row of half) failed.set(row.value.dedup_key, unfinished);
      return none;
    }
    await pause(this.options.minIntervalMs);
    const ready: Array<Pending<Row>> = [];
    for (const row of half) {
      if (row.deadline.remainingMs() >= this.minStatementMs) ready.push(row);
      else failed.set(row.value.dedup_key, notStarted('isolating a refused row', row.deadline.remainingMs()));
    }
    if (ready.length === 0) return none;
    budget.left -= 1;
    try {
      return { inserted: await this.attempt(ready) };
    } catch (halfError) {
      if (!(halfError instanceof RowRefusalError)) {
        for (const row of ready) failed.set(row.value.dedup_key, halfError);
        return none;
      }
      return { refused: halfError, rows: ready };
    }
  }

  /**
   * One MERGE, bounded by the earliest deadline of its rows: a statement that hangs fails its rows
   * transiently at that deadline ({@link DeadlineError}, 503) and frees the batcher for the next
   * batch, instead of holding every later delivery of the instance behind it. BigQuery does not
   * cancel the statement: if it lands later, the retry finds the row and answers `duplicate`.
   */
  private async attempt(rows: Array<Pending<Row>>): Promise<Set<string>> {
    this.statements += 1;
    const deadline = earliest(rows);
    const startedMs = this.nowMs();
    const inserted = await deadline.race(
      'BigQuery write',
      this.inner.recordMany(
        rows.map((r) => r.value),
        deadline,
      ),
    );
    // Only MERGEs that answered: a hung one given up at its deadline says nothing about the pace.
    const tookMs = this.nowMs() - startedMs;
    this.mergeMs = this.mergeMs === 0 ? tookMs : this.mergeMs + (tookMs - this.mergeMs) / 8;
    this.refreshWriters();
    return inserted;
  }
}

/**
 * A delivery's answer from its batch's outcome: its key's failure (whichever delivery of the key it
 * was), else whether its own row went in (a later row of the key answers "not inserted").
 */
function answerOf(
  item: Pending<Row>,
  firstOfKey: Map<string, Pending<Row>>,
  outcome: BatchOutcome,
): PromiseSettledResult<boolean> {
  const key = item.value.dedup_key;
  if (outcome.failed.has(key)) return { status: 'rejected', reason: outcome.failed.get(key) };
  return { status: 'fulfilled', value: firstOfKey.get(key) === item && outcome.inserted.has(key) };
}

/** The deadline a statement for these deliveries must end by: the earliest of theirs. */
function earliest<T>(items: Array<Pending<T>>): Deadline {
  return items.reduce((a, b) => (b.deadline.atMs < a.deadline.atMs ? b : a)).deadline;
}

function pause(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}
