import { Deadline, DeadlineError, ShuttingDownError } from '../core/deadline';
import { TransientError } from '../core/errors';
import type { Admission, Clock, Timers } from '../core/ports';
import { realTimers, systemClock } from '../core/ports';

/** The error code adapters give a spent quota (Gemini's 429). */
export const RATE_LIMITED = 'analyzer_rate_limited';

export function isRateLimited(error: unknown): boolean {
  return error instanceof TransientError && error.code === RATE_LIMITED;
}

/** A cancellable timer (injectable, so the burst simulation runs the gate on simulated time). */
export type GateTimers = Timers;

export interface QuotaGateOptions {
  /**
   * Paid works (read + analyse) one instance runs at once. Each holds its document in memory, so
   * this, not Cloud Run's concurrency, bounds the bytes in memory; deliveries past it wait here,
   * holding only their push body.
   */
  maxInFlight: number;
  /** The longest a delivery waits to be admitted, all its waits together; past it, 503. */
  maxWaitMs: number;
  /** The pause after a first 429; it doubles on each next one, up to `maxPauseMs`, and ends on a success. */
  initialPauseMs?: number;
  maxPauseMs?: number;
  clock?: Clock;
  timers?: GateTimers;
  random?: () => number;
}

interface Waiter {
  admit(): void;
  timer: { cancel(): void };
}

/**
 * Admission to the paid work when the analyzer's quota is shared and may be spent.
 *
 * Why it exists: during a burst Pub/Sub pushes far more deliveries than the analyzer's quota can
 * take (its push window grows with every ack). Answering them 503 costs Pub/Sub's retry backoff
 * and pauses the whole push subscription; letting them all call Gemini turns most calls into 429s
 * and holds every document in memory. So the deliveries wait here, in arrival order, holding a
 * Cloud Run slot and their push body only, and at most `maxInFlight` read and analyse at once.
 *
 * The number admitted at once adapts to the quota, as TCP's congestion window does: a 429 halves it
 * (once per round: works admitted before the cut do not cut again) and pauses admissions for a
 * jittered, doubling moment; each success adds 1/limit, so a full round of successes adds one. The
 * rate-limited delivery goes back to the front of the line. A delivery still not admitted after
 * `maxWaitMs` gets the 429 as a transient failure (503: Pub/Sub retries it later).
 */
export class QuotaGate implements Admission {
  private limit: number;
  private running = 0;
  private readonly waiting: Waiter[] = [];
  private pausedUntilMs = 0;
  private pauseMs = 0;
  /** Admissions so far; each work's number tells whether it was admitted after the last cut. */
  private admissions = 0;
  private admissionsAtLastCut = 0;
  private wakeup: { cancel(): void } | undefined;
  private readonly clock: Clock;
  private readonly timers: GateTimers;
  private readonly random: () => number;

  constructor(private readonly options: QuotaGateOptions) {
    if (!(Number.isInteger(options.maxInFlight) && options.maxInFlight >= 1)) {
      throw new Error(`maxInFlight must be a whole number ≥ 1 (got ${options.maxInFlight})`);
    }
    this.limit = options.maxInFlight;
    this.clock = options.clock ?? systemClock;
    this.timers = options.timers ?? realTimers;
    this.random = options.random ?? Math.random;
  }

  /** Works admitted at once right now (for logs and tests). */
  get admitting(): number {
    return Math.floor(this.limit);
  }

  /** Deliveries waiting to be admitted. */
  get queued(): number {
    return this.waiting.length;
  }

  /**
   * Runs `work` once admitted. The wait ends at `maxWaitMs` (a spent quota: 503), at the delivery's
   * deadline (503), or at once when the instance drains (503).
   */
  async run<T>(work: (waitedMs: number) => Promise<T>, deadline: Deadline = Deadline.none()): Promise<T> {
    const startMs = this.nowMs();
    const deadlineMs = startMs + this.options.maxWaitMs;
    let retry = false;
    for (;;) {
      await this.acquire(deadlineMs, retry, deadline);
      const admission = ++this.admissions;
      try {
        const result = await work(this.nowMs() - startMs);
        this.succeeded();
        return result;
      } catch (error) {
        if (!isRateLimited(error)) throw error;
        this.rateLimited(admission);
        if (this.nowMs() >= deadlineMs) throw error;
        retry = true;
      } finally {
        this.running--;
        this.pump();
      }
    }
  }

  private nowMs(): number {
    return this.clock.now().getTime();
  }

  private hasRoom(): boolean {
    return this.running < Math.floor(this.limit) && this.nowMs() >= this.pausedUntilMs;
  }

  private acquire(waitUntilMs: number, front: boolean, deadline: Deadline): Promise<void> {
    const what = 'waiting for a turn at the analyzer';
    if (deadline.isDraining) return Promise.reject(new ShuttingDownError(what));
    deadline.check(what);
    if ((front || this.waiting.length === 0) && this.hasRoom()) {
      this.running++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      // The wait ends at maxWaitMs or at the delivery's deadline, whichever comes first.
      const byDeadline = deadline.atMs < waitUntilMs;
      const leave = (error: Error) => {
        const at = this.waiting.indexOf(waiter);
        if (at < 0) return;
        this.waiting.splice(at, 1);
        waiter.timer.cancel();
        offDrain();
        reject(error);
      };
      const offDrain = deadline.onDrain(() => leave(new ShuttingDownError(what)));
      const waiter: Waiter = {
        admit: () => {
          waiter.timer.cancel();
          offDrain();
          this.running++;
          resolve();
        },
        timer: this.timers.after(Math.max(0, Math.min(waitUntilMs, deadline.atMs) - this.nowMs()), () =>
          leave(
            byDeadline
              ? new DeadlineError(what, 'the delivery reached its deadline before its turn')
              : new TransientError(
                  RATE_LIMITED,
                  `the analyzer's quota stayed spent: not admitted within ${this.options.maxWaitMs} ms ` +
                    `(${this.running} analyses running here, ${this.waiting.length - 1} deliveries still waiting)`,
                ),
          ),
        ),
      };
      if (front) this.waiting.unshift(waiter);
      else this.waiting.push(waiter);
      this.pump();
    });
  }

  /** Admits waiting deliveries while there is room; wakes itself when a pause ends. */
  private pump(): void {
    while (this.waiting.length > 0 && this.hasRoom()) this.waiting.shift()!.admit();
    if (this.waiting.length === 0 || this.wakeup) return;
    const pauseLeftMs = this.pausedUntilMs - this.nowMs();
    if (pauseLeftMs <= 0) return; // room comes back when a running work ends
    this.wakeup = this.timers.after(pauseLeftMs, () => {
      this.wakeup = undefined;
      this.pump();
    });
  }

  private succeeded(): void {
    this.pauseMs = 0;
    this.limit = Math.min(this.options.maxInFlight, this.limit + 1);
  }

  private rateLimited(admission: number): void {
    if (admission > this.admissionsAtLastCut) {
      this.limit = Math.max(1, this.limit / 2);
      this.admissionsAtLastCut = this.admissions;
    }
    const initial = this.options.initialPauseMs ?? 100;
    this.pauseMs =
      this.pauseMs === 0 ? initial : Math.min(this.pauseMs * 2, this.options.maxPauseMs ?? 1_000);
    // Jitter on the upper half, so instances that were refused together do not come back together.
    const until = this.nowMs() + Math.round(this.pauseMs * (0.5 + this.random() / 2));
    this.pausedUntilMs = Math.max(this.pausedUntilMs, until);
  }
}
