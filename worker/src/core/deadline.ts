import { TransientError } from './errors';
import { type Clock, realTimers, systemClock, type Timers } from './ports';

/**
 * One deadline per delivery, derived from the request timeout, passed down to every call the
 * delivery makes (lookup, memo, lease wait, admission, read, analysis, write, isolation).
 *
 * Why: Cloud Run answers 504 at its request timeout while the handler runs on, and Pub/Sub then
 * redelivers the message to another instance, which pays and writes again. So a call that could
 * outlive the deadline is not started ({@link check}), every wait ends at the deadline
 * ({@link race}), and the delivery is answered 503 (transient: Pub/Sub retries) before Cloud Run
 * gives up on it. At scale-in the worker brings every deadline forward to its grace period
 * ({@link drain}) and ends the waits at once.
 */

/** The delivery ran out of time: answered 503 so that Pub/Sub retries, before Cloud Run's 504. */
export class DeadlineError extends TransientError {
  constructor(what: string, detail: string) {
    super('deadline_exceeded', `${what}: ${detail}`);
  }
}

/** A statement not started: its delivery has too little time left for one. */
export function notStarted(what: string, leftMs: number): DeadlineError {
  return new DeadlineError(
    what,
    `not started: the delivery has ${Math.max(0, Math.floor(leftMs))} ms left, too little for a statement`,
  );
}

/** The instance is shutting down (SIGTERM): a waiting delivery is answered 503 at once. */
export class ShuttingDownError extends TransientError {
  constructor(what: string) {
    super('shutting_down', `${what}: the instance is shutting down, Pub/Sub will deliver again`);
  }
}

interface Race {
  rearm(): void;
  drained(): void;
}

export class Deadline {
  private atMsValue: number;
  private draining = false;
  private readonly races = new Set<Race>();
  private readonly drainListeners = new Set<() => void>();

  constructor(
    atMs: number,
    private readonly clock: Clock = systemClock,
    private readonly timers: Timers = realTimers,
  ) {
    this.atMsValue = atMs;
  }

  /** A deadline `ms` from now. */
  static after(ms: number, clock: Clock = systemClock, timers: Timers = realTimers): Deadline {
    return new Deadline(clock.now().getTime() + ms, clock, timers);
  }

  /** No deadline (tools and tests that are not about time). */
  static none(): Deadline {
    return new Deadline(Number.POSITIVE_INFINITY);
  }

  /** When it falls, in the clock's milliseconds (Infinity when there is none). */
  get atMs(): number {
    return this.atMsValue;
  }

  /** Whether the instance is shutting down: waits end at once. */
  get isDraining(): boolean {
    return this.draining;
  }

  remainingMs(): number {
    return this.atMsValue - this.clock.now().getTime();
  }

  /**
   * A call that could outlive the deadline is not started: throws {@link DeadlineError} unless at
   * least `needMs` remain (the call's own timeout, when it has one).
   */
  check(what: string, needMs = 0): void {
    const left = this.remainingMs();
    if (left <= 0 || left < needMs) {
      throw new DeadlineError(
        what,
        left <= 0
          ? 'the delivery is past its deadline'
          : `not started: it may take ${needMs} ms and the delivery has ${Math.floor(left)} ms left`,
      );
    }
  }

  /**
   * `call`, unless the deadline (or `capMs` from now, whichever comes first) falls before it
   * settles: then {@link DeadlineError}, and the call's own result is dropped. With `wait: true`
   * the call is a mere wait (for a turn, a lease, a batch) and also ends at once with
   * {@link ShuttingDownError} when the instance drains.
   */
  race<T>(what: string, call: Promise<T>, options: { capMs?: number; wait?: boolean } = {}): Promise<T> {
    const capAt =
      options.capMs === undefined ? Number.POSITIVE_INFINITY : this.clock.now().getTime() + options.capMs;
    if (options.wait && this.draining) {
      call.catch(() => {});
      return Promise.reject(new ShuttingDownError(what));
    }
    if (!Number.isFinite(Math.min(capAt, this.atMsValue))) return call;
    return new Promise<T>((resolve, reject) => {
      let timer: { cancel(): void } | undefined;
      const race: Race = {
        rearm: () => {
          timer?.cancel();
          const atMs = Math.min(capAt, this.atMsValue);
          const capped = capAt < this.atMsValue;
          timer = this.timers.after(Math.max(0, atMs - this.clock.now().getTime()), () =>
            settle(() =>
              reject(
                new DeadlineError(
                  what,
                  capped ? `no answer within ${options.capMs} ms` : 'the delivery reached its deadline',
                ),
              ),
            ),
          );
        },
        drained: () => {
          if (options.wait) settle(() => reject(new ShuttingDownError(what)));
          else race.rearm();
        },
      };
      const settle = (done: () => void) => {
        if (!this.races.delete(race)) return;
        timer?.cancel();
        done();
      };
      this.races.add(race);
      race.rearm();
      call.then(
        (value) => settle(() => resolve(value)),
        (error: unknown) => settle(() => reject(error)),
      );
    });
  }

  /**
   * Scale-in: brings the deadline forward to `atMs` (never later) and ends the delivery's waits at
   * once with {@link ShuttingDownError}; the work under way keeps the time that is left.
   */
  drain(atMs: number): void {
    this.draining = true;
    this.atMsValue = Math.min(this.atMsValue, atMs);
    for (const race of [...this.races]) race.drained();
    for (const listener of [...this.drainListeners]) listener();
    this.drainListeners.clear();
  }

  /**
   * Calls `listener` when the instance drains (for a wait that keeps its own queue, like the quota
   * gate's line); returns the function that unsubscribes it.
   */
  onDrain(listener: () => void): () => void {
    this.drainListeners.add(listener);
    return () => this.drainListeners.delete(listener);
  }
}

/**
 * The deadlines of the deliveries in flight in one instance: each starts with the request, and
 * at scale-in {@link drain} brings them all forward to the end of the grace period.
 */
export class Deadlines {
  private readonly live = new Set<Deadline>();
  private drainAtMs: number | undefined;
  private idleWaiters: Array<() => void> = [];

  constructor(
    /** The time one delivery may take: the request timeout less a margin to answer in. */
    private readonly budgetMs: number,
    private readonly clock: Clock = systemClock,
    private readonly timers: Timers = realTimers,
  ) {}

  /** The deadline of a delivery that starts now; {@link end} it when the delivery is answered. */
  start(): Deadline {
    const deadline = Deadline.after(this.budgetMs, this.clock, this.timers);
    if (this.drainAtMs !== undefined) deadline.drain(this.drainAtMs);
    this.live.add(deadline);
    return deadline;
  }

  end(deadline: Deadline): void {
    this.live.delete(deadline);
    if (this.live.size === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  /** Deliveries in flight. */
  get inFlight(): number {
    return this.live.size;
  }

  /** Whether the instance is shutting down: a delivery that arrives now is answered 503 at once. */
  get isDraining(): boolean {
    return this.drainAtMs !== undefined;
  }

  /** Resolves when no delivery is in flight. */
  idle(): Promise<void> {
    if (this.live.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Every delivery in flight (and any that still starts) must be answered within `graceMs`. */
  drain(graceMs: number): void {
    this.drainAtMs = this.clock.now().getTime() + graceMs;
    for (const deadline of this.live) deadline.drain(this.drainAtMs);
  }
}
