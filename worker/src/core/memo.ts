import type { AnalysisProgress, AnalysisResult } from '../contract/analysis';
import { ANSWER_MARGIN_MS, MEMO_CALL_TIMEOUT_MS } from '../contract/settings';
import { Deadline, DeadlineError } from './deadline';
import { RejectionError } from './errors';
import { hashOf, type KeyLeaseOptions, KeyLeases } from './key-lease';
import { MemoCalls } from './memo-call';
import {
  type Clock,
  type Logger,
  type MemoEntry,
  type MemoOutcome,
  type MemoProgress,
  type MemoStore,
  realTimers,
  systemClock,
  type Timers,
} from './ports';

/**
 * The memo is three things, each with one job, over one bucket (core/handle.ts uses them in the
 * order a delivery needs them):
 * - an **analysis cache** ({@link AnalysisCache}): after an analysis and before the write, its paid
 *   outcome is kept under the dedup key, so that a delivery retried after a failed write (a busy
 *   store, a full DML queue, an outage) does not pay for the same analysis again, whichever
 *   analyzer version it runs;
 * - a **key lease** (core/key-lease.ts): a concurrent delivery of a key waits for the holder's
 *   analysis and write, across instances, at most until the lease expires on its own;
 * - a **single flight** ({@link SingleFlight}): within one instance, concurrent deliveries of one
 *   key share one analysis.
 *
 * It is a cache, never a claim: a miss, an unreadable entry or a memo that is down means the
 * delivery does the work itself; nothing is written before the analysis is paid, so a crash still
 * leaves only the message, and no wait can block a document. Every memo call is bounded by a short
 * timeout and by the delivery's deadline.
 */

export interface AnalysisMemoOptions extends Partial<KeyLeaseOptions> {
  /** Entries older than this are ignored (and pruned by the store): the redelivery window. */
  ttlMs: number;
  /** The longest one memo call (read, keep, lease) may take; past it the memo is passed by. */
  callTimeoutMs?: number;
  logger?: Logger;
}

/** The defaults of the lease and of memo calls. */
export const MEMO_LEASE_DEFAULTS = Object.freeze({
  leaseMs: 15_000,
  pollMs: 1_000,
  callTimeoutMs: MEMO_CALL_TIMEOUT_MS,
});

/** Where a delivery's analysis came from. */
export type AnalysisSource = 'analyzer' | 'memo' | 'shared';

/** What the memo holds for a key: a paid result, or the paid refusal it ended in. */
export type Kept = { result: AnalysisResult } | { refused: RejectionError };

/** A delivery's analysis, and where it came from. */
export type Analysed = { result: AnalysisResult; source: AnalysisSource };

/**
 * What one read of the memo found for a key, before any other work ({@link AnalysisMemo.peek}):
 * `none`, no analysis of it kept and no delivery of it (of any analyzer version) ever took its
 * lease, so none has paid or written; `kept`, an analysis is kept (by whichever version paid);
 * `worked`, none is kept but a delivery took the key's lease (it may have written its row: one
 * whose keep failed, or whose row needed no paid analysis); `unknown`, the memo could not be read.
 */
export interface MemoPeek {
  readonly state: 'none' | 'kept' | 'worked' | 'unknown';
  readonly kept?: Kept;
}

/** The memo's three parts, over one store. */
export class AnalysisMemo {
  readonly cache: AnalysisCache;
  readonly leases: KeyLeases;
  readonly flights = new SingleFlight<Analysed | 'written'>();

  constructor(store: MemoStore, options: AnalysisMemoOptions) {
    const calls = new MemoCalls(options.callTimeoutMs ?? MEMO_LEASE_DEFAULTS.callTimeoutMs, options.logger);
    const timers = options.timers ?? realTimers;
    const clock = options.clock ?? systemClock;
    this.cache = new AnalysisCache(store, { ttlMs: options.ttlMs, clock, timers }, calls);
    this.leases = new KeyLeases(
      store,
      {
        ...options,
        leaseMs: options.leaseMs ?? MEMO_LEASE_DEFAULTS.leaseMs,
        pollMs: options.pollMs ?? MEMO_LEASE_DEFAULTS.pollMs,
      },
      calls,
    );
  }

  /** The storage key of a key's paid analysis ({@link AnalysisCache.key}). */
  static key(dedupKey: string): string {
    return AnalysisCache.key(dedupKey);
  }

  /** The storage key of a key's lease ({@link KeyLeases.key}). */
  static leaseKey(dedupKey: string): string {
    return KeyLeases.key(dedupKey);
  }

  /** The storage key of the attempts paid before a failure ({@link AnalysisCache.progressKey}). */
  static progressKey(dedupKey: string): string {
    return AnalysisCache.progressKey(dedupKey);
  }

  /**
   * How many keys each per-key memory holds now (the memory benchmark and the tests read it): both
   * empty again once the analyses and writes under them are over.
   */
  footprint(): { inFlight: number; writing: number } {
    return { inFlight: this.flights.size, writing: this.leases.turns };
  }

  /**
   * One read of the memo for `dedupKey`, before the delivery does anything else. A memo that holds
   * no analysis of the key, and no lease of it ever taken, tells the delivery that no delivery of it
   * has paid or written yet: the store's lookup (on BigQuery a billed statement of a second or so)
   * can be skipped, since the write is conditional and refuses a second row anyway. The price of a
   * memo that lost an entry whose row was written is one more paid analysis, never a second row.
   * Errors never propagate (`unknown`).
   */
  async peek(dedupKey: string, deadline: Deadline = Deadline.none()): Promise<MemoPeek> {
    const reads = { failed: false };
    // Read together with the entry, so that a miss costs no extra wait.
    const [kept, leased] = await Promise.all([
      this.cache.get(dedupKey, deadline, reads),
      this.leases.everTaken(dedupKey, deadline),
    ]);
    if (kept) return { state: 'kept', kept };
    if (reads.failed || leased === 'unknown') return { state: 'unknown' };
    return { state: leased ? 'worked' : 'none' };
  }
}

/**
 * The analysis cache: the paid outcome of a key (a result, or the permanent refusal a paid
 * analysis ended in: `analysis_failed` after two paid calls, `safety_blocked`, with its tokens),
 * and beside it the attempts a failed analysis paid for, so that a retry goes on after them. One
 * entry per document whichever analyzer version paid: during a rollout an analysis the old
 * revision paid for and could not write is the one the new revision writes (its row names the
 * model that made it). Re-analysing documents with a new version is a backfill of its own, never a
 * side effect of a retry. Entries are create-only; reads and keeps that fail are misses.
 */
export class AnalysisCache {
  constructor(
    private readonly store: MemoStore,
    private readonly options: { ttlMs: number; clock: Clock; timers: Timers },
    private readonly calls: MemoCalls,
  ) {}

  /** The storage key of a key's paid analysis: a hash of the dedup key (safe in any object name). */
  static key(dedupKey: string): string {
    return `${ANALYSIS_NAMESPACE}/${hashOf(dedupKey)}`;
  }

  /**
   * Where the paid attempts of an analysis that did not end are kept: beside the analysis, not
   * under its key, which must stay free for the outcome (entries are create-only).
   */
  static progressKey(dedupKey: string): string {
    return `${PROGRESS_NAMESPACE}/${hashOf(dedupKey)}`;
  }

  /** What the memo holds for `dedupKey`; a read that fails is a miss, and is noted in `reads`. */
  async get(dedupKey: string, deadline: Deadline, reads?: { failed: boolean }): Promise<Kept | undefined> {
    try {
      const entry = await this.fresh(AnalysisCache.key(dedupKey), deadline);
      if (!entry || 'progress' in entry) return undefined;
      if ('rejection' in entry) {
        const { reason, detail } = entry.rejection;
        return { refused: new RejectionError(reason, detail, { usage: entry.usage }) };
      }
      // The readings make the row's confidence and review; an entry kept without them still reads.
      const readings = entry.readings ? { readings: entry.readings } : {};
      return { result: { analysis: entry.analysis, model: entry.model, usage: entry.usage, ...readings } };
    } catch (error) {
      if (reads) reads.failed = true;
      const warning = 'the memo of paid analyses could not be read: analysing again';
      this.calls.passBy(error, deadline, 'read', warning, dedupKey);
      return undefined;
    }
  }

  /** The attempts an earlier delivery paid for and did not end, if the memo kept them. */
  async progress(dedupKey: string, deadline: Deadline): Promise<AnalysisProgress | undefined> {
    try {
      const entry = await this.fresh(AnalysisCache.progressKey(dedupKey), deadline);
      return entry && 'progress' in entry ? entry.progress : undefined;
    } catch (error) {
      const warning = 'the memo could not tell the attempts already paid: analysing afresh';
      this.calls.passBy(error, deadline, 'read', warning, dedupKey);
      return undefined;
    }
  }

  /** Keeps a paid outcome (a result or a paid refusal); a keep that fails costs a retry one analysis. */
  keep(dedupKey: string, outcome: MemoOutcome, deadline: Deadline): Promise<void> {
    return this.create(AnalysisCache.key(dedupKey), dedupKey, outcome, deadline);
  }

  /** Keeps the attempts paid before a failure that is not about the document. */
  keepProgress(dedupKey: string, progress: MemoProgress, deadline: Deadline): Promise<void> {
    return this.create(AnalysisCache.progressKey(dedupKey), dedupKey, progress, deadline);
  }

  /**
   * Keeps a paid answer that came after its delivery was cut ({@link AnalysisCutError}), if it comes
   * before Cloud Run's own deadline (the worker's plus the answer margin): past it the instance may
   * be gone and the message is Pub/Sub's again. Nobody waits for it; a keep that fails costs the
   * retry one more analysis. Resolves once the call has ended (its answer kept, or its failure).
   */
  async keepLate(dedupKey: string, late: Promise<AnalysisResult>, deadline: Deadline): Promise<void> {
    const cloudRun = new Deadline(deadline.atMs + ANSWER_MARGIN_MS, this.options.clock, this.options.timers);
    const result = await late.catch(() => undefined);
    if (!result || cloudRun.remainingMs() <= 0) return;
    await this.keep(dedupKey, result, cloudRun).catch(() => {});
  }

  /** The entry under `key`, unless it is older than the redelivery window. */
  private async fresh(key: string, deadline: Deadline): Promise<MemoEntry | undefined> {
    const entry = await this.calls.call('read', this.store.get(key), deadline);
    if (!entry) return undefined;
    const ageMs = this.options.clock.now().getTime() - Date.parse(entry.createdAt);
    return ageMs <= this.options.ttlMs ? entry : undefined;
  }

  private async create(
    key: string,
    dedupKey: string,
    outcome: MemoOutcome | MemoProgress,
    deadline: Deadline,
  ): Promise<void> {
    try {
      const entry: MemoEntry = { ...outcome, createdAt: this.options.clock.now().toISOString() };
      await this.calls.call('keep', this.store.create(key, entry), deadline);
    } catch (error) {
      const warning = 'the memo of paid analyses could not keep an analysis: a retry would pay again';
      this.calls.passBy(error, deadline, 'keep', warning, dedupKey);
    }
  }
}

/**
 * Within one instance, concurrent deliveries of one key share one run: the first runs it, the
 * others wait for its answer within their own deadline. Its map holds a key only while its run is.
 */
export class SingleFlight<T> {
  private readonly running = new Map<string, Promise<T>>();

  get size(): number {
    return this.running.size;
  }

  /** `run()` for `key`, or the run of `key` already under way (`shared` true). */
  async once(key: string, run: () => Promise<T>, deadline: Deadline): Promise<{ value: T; shared: boolean }> {
    const running = this.running.get(key);
    if (running) {
      return { value: await deadline.race('sharing an analysis', running, { wait: true }), shared: true };
    }
    const promise = run();
    this.running.set(key, promise);
    try {
      return { value: await promise, shared: false };
    } finally {
      this.running.delete(key);
    }
  }
}

/**
 * The paid analysis was cut at the delivery's deadline (SIGTERM brought it forward) while its call
 * runs on: it is paid whether or not it is awaited, so its answer (`late`) is kept in the memo when
 * it comes, within Cloud Run's own deadline (the worker's plus {@link ANSWER_MARGIN_MS}), instead of
 * being thrown away and paid again by the retry. Answered 503 like any {@link DeadlineError}.
 */
export class AnalysisCutError extends DeadlineError {
  constructor(
    cut: DeadlineError,
    readonly late: Promise<AnalysisResult>,
  ) {
    super('analysis', cut.message);
    late.catch(() => {});
  }
}

/** What the memo held, as this delivery's analysis: the result, or the refusal thrown again. */
export function replay(kept: Kept, source: 'memo' | 'shared'): Analysed {
  if ('result' in kept) return { result: kept.result, source };
  const { code, message, usage } = kept.refused;
  throw new RejectionError(code, message, { usage, memo: source === 'memo' ? 'hit' : 'shared' });
}

/** Where paid analyses and paid attempts live: two namespaces of the memo's bucket (leases: a third). */
const ANALYSIS_NAMESPACE = 'analysis';
const PROGRESS_NAMESPACE = 'progress';
