import type { Clock } from '../worker/src/core/ports';

/** A scheduled simulated callback; `cancel()` is a no-op once it ran. */
export interface SimTimer {
  cancel(): void;
}

interface Scheduled extends QueuedTimer {
  callback: () => void;
}

/** What a timer queue orders: a due time, then the order of scheduling. */
export interface QueuedTimer {
  dueMs: number;
  seq: number;
  cancelled: boolean;
}

/** A binary heap of timers, earliest first (ties in scheduling order); shared by both simulated times. */
export class TimerQueue<T extends QueuedTimer> {
  private readonly h: T[] = [];

  get size(): number {
    return this.h.length;
  }

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
 * Simulated time as the platform models use it: the burst's scaled real time ({@link SimTime}) and
 * the fault simulator's virtual time both provide it.
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
   * from disk, a socket listening). Virtual time only; real-time clocks (SimTime) move anyway.
   */
  hold?(work: Promise<unknown>): void;
}

/**
 * Simulated time for the burst stage: one real millisecond is `scale` simulated ones. Every
 * simulated delay (BigQuery and Gemini latencies, Pub/Sub backoffs and deadlines, Cloud Run's
 * timeouts) is scheduled here, so the whole burst fits in a short run; measured durations are
 * simulated ones. The worker sees simulated wall-clock time through `clock`.
 *
 * The clock advances on the ticks of a 1 ms timer, by the real time since the previous tick but at
 * most `maxStepRealMs`. When the event loop is free, that is real time × scale. When it is busy
 * (the harness runs ten worker instances, the clients and the simulators on 2 shared cores, whose
 * CPU time × 100 would otherwise swamp every figure) or the process is not scheduled, the excess
 * is not counted: it is summed in `frozenRealMs`, and the run simply takes longer in real time.
 * Timers fire on the simulated clock, never early in simulated time.
 */
export class SimTime implements SimClock {
  readonly scale: number;
  /** Real milliseconds not counted as simulated time (ticks later than `maxStepRealMs`). */
  frozenRealMs = 0;
  /** The worker's clock: simulated wall-clock time. */
  readonly clock: Clock;
  private readonly realNowMs: () => number;
  private readonly maxStepRealMs: number;
  private readonly epochMs: number;
  private lastRealMs: number;
  private simulatedMs = 0;
  private readonly heap = new TimerQueue<Scheduled>();
  private seq = 0;
  private readonly ticker: NodeJS.Timeout;

  constructor(
    scale: number,
    options: { epochMs?: number; realNowMs?: () => number; maxStepRealMs?: number } = {},
  ) {
    if (!(scale > 0)) throw new Error(`the time scale must be above 0 (got ${scale})`);
    this.scale = scale;
    this.realNowMs = options.realNowMs ?? (() => performance.now());
    this.maxStepRealMs = options.maxStepRealMs ?? 2;
    this.lastRealMs = this.realNowMs();
    this.epochMs = options.epochMs ?? Date.parse('2026-11-30T08:00:00.000Z');
    this.clock = { now: () => new Date(this.epochMs + this.nowMs()) };
    // The ticker keeps the process alive only while a simulated timer is pending.
    this.ticker = setInterval(() => this.tick(), 1).unref();
  }

  /** Simulated milliseconds since this time started (advances on ticks). */
  nowMs(): number {
    return this.simulatedMs;
  }

  /** Stops the clock for good. */
  stop(): void {
    clearInterval(this.ticker);
  }

  /** A simulated duration in real milliseconds (÷ the scale). */
  realMs(simulatedMs: number): number {
    return simulatedMs / this.scale;
  }

  /** Resolves after `simulatedMs` of simulated time. */
  sleep(simulatedMs: number): Promise<void> {
    return new Promise((resolve) => {
      this.after(simulatedMs, resolve);
    });
  }

  /** Runs `callback` once `simulatedMs` of simulated time have passed. */
  after(simulatedMs: number, callback: () => void): SimTimer {
    const item: Scheduled = {
      dueMs: this.nowMs() + Math.max(0, simulatedMs),
      seq: this.seq++,
      callback,
      cancelled: false,
    };
    this.heap.push(item);
    this.ticker.ref();
    return {
      cancel: () => {
        item.cancelled = true;
      },
    };
  }

  private tick(): void {
    const real = this.realNowMs();
    let step = real - this.lastRealMs;
    this.lastRealMs = real;
    if (step > this.maxStepRealMs) {
      this.frozenRealMs += step - this.maxStepRealMs;
      step = this.maxStepRealMs;
    }
    this.simulatedMs += step * this.scale;
    const now = this.simulatedMs;
    for (let item = this.heap.peek(); item && item.dueMs <= now; item = this.heap.peek()) {
      this.heap.pop();
      item.callback();
    }
    if (!this.heap.peek()) this.ticker.unref();
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
