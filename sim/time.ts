import type { Clock } from '../worker/src/core/ports';

/** A scheduled simulated callback; `cancel()` is a no-op once it ran. */
export interface SimTimer {
  cancel(): void;
}

/** What a timer queue orders: a due time, then the order of scheduling. */
export interface QueuedTimer {
  dueMs: number;
  seq: number;
  cancelled: boolean;
}

/** A binary heap of timers, earliest first (ties in scheduling order). */
export class TimerQueue<T extends QueuedTimer> {
  private readonly h: T[] = [];

  /** The earliest timer not cancelled (cancelled ones on top are dropped). */
  peek(): T | undefined {
    while (this.h.length > 0 && this.h[0]!.cancelled) this.pop();
    return this.h[0];
  }

  clear(): void {
    this.h.length = 0;
  }

  private before(a: T, b: T): boolean {
    return a.dueMs < b.dueMs || (a.dueMs === b.dueMs && a.seq < b.seq);
  }

  push(item: T): void {
    const h = this.h;
    h.push(item);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  pop(): T {
    const h = this.h;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.before(h[l]!, h[m]!)) m = l;
        if (r < h.length && this.before(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }
}

/**
 * Simulated time as the platform models use it; the virtual time of sim/faults/virtual-time.ts
 * provides it.
 */
export interface SimClock {
  /** Simulated milliseconds since the time started. */
  nowMs(): number;
  /** Runs `callback` once `simulatedMs` of simulated time have passed. */
  after(simulatedMs: number, callback: () => void): SimTimer;
  /** Resolves after `simulatedMs` of simulated time. */
  sleep(simulatedMs: number): Promise<void>;
  /** Simulated wall-clock time, as the worker sees it. */
  readonly clock: Clock;
  /**
   * Real work the clock must wait for before it moves (an instance being built: a module loaded
   * from disk, a socket listening).
   */
  hold?(work: Promise<unknown>): void;
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
