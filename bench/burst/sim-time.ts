import type { Clock } from '../../worker/src/core/ports';

/**
 * Simulated time for the burst stage: one real millisecond is `scale` simulated ones. Every
 * simulated delay (BigQuery latency, Gemini latency, Pub/Sub backoff, the worker's own timers) is
 * divided by the scale before it becomes a real timer, so the whole burst fits in a short run.
 * Measured durations are multiplied back. The worker sees simulated wall-clock time through
 * `clock` (its rows' `processed_at` and the dedup window start).
 */
export class SimTime {
  readonly scale: number;
  private readonly startRealMs: number;
  private readonly epochMs: number;
  /** The worker's clock: simulated wall-clock time. */
  readonly clock: Clock;

  constructor(scale: number, options: { epochMs?: number; realNowMs?: () => number } = {}) {
    if (!(scale > 0)) throw new Error(`the time scale must be above 0 (got ${scale})`);
    this.scale = scale;
    this.realNowMs = options.realNowMs ?? (() => performance.now());
    this.startRealMs = this.realNowMs();
    this.epochMs = options.epochMs ?? Date.parse('2026-11-30T08:00:00.000Z');
    this.clock = { now: () => new Date(this.epochMs + this.nowMs()) };
  }

  private readonly realNowMs: () => number;

  /** Simulated milliseconds since this time started. */
  nowMs(): number {
    return (this.realNowMs() - this.startRealMs) * this.scale;
  }

  /** The real duration of a simulated one. */
  realMs(simulatedMs: number): number {
    return simulatedMs / this.scale;
  }

  /** Resolves after `simulatedMs` of simulated time. */
  sleep(simulatedMs: number): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, Math.max(0, simulatedMs / this.scale)));
  }

  /** Runs `callback` after `simulatedMs`; returns the real timer so that it can be cleared. */
  after(simulatedMs: number, callback: () => void): NodeJS.Timeout {
    return setTimeout(callback, Math.max(0, simulatedMs / this.scale));
  }
}

/**
 * Requests in a sliding window: at most `limit` accepted within any `windowMs` (simulated). Used for
 * BigQuery's 25 DML statements per 10 s per table, its ~100 jobs.query per second per user, and
 * Gemini's requests per minute.
 */
export class SlidingWindowLimit {
  private readonly accepted: number[] = [];
  private head = 0;

  constructor(
    readonly limit: number,
    readonly windowMs: number,
    private readonly nowMs: () => number,
  ) {}

  /** Accepts one request now when the window has room; refused requests do not count. */
  tryTake(): boolean {
    const now = this.nowMs();
    while (this.head < this.accepted.length && this.accepted[this.head]! <= now - this.windowMs) this.head++;
    if (this.head > 4096) {
      this.accepted.splice(0, this.head);
      this.head = 0;
    }
    if (this.accepted.length - this.head >= this.limit) return false;
    this.accepted.push(now);
    return true;
  }
}
