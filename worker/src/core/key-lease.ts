import { createHash } from 'node:crypto';
import { ANSWER_MARGIN_MS } from '../contract/settings';
import { Deadline } from './deadline';
import type { MemoCalls } from './memo-call';
import { type Clock, type MemoStore, realTimers, systemClock, type Timers } from './ports';

/**
 * The key's lease: one object per dedup key in the memo's bucket, the same for every analyzer
 * version. It makes a concurrent delivery of a key wait for the holder, across instances, twice:
 * for the holder's analysis (so that it is paid once) and for the holder's write (so that no two
 * MERGEs of one key overlap and the `documents` view's answer never changes).
 *
 * Taken create-only, renewed by a compare-and-swap rewrite that only its holder can make (a
 * heartbeat every third of the lease, for as long as the work or the write it guards runs, however
 * long), moved past the bound of a write's statement (a BigQuery job runs on without its client),
 * ended by its holder as soon as what it guards is over, and taken over by the next delivery once
 * it has ended or expired. A holder that dies stops renewing, and its lease expires on its own
 * within one lease time: a lease makes a delivery wait, never blocks a document. A lease call that
 * fails never stops the work or the write: they go on unguarded, and say so.
 */

export interface KeyLeaseOptions {
  /**
   * How long a lease lasts without a renewal: the holder renews it every third of this while it
   * works, so this is how long a dead holder can keep a concurrent delivery waiting. 0 turns leases
   * off.
   */
  leaseMs: number;
  /** How often a waiting delivery looks for the holder's analysis. */
  pollMs: number;
  /**
   * Whether a write's statement can still commit after its delivery was answered or its instance
   * died: true on BigQuery (a job runs on without its client, up to its `jobTimeoutMs`, which
   * BigQueryStore sets to the delivery's deadline). The write turn's lease is then moved past that
   * bound (the deadline plus one lease time) as the turn is taken. False (SQLite: a write dies with
   * its process): the heartbeat alone keeps it.
   */
  writesOutliveInstance?: boolean;
  clock?: Clock;
  /** Waits this long (injectable for simulations). */
  sleep?: (ms: number) => Promise<void>;
  /** The heartbeat's timer (injectable for simulations). */
  timers?: Timers;
}

/** A lease's heartbeat: renews it until stopped (or until its delivery's deadline). */
interface Heartbeat {
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

/**
 * The key's lease as a delivery's analysis holds it ({@link KeyLeases.acquire}); without a token
 * (leases off, or the memo gave none) every call is a no-op and the work goes on unguarded.
 */
export interface HeldLease {
  /** A delivery held the key's lease before this one: it may have kept or written something. */
  readonly earlier: boolean;
  /** This delivery waited for another holder first. */
  readonly holderSeen: boolean;
  /** The work is over and the row comes next: the lease now guards the write ({@link KeyLeases.writeTurn}). */
  guardWrite(): void;
  /** Nothing of the work runs on: the lease ends now, and the next delivery takes it at once. */
  end(): void;
  /** A paid call runs on: renewals stop and the lease is left to expire on its own (or to {@link end}). */
  leave(): void;
}

export class KeyLeases {
  /** Keys whose write turn this instance holds: the lease's heartbeat and the deliveries using it. */
  private readonly writing = new Map<string, WriteTurn>();
  private readonly clock: Clock;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly timers: Timers;

  constructor(
    private readonly store: MemoStore,
    private readonly options: KeyLeaseOptions,
    private readonly calls: MemoCalls,
  ) {
    this.clock = options.clock ?? systemClock;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.timers = options.timers ?? realTimers;
  }

  /** How many keys' write turns this instance holds now (empty again once the writes are over). */
  get turns(): number {
    return this.writing.size;
  }

  /**
   * The storage key of a dedup key's lease: the same for every analyzer version. The lease excludes
   * the writes of every delivery of a key, and during a deploy two revisions with different versions
   * deliver the same keys: a lease per version would let both write at once.
   */
  static key(dedupKey: string): string {
    return `${LEASE_NAMESPACE}/${hashOf(dedupKey)}`;
  }

  /**
   * Whether a delivery of `dedupKey` ever took its lease (every write takes one): with no analysis
   * kept, that is how a delivery learns that another may have written its row all the same (its
   * keep failed, or the row needed no paid analysis), so that it asks the store before paying.
   * `false` when the store cannot tell (no `leased`) or leases are off: the delivery then trusts the
   * memo's answer and skips the store's lookup.
   */
  async everTaken(dedupKey: string, deadline: Deadline): Promise<boolean | 'unknown'> {
    if (this.options.leaseMs <= 0 || !this.store.hasLease) return false;
    try {
      return await this.calls.call('read', this.store.hasLease(KeyLeases.key(dedupKey)), deadline);
    } catch (error) {
      const warning = 'the memo could not tell whether the key was leased: asking the store';
      this.calls.passBy(error, deadline, 'read', warning, dedupKey);
      return 'unknown';
    }
  }

  /**
   * Across instances: the first delivery takes the key's lease and renews it while it works; a
   * concurrent one (two notifications of one upload reaching two instances) waits for the holder,
   * looking every poll for what it needs (`look`: the holder's analysis) for as long as the lease
   * lives (renewals included), then takes the lease itself; when its own deadline comes first it is
   * answered 503 (and finds the analysis in the memo on its retry). Ends with what was found, or
   * with the lease held.
   */
  async acquire<T>(
    dedupKey: string,
    deadline: Deadline,
    look: () => Promise<T | undefined>,
  ): Promise<{ found: T } | HeldLease> {
    const base = KeyLeases.key(dedupKey);
    const waited = await this.waitForHolder(base, dedupKey, deadline, {
      what: 'waiting for the analysis of a concurrent delivery (its lease)',
      look,
    });
    if ('found' in waited) return waited;
    const { lease, holderSeen } = waited;
    // The memo gave no lease (it is failing): the work goes on; the write asks again (writeTurn).
    const heartbeat = lease.token ? this.renewWhileWorking(base, lease.token, dedupKey, deadline) : undefined;
    return {
      earlier: lease.earlier ?? false,
      holderSeen,
      guardWrite: () => {
        if (heartbeat) this.holdTurn(base, { heartbeat, users: 0, ended: true });
      },
      end: () => heartbeat?.release(),
      leave: () => heartbeat?.stop(),
    };
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
      const napMs = Math.min(
        this.options.pollMs,
        untilMs - this.clock.now().getTime(),
        deadline.remainingMs(),
      );
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
    if (this.options.leaseMs <= 0) return none;
    // One lease for every analyzer version: two revisions of a deploy exclude each other's writes.
    const base = KeyLeases.key(dedupKey);
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
      await turn.heartbeat.holdUntil(deadline.atMs + this.options.leaseMs);
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
    const warn = (message: string, error?: unknown) => this.calls.warn(message, dedupKey, error);
    const renew = async (untilMs: number) => {
      try {
        const next = await this.calls.call(
          'renew',
          this.store.renew(key, current, new Date(untilMs)),
          deadline,
        );
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
    const target = () => Math.max(this.clock.now().getTime() + this.options.leaseMs, floorMs);
    const beat = () => {
      timer = this.timers.after(this.options.leaseMs / 3, () => {
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
    if (this.options.leaseMs <= 0) return {};
    try {
      const now = this.clock.now();
      const until = new Date(now.getTime() + this.options.leaseMs);
      const taken = await this.calls.call('lease', this.store.lease(key, until, now), deadline);
      return 'token' in taken
        ? { token: taken.token, earlier: taken.earlier }
        : { holderUntil: taken.heldUntil };
    } catch (error) {
      this.calls.passBy(
        error,
        deadline,
        'lease',
        'the memo could not take a lease: working without one',
        dedupKey,
      );
      return {};
    }
  }
}

/** The hash of a dedup key: safe in any object name. */
export function hashOf(dedupKey: string): string {
  return createHash('sha256').update(dedupKey).digest('hex');
}

/** Where leases live in the memo's bucket. */
const LEASE_NAMESPACE = 'lease';
