import { createHash } from 'node:crypto';
import type { AnalysisProgress, AnalysisResult } from '../contract/analysis';
import { ANSWER_MARGIN_MS, MEMO_CALL_TIMEOUT_MS } from '../contract/settings';
import { Deadline, DeadlineError, ShuttingDownError } from './deadline';
import { isRejection, paidBeforeFailing, RejectionError } from './errors';
import {
  type Admission,
  admitAtOnce,
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
 * The memo of paid analyses: after an analysis and before the write, its outcome is kept under the
 * dedup key, so that a delivery retried after a failed write (a busy store, a full DML queue, an
 * outage) does not pay for the same analysis again, whichever analyzer version it runs: during a
 * rollout an analysis the old revision paid for and could not write is the one the new revision
 * writes (its row names the model that made it), never paid twice. The outcome is the result, or
 * the permanent refusal a paid analysis ended in (`analysis_failed` after two paid calls,
 * `safety_blocked`), with its tokens: a retry replays the refusal instead of paying for it again.
 *
 * It is a cache, never a claim: a miss, an unreadable entry or a memo that is down means the
 * delivery does the work itself; nothing is written before the analysis is paid, so a crash still
 * leaves only the message. Entries older than the redelivery window are ignored (and pruned by the
 * store). Within one instance, concurrent deliveries of one key share one analysis (single flight);
 * across instances a lease makes a concurrent delivery wait for the holder's analysis, at most until
 * the lease expires on its own; then it does the work. Neither wait can block a document.
 *
 * The lease guards the holder's work, so it must outlive it: the holder renews it (a heartbeat
 * every third of the lease) for as long as its read and analysis run, however long that is. A key
 * has one lease, one object in the memo: taken create-only, renewed by a compare-and-swap rewrite
 * that only its holder can make, ended by its holder as soon as its work is over (or its write has
 * answered), and taken over by the next delivery once it has ended or expired. A holder that dies
 * stops renewing, and its lease expires on its own within one lease time. Every memo call is bounded
 * by a short timeout and by the delivery's deadline, and every wait ends at the deadline (503) or at
 * once when the instance shuts down.
 */

export interface AnalysisMemoOptions {
  /** Entries older than this are ignored: the redelivery window. */
  ttlMs: number;
  /**
   * How long a lease lasts without a renewal: the holder renews it every third of this while it
   * works, so this is how long a dead holder can keep a concurrent delivery waiting. 0 turns leases
   * off.
   */
  leaseMs?: number;
  /** How often a waiting delivery looks for the holder's analysis. */
  pollMs?: number;
  /**
   * Whether a write's statement can still commit after its delivery was answered or its instance
   * died: true on BigQuery (a job runs on without its client, up to its `jobTimeoutMs`, which
   * BigQueryStore sets to the delivery's deadline). The write turn's lease is then moved past that
   * bound (the deadline plus one lease time) as the turn is taken. False (SQLite: a write dies with
   * its process): the heartbeat alone keeps it.
   */
  writesOutliveInstance?: boolean;
  /** The longest one memo call (read, keep, lease) may take; past it the memo is passed by. */
  callTimeoutMs?: number;
  clock?: Clock;
  /** Waits this long (injectable for simulations). */
  sleep?: (ms: number) => Promise<void>;
  /** The heartbeat's timer (injectable for simulations). */
  timers?: Timers;
  logger?: Logger;
}

/** The defaults of the lease and of memo calls. */
export const MEMO_LEASE_DEFAULTS = Object.freeze({
  leaseMs: 15_000,
  pollMs: 1_000,
  callTimeoutMs: MEMO_CALL_TIMEOUT_MS,
});

/** A lease's heartbeat: renews it until stopped (or until its delivery's deadline). */
interface Heartbeat {
  readonly stopped: boolean;
  /**
   * Moves the lease to at least `atMs` now, and every renewal after to no earlier (a write's bound);
   * resolves once that renewal has answered (or failed: the next beats ask again).
   */
  holdUntil(atMs: number): Promise<void>;
  /** Stops renewing; with `release`, ends the lease now (its work is over: nobody need wait). */
  stop(release?: boolean): void;
  /** Ends the lease now, renewed or not (unless another delivery took it over since). */
  release(): void;
  /** Calls `callback` once it stops, however (stopped, its deadline past, its lease taken over). */
  whenStopped(callback: () => void): void;
}

/** This instance's turn to write a key: the heartbeat of its lease and the deliveries using it. */
interface WriteTurn {
  heartbeat: Heartbeat;
  users: number;
  /** Whether every write under it answered: only then may the lease end before its bound. */
  ended: boolean;
}

/**
 * A write's turn, for the delivery writing under it: `done(ended)` once its write is over, `ended`
 * false when its statement may still run (cut at the deadline or by shutdown, or its outcome
 * unknown): the lease then lives on to the statement's bound instead of ending now, and this
 * instance's own retry waits for it like any other delivery.
 */
export interface WriteTurnHandle {
  done(ended?: boolean): void;
}

/**
 * What one lease call found: `token` when this delivery holds the key's lease now (`earlier`: a
 * delivery held it before), `holderUntil` when another delivery holds it, neither when leases are
 * off or the memo gave no answer.
 */
interface Lease {
  token?: string;
  holderUntil?: Date;
  earlier?: boolean;
}

/** What the memo tells the paid work it runs. */
export interface WorkContext {
  /**
   * The work follows a holder of the key's lease that kept no analysis: it may have written the row
   * all the same (its keep failed, or its row needed no paid analysis). The work asks the store
   * first, and throws {@link WrittenMeanwhile} instead of paying when the row is there.
   */
  afterHolder: boolean;
  /**
   * The attempts an earlier delivery paid for and did not end (its first answer was outside the
   * schema, then a failure not about the document ended it): the work goes on after them.
   */
  resume?: AnalysisProgress;
}

/** Thrown by the paid work when the key's row was written meanwhile: nothing to pay, nothing to write. */
export class WrittenMeanwhile extends Error {
  constructor() {
    super("the key's row was written by the holder this delivery waited for");
    this.name = 'WrittenMeanwhile';
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

/** Where a delivery's analysis came from. */
export type AnalysisSource = 'analyzer' | 'memo' | 'shared';

/** What the memo holds for a key: a paid result, or the paid refusal it ended in. */
type Kept = { result: AnalysisResult } | { refused: RejectionError };

/**
 * What one read of the memo found for a key, before any other work ({@link AnalysisMemo.peek}):
 * `none`, no analysis of it kept and no delivery of it (of any analyzer version) ever took its
 * lease, so none has paid or written; `kept`, an analysis is kept (by whichever version paid);
 * `worked`, none is kept but a delivery took the key's lease (it may have written its row: one
 * whose keep failed, or whose row needed no paid analysis); `unknown`, the memo could not be read. Handed to `analyse()`, it stands for
 * the memo's first read, so the memo is not read twice.
 */
export interface MemoPeek {
  readonly state: 'none' | 'kept' | 'worked' | 'unknown';
  readonly kept?: Kept;
}

type Analysed = { result: AnalysisResult; source: AnalysisSource };

export class AnalysisMemo {
  private readonly inFlight = new Map<string, Promise<Analysed>>();
  /** Keys whose write turn this instance holds: the lease's heartbeat and the deliveries using it. */
  private readonly writing = new Map<string, WriteTurn>();
  private readonly clock: Clock;
  private readonly leaseMs: number;
  private readonly pollMs: number;
  private readonly callTimeoutMs: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly timers: Timers;

  constructor(
    private readonly store: MemoStore,
    private readonly options: AnalysisMemoOptions,
  ) {
    this.clock = options.clock ?? systemClock;
    this.leaseMs = options.leaseMs ?? MEMO_LEASE_DEFAULTS.leaseMs;
    this.pollMs = options.pollMs ?? MEMO_LEASE_DEFAULTS.pollMs;
    this.callTimeoutMs = options.callTimeoutMs ?? MEMO_LEASE_DEFAULTS.callTimeoutMs;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.timers = options.timers ?? realTimers;
  }

  /**
   * How many keys each per-key memory holds now (the memory benchmark and the tests read it): both
   * empty again once the analyses and writes under them are over.
   */
  footprint(): { inFlight: number; writing: number } {
    return { inFlight: this.inFlight.size, writing: this.writing.size };
  }

  /**
   * The storage key of a key's paid analysis: a hash of the dedup key (safe in any object name), the
   * same for every analyzer version. A document is analysed once, whichever version pays: a rollout
   * whose old revision paid and could not write (an outage, a shutdown) leaves an analysis the new
   * revision replays and writes, under the model that made it (the row's `model`), instead of paying
   * again; a row the old revision wrote would have carried it just the same. Re-analysing documents
   * with a new version is a backfill of its own, never a side effect of a retry.
   */
  static key(dedupKey: string): string {
    return `${ANALYSIS_NAMESPACE}/${hashOf(dedupKey)}`;
  }

  /**
   * The key's lease: the same for every analyzer version.
   * The lease excludes the writes of every delivery of a key, and during a deploy two revisions
   * with different versions deliver the same keys: a lease per version would let both write at
   * once. The analyses are shared by every version too ({@link key}).
   */
  static leaseKey(dedupKey: string): string {
    return `${LEASE_NAMESPACE}/${hashOf(dedupKey)}`;
  }

  /**
   * Where the paid attempts of an analysis that did not end are kept ({@link MemoProgress}): beside
   * the analysis, not under its key, which must stay free for the outcome (entries are create-only).
   */
  static progressKey(dedupKey: string): string {
    return `${PROGRESS_NAMESPACE}/${hashOf(dedupKey)}`;
  }

  /**
   * The analysis of `dedupKey`: from the memo when it holds one (whichever analyzer version paid for
   * it: the memo's key names the document only), from the same analysis when one is already running in this instance, else from `work()` (which reads and
   * pays), kept in the memo afterwards. Errors of `work()` propagate; the memo's own never do. A
   * paid refusal kept in the memo is thrown again, marked with where it came from.
   *
   * `admission` admits the work; the lease is taken only once admitted, so a delivery waiting its
   * turn holds no lease that could expire under it, and one that waited looks in the memo again
   * (a concurrent delivery elsewhere may have paid meanwhile). `deadline` bounds every call and wait.
   */
  async analyse(
    dedupKey: string,
    work: (context: WorkContext) => Promise<AnalysisResult>,
    admission: Admission = admitAtOnce,
    deadline: Deadline = Deadline.none(),
    /** The delivery's earlier read of the memo ({@link peek}), standing for the first lookup. */
    peeked?: MemoPeek,
  ): Promise<Analysed> {
    const key = AnalysisMemo.key(dedupKey);
    const running = this.inFlight.get(key);
    if (running) return this.share(running, deadline);

    // A first read that failed is read again once admitted, right before paying: the memo may
    // answer now, the lookup may have taken long meanwhile, and a concurrent delivery may have kept
    // its analysis.
    const reads = { failed: peeked?.state === 'unknown' };
    const kept = peeked ? peeked.kept : await this.lookup(key, dedupKey, deadline, reads);
    if (kept) return replay(kept, 'memo');

    // A lookup ran meanwhile: another delivery may have started the work in between.
    const started = this.inFlight.get(key);
    if (started) return this.share(started, deadline);
    const promise = admission.run(async (waitedMs) => {
      const keptMeanwhile =
        waitedMs > 0 || reads.failed ? await this.lookup(key, dedupKey, deadline) : undefined;
      if (keptMeanwhile) return replay(keptMeanwhile, 'shared');
      return this.leaseThenWork(key, dedupKey, work, deadline);
    }, deadline);
    this.inFlight.set(key, promise);
    try {
      return await promise;
    } finally {
      this.inFlight.delete(key);
    }
  }

  /**
   * One read of the memo for `dedupKey`, before the delivery does anything else. A memo that holds
   * no analysis of the key tells the delivery that no delivery of it has paid and kept one yet: the
   * store's lookup (on BigQuery a billed statement of a second or so) can be skipped, since the
   * write is conditional and refuses a second row anyway. The price of a memo that lost an entry
   * whose row was written is one more paid analysis, never a second row: a cache that fails costs
   * money, never a document. Errors never propagate (`unknown`).
   */
  async peek(dedupKey: string, deadline: Deadline = Deadline.none()): Promise<MemoPeek> {
    const reads = { failed: false };
    // Read together with the entry, so that a miss costs no extra wait: whether any delivery of the
    // key, of any analyzer version, ever took its lease.
    const [kept, leased] = await Promise.all([
      this.lookup(AnalysisMemo.key(dedupKey), dedupKey, deadline, reads),
      this.everLeased(dedupKey, deadline),
    ]);
    if (kept) return { state: 'kept', kept };
    if (reads.failed || leased === 'unknown') return { state: 'unknown' };
    return { state: leased ? 'worked' : 'none' };
  }

  /**
   * Whether a delivery of `dedupKey` ever took its lease (every write takes one): with no analysis
   * kept, that is how a delivery learns that another may have written its row all the same (its
   * keep failed, or the row needed no paid analysis), so that it asks the store before paying.
   * `false` when the store cannot tell (no `leased`) or leases are off: the delivery then trusts the
   * memo's answer and skips the store's lookup.
   */
  private async everLeased(dedupKey: string, deadline: Deadline): Promise<boolean | 'unknown'> {
    if (this.leaseMs <= 0 || !this.store.hasLease) return false;
    try {
      return await this.call('read', this.store.hasLease(AnalysisMemo.leaseKey(dedupKey)), deadline);
    } catch (error) {
      this.endIfOver(error, deadline, 'read');
      this.options.logger?.warn('the memo could not tell whether the key was leased: asking the store', {
        dedupKey,
        error: error instanceof Error ? error.message : String(error),
      });
      return 'unknown';
    }
  }

  /** A concurrent delivery of this instance shares the running analysis, within its own deadline. */
  private async share(running: Promise<Analysed>, deadline: Deadline): Promise<Analysed> {
    return {
      result: (await deadline.race('sharing an analysis', running, { wait: true })).result,
      source: 'shared',
    };
  }

  /**
   * Across instances: the first delivery takes the key's lease and renews it while it works; a
   * concurrent one (two notifications of one upload reaching two instances) waits for the holder's
   * analysis to appear in the memo for as long as the lease lives (renewals included), then works
   * itself; when its own deadline comes first it is answered 503 and finds the analysis in the memo
   * on its retry. A lease that cannot be taken, read or renewed never stops the work.
   *
   * A delivery that waited for a holder and found no analysis kept works with `afterHolder`: the
   * holder may have written the row all the same (a holder whose keep failed, or whose row needed no
   * paid analysis), so the work asks the store before paying ({@link WrittenMeanwhile}).
   */
  private async leaseThenWork(
    key: string,
    dedupKey: string,
    work: (context: WorkContext) => Promise<AnalysisResult>,
    deadline: Deadline,
  ): Promise<Analysed> {
    const base = AnalysisMemo.leaseKey(dedupKey);
    const waited = await this.waitForHolder(base, dedupKey, deadline, {
      what: 'waiting for the analysis of a concurrent delivery (its lease)',
      look: () => this.lookup(key, dedupKey, deadline),
    });
    if ('found' in waited) return replay(waited.found, 'shared');
    const { lease, holderSeen } = waited;
    // The memo gave no lease (it is failing): the work goes on; the write asks again (writeTurn).
    const heartbeat = lease.token ? this.renewWhileWorking(base, lease.token, dedupKey, deadline) : undefined;
    // An earlier delivery held this key's lease: it may well have kept its analysis since this
    // delivery last read the memo (a holder keeps its analysis before its write, and ends its lease
    // only after it), and this delivery may not have waited for it at all. One more read costs a
    // memo call; paying again costs an analysis. Read with it: the attempts an earlier delivery paid
    // for before it failed, to go on after them. When that read fails, the earlier holder may have
    // written its row: the work asks the store before paying, as after a holder seen (soak I5, seed
    // 22 of a world where BigQuery loses answers: the holder wrote and ended its lease, and the memo
    // failed every read of this delivery).
    let resume: AnalysisProgress | undefined;
    let afterHolder = holderSeen;
    if (lease.earlier) {
      const reads = { failed: false };
      const [kept, progress] = await Promise.all([
        this.lookup(key, dedupKey, deadline, reads),
        this.progressOf(dedupKey, deadline),
      ]);
      if (kept) {
        // Its row is next, under the lease this delivery holds.
        this.handOver(base, heartbeat);
        return replay(kept, 'memo');
      }
      resume = progress;
      afterHolder ||= reads.failed;
    }
    let result: AnalysisResult;
    try {
      result = await work({ afterHolder, ...(resume ? { resume } : {}) });
    } catch (error) {
      // A paid refusal is an outcome: kept, so that a retry after a failed write does not pay again;
      // its row is written next, under the same lease (as a result's is, below).
      if (isRejection(error) && error.usage) {
        this.handOver(base, heartbeat);
        const rejection = { reason: error.code, detail: error.message };
        await this.keep(key, dedupKey, { rejection, usage: error.usage }, deadline);
        throw error;
      }
      // Attempts paid before a failure that is not about the document (a first answer outside the
      // schema, then a 503, a refusal or the deadline): kept, so that the retry, here or elsewhere,
      // goes on after them instead of paying them again.
      const paid = paidBeforeFailing(error);
      if (paid?.progress && paid.usage) {
        const progress = { progress: paid.progress, usage: paid.usage };
        await this.keep(AnalysisMemo.progressKey(dedupKey), dedupKey, progress, deadline);
      }
      if (error instanceof AnalysisCutError) {
        // The call runs on, paid: its answer is kept when it comes, and the lease ends then. Till
        // then it is left to expire on its own (the heartbeat stopped at the deadline), so that a
        // retry meanwhile waits for the answer instead of paying again.
        this.keepLate(key, dedupKey, error.late, deadline, heartbeat);
        heartbeat?.stop();
      } else {
        // Nothing of this work runs on: the lease ends now, and the retry, here or elsewhere, takes
        // it at once. The row is there (WrittenMeanwhile): nobody need wait either.
        heartbeat?.stop(true);
      }
      throw error;
    }
    this.handOver(base, heartbeat);
    await this.keep(key, dedupKey, result, deadline);
    return { result, source: 'analyzer' };
  }

  /**
   * The one wait for a key's holder, for the analysis and for the write: takes the key's lease, or,
   * while another delivery holds it, waits, looking every poll for what the caller needs (`look`:
   * the holder's analysis) and asking the lease again (a holder whose work is over ends its lease at
   * once, long before the bound it was moved to; a holder whose row needed no paid analysis keeps
   * none this delivery could find). `mine` ends the wait when this instance already holds what the
   * caller needs (its own write turn). Every wait ends at the deadline (503).
   *
   * Ends with what was found, or with the lease as last asked (`token` when taken; neither `token`
   * nor a holder when none is to be had: the caller goes on unguarded).
   */
  private async waitForHolder<T>(
    base: string,
    dedupKey: string,
    deadline: Deadline,
    how: { what: string; mine?: () => T | undefined; look?: () => Promise<T | undefined> },
  ): Promise<{ found: T } | { lease: Lease; holderSeen: boolean }> {
    let holderSeen = false;
    for (;;) {
      const before = how.mine?.();
      if (before !== undefined) return { found: before };
      const lease = await this.takeLease(base, dedupKey, deadline);
      if (!lease.holderUntil) return { lease, holderSeen };
      holderSeen = true;
      deadline.check(how.what);
      const untilMs = lease.holderUntil.getTime();
      const napMs = Math.min(this.pollMs, untilMs - this.clock.now().getTime(), deadline.remainingMs());
      await deadline.race(how.what, this.sleep(Math.max(0, napMs)), { wait: true });
      const found = await how.look?.();
      if (found !== undefined) return { found };
    }
  }

  /**
   * The key's turn to write its row, across instances. BigQuery's insert-only MERGEs of one new key
   * that overlap both insert, and the one that started first sorts first in the `documents` view
   * whichever committed first, so a reader could see the view's answer change. The key's lease
   * therefore guards the write as well as the analysis: a delivery holds it (the lease its analysis
   * took, else it takes it, waiting while another delivery holds it: also when its analysis ran
   * without a lease because the memo failed then) and keeps it until `done()`, after its write has
   * answered. The next writer's MERGE then finds the row and inserts nothing. Deliveries of one
   * instance share the turn (group commit sends one MERGE at a time).
   *
   * The lease must outlive the statement it guards, even when this instance is killed mid-statement
   * (a BigQuery job runs on without its client): with `writesOutliveInstance`, on taking the turn it
   * is moved to the delivery's deadline plus one lease time, past the bound of any statement the
   * write starts (BigQueryStore gives each statement a `jobTimeoutMs` that ends at the earliest
   * deadline of its rows). `done(true)` ends it at once, so a concurrent delivery need not wait that
   * long after a write that answered; `done(false)` (the write was cut at the deadline or by
   * shutdown, its statement may run on) leaves it to that bound, and this instance's own retry waits
   * for it like any other delivery.
   *
   * A lease that cannot be taken never stops the write; every wait ends at the deadline (503). A
   * lease call that timed out may still have taken the lease: the retry then sees it held (by this
   * delivery, unknowingly) and waits it out, at most one lease time, like any other holder's.
   */
  async writeTurn(dedupKey: string, deadline: Deadline = Deadline.none()): Promise<WriteTurnHandle> {
    const none = { done: () => {} };
    if (this.leaseMs <= 0) return none;
    // One lease for every analyzer version: two revisions of a deploy exclude each other's writes.
    const base = AnalysisMemo.leaseKey(dedupKey);
    // A turn leaves `writing` as its heartbeat stops (holdTurn): the one there is live.
    const waited = await this.waitForHolder(base, dedupKey, deadline, {
      what: 'waiting for the write of a concurrent delivery (its lease)',
      mine: () => this.writing.get(base),
    });
    if ('found' in waited) return this.join(waited.found, deadline);
    const { token } = waited.lease;
    if (!token) return none;
    const turn = {
      heartbeat: this.renewWhileWorking(base, token, dedupKey, deadline),
      users: 0,
      ended: true,
    };
    this.holdTurn(base, turn);
    return this.join(turn, deadline);
  }

  /**
   * The lease now guards the write: kept alive (the same heartbeat) until the delivery's
   * {@link writeTurn} is done, so that no other instance's MERGE of this key overlaps ours.
   */
  private handOver(key: string, heartbeat: Heartbeat | undefined): void {
    if (heartbeat) this.holdTurn(key, { heartbeat, users: 0, ended: true });
  }

  /**
   * This instance's turn to write `key`, in {@link writing} until its heartbeat stops: once its
   * writes are done, or at its delivery's deadline when that delivery never came to write.
   */
  private holdTurn(key: string, turn: WriteTurn): void {
    this.writing.get(key)?.heartbeat.stop();
    this.writing.set(key, turn);
    turn.heartbeat.whenStopped(() => {
      if (this.writing.get(key) === turn) this.writing.delete(key);
    });
  }

  /**
   * One more delivery writing under this instance's turn: the lease is moved past the bound of its
   * statements first (its deadline plus one lease time); the last one done stops the heartbeat, and
   * ends the lease when every write under the turn answered.
   */
  private async join(turn: WriteTurn, deadline: Deadline): Promise<WriteTurnHandle> {
    turn.users += 1;
    let done = false;
    const handle = {
      done: (ended = true) => {
        if (done) return;
        done = true;
        turn.users -= 1;
        if (!ended) turn.ended = false;
        if (turn.users > 0) return;
        turn.heartbeat.stop(turn.ended);
      },
    };
    if (this.options.writesOutliveInstance && Number.isFinite(deadline.atMs))
      await turn.heartbeat.holdUntil(deadline.atMs + this.leaseMs);
    return handle;
  }

  /**
   * The holder's heartbeat: renews its lease every third of the lease time until stopped, to one
   * lease time from now, or to the bound a write asked for ({@link Heartbeat.holdUntil}) when later.
   * Each renewal shows the token the last one answered; a lease taken over since (it expired under
   * a holder whose renewals failed) is no longer renewed.
   */
  private renewWhileWorking(key: string, token: string, dedupKey: string, deadline: Deadline): Heartbeat {
    let timer: { cancel(): void } | undefined;
    let stopped = false;
    let floorMs = Number.NEGATIVE_INFINITY;
    let current = token;
    const onStop: Array<() => void> = [];
    const warn = (message: string, error?: unknown) =>
      this.options.logger?.warn(message, {
        dedupKey,
        ...(error === undefined ? {} : { error: error instanceof Error ? error.message : String(error) }),
      });
    const renew = async (untilMs: number) => {
      try {
        const next = await this.call('renew', this.store.renew(key, current, new Date(untilMs)), deadline);
        if (next) current = next;
        else if (!lost) {
          lost = true;
          warn('the lease expired and another delivery took it: a concurrent delivery may work too');
          stop();
        }
      } catch (error) {
        warn('the memo could not renew a lease: a concurrent delivery may work too', error);
      }
    };
    const stop = () => {
      if (stopped) return;
      stopped = true;
      timer?.cancel();
      for (const callback of onStop.splice(0)) callback();
    };
    let lost = false;
    // The work is over: the lease ends now instead of at its last renewal (or bound). Nobody waits
    // for the answer; one that fails leaves the lease to expire on its own. Past Cloud Run's
    // deadline (the delivery's plus the answer margin) the instance may be gone and the message is
    // Pub/Sub's again: no call starts then, and the lease expires on its own.
    const release = () => {
      stop();
      if (lost || this.clock.now().getTime() > deadline.atMs + ANSWER_MARGIN_MS) return;
      lost = true;
      this.store.renew(key, current, this.clock.now(), true).catch((error: unknown) => {
        warn('the memo could not end a lease: a concurrent delivery waits it out', error);
      });
    };
    const target = () => Math.max(this.clock.now().getTime() + this.leaseMs, floorMs);
    const beat = () => {
      timer = this.timers.after(this.leaseMs / 3, () => {
        // Past its delivery's deadline nothing it guards still runs (a write's statement is bounded
        // by then, and its lease moved past that bound): it stops on its own.
        if (deadline.remainingMs() <= 0) stop();
        if (stopped) return;
        // The next beat does not wait for this renewal: a slow one must not leave the lease to expire.
        beat();
        void renew(target());
      });
    };
    beat();
    return {
      get stopped() {
        return stopped;
      },
      holdUntil: async (atMs) => {
        if (atMs <= floorMs || stopped) return;
        floorMs = atMs;
        await renew(target());
      },
      whenStopped: (callback) => {
        if (stopped) callback();
        else onStop.push(callback);
      },
      stop: (end = false) => {
        if (stopped) return;
        stop();
        if (end) release();
      },
      release,
    };
  }

  /**
   * The key's lease for this delivery: `token` when this delivery holds it now, `holderUntil` when
   * another delivery holds it, neither when leases are off or the memo cannot give one (the work
   * goes on).
   */
  private async takeLease(key: string, dedupKey: string, deadline: Deadline): Promise<Lease> {
    if (this.leaseMs <= 0) return {};
    try {
      const now = this.clock.now();
      const until = new Date(now.getTime() + this.leaseMs);
      const taken = await this.call('lease', this.store.lease(key, until, now), deadline);
      return 'token' in taken
        ? { token: taken.token, earlier: taken.earlier }
        : { holderUntil: taken.heldUntil };
    } catch (error) {
      this.endIfOver(error, deadline, 'lease');
      this.options.logger?.warn('the memo could not take a lease: working without one', {
        dedupKey,
        error: error instanceof Error ? error.message : String(error),
      });
      return {};
    }
  }

  /** What the memo holds for `key`; a read that fails is a miss, and is noted in `reads`. */
  private async lookup(
    key: string,
    dedupKey: string,
    deadline: Deadline,
    reads?: { failed: boolean },
  ): Promise<Kept | undefined> {
    try {
      const entry = await this.call('read', this.store.get(key), deadline);
      if (!entry) return undefined;
      const ageMs = this.clock.now().getTime() - Date.parse(entry.createdAt);
      if (!(ageMs <= this.options.ttlMs) || 'progress' in entry) return undefined;
      if ('rejection' in entry) {
        const { reason, detail } = entry.rejection;
        return { refused: new RejectionError(reason, detail, { usage: entry.usage }) };
      }
      // The readings make the row's confidence and review; an entry kept without them still reads.
      const readings = entry.readings ? { readings: entry.readings } : {};
      return { result: { analysis: entry.analysis, model: entry.model, usage: entry.usage, ...readings } };
    } catch (error) {
      this.endIfOver(error, deadline, 'read');
      if (reads) reads.failed = true;
      this.options.logger?.warn('the memo of paid analyses could not be read: analysing again', {
        dedupKey,
        error: error instanceof Error ? error.message : String(error),
      });
      return undefined;
    }
  }

  /** The attempts an earlier delivery paid for and did not end, if the memo kept them ({@link progressKey}). */
  private async progressOf(dedupKey: string, deadline: Deadline): Promise<AnalysisProgress | undefined> {
    try {
      const entry = await this.call('read', this.store.get(AnalysisMemo.progressKey(dedupKey)), deadline);
      if (!entry || !('progress' in entry)) return undefined;
      const ageMs = this.clock.now().getTime() - Date.parse(entry.createdAt);
      return ageMs <= this.options.ttlMs ? entry.progress : undefined;
    } catch (error) {
      this.endIfOver(error, deadline, 'read');
      this.options.logger?.warn('the memo could not tell the attempts already paid: analysing afresh', {
        dedupKey,
        error: error instanceof Error ? error.message : String(error),
      });
      return undefined;
    }
  }

  /**
   * Keeps a paid answer that came after its delivery was cut ({@link AnalysisCutError}), if it comes
   * before Cloud Run's own deadline (the worker's plus the answer margin): past it the instance may
   * be gone and the message is Pub/Sub's again. Nobody waits for it; a keep that fails costs the
   * retry one more analysis. Once the call has ended (its answer kept, or its failure), its lease
   * ends too: the retry need not wait it out.
   */
  private keepLate(
    key: string,
    dedupKey: string,
    late: Promise<AnalysisResult>,
    deadline: Deadline,
    heartbeat: Heartbeat | undefined,
  ): void {
    const cloudRun = new Deadline(deadline.atMs + ANSWER_MARGIN_MS, this.clock, this.timers);
    late.then(
      async (result) => {
        if (cloudRun.remainingMs() <= 0) return;
        await this.keep(key, dedupKey, result, cloudRun).catch(() => {});
        heartbeat?.release();
      },
      () => heartbeat?.release(),
    );
  }

  private async keep(
    key: string,
    dedupKey: string,
    outcome: MemoOutcome | MemoProgress,
    deadline: Deadline,
  ): Promise<void> {
    try {
      const entry: MemoEntry = { ...outcome, createdAt: this.clock.now().toISOString() };
      await this.call('keep', this.store.create(key, entry), deadline);
    } catch (error) {
      this.endIfOver(error, deadline, 'keep');
      this.options.logger?.warn(
        'the memo of paid analyses could not keep an analysis: a retry would pay again',
        {
          dedupKey,
          error: error instanceof Error ? error.message : String(error),
        },
      );
    }
  }

  /**
   * A memo call that failed because the delivery's own deadline came (or its instance is shutting
   * down) is not the memo failing: the delivery is over, and passing the memo by would start the
   * next call past the deadline. That is thrown (503); any other failure is the memo's, passed by.
   */
  private endIfOver(error: unknown, deadline: Deadline, what: string): void {
    if (error instanceof ShuttingDownError) throw error;
    deadline.check(`memo ${what}`);
  }

  /** One memo call, bounded by its own timeout and by the delivery's deadline. */
  private call<T>(what: string, call: Promise<T>, deadline: Deadline): Promise<T> {
    return deadline.race(`memo ${what}`, call, { capMs: this.callTimeoutMs });
  }
}

/** What the memo held, as this delivery's analysis: the result, or the refusal thrown again. */
function replay(kept: Kept, source: 'memo' | 'shared'): Analysed {
  if ('result' in kept) return { result: kept.result, source };
  const { code, message, usage } = kept.refused;
  throw new RejectionError(code, message, { usage, memo: source === 'memo' ? 'hit' : 'shared' });
}

/** The hash of a dedup key: safe in any object name. */
function hashOf(dedupKey: string): string {
  return createHash('sha256').update(dedupKey).digest('hex');
}

/** Where paid analyses, leases and paid attempts live: three namespaces of one bucket. */
const ANALYSIS_NAMESPACE = 'analysis';
const LEASE_NAMESPACE = 'lease';
const PROGRESS_NAMESPACE = 'progress';
