import type { Clock } from '../../worker/src/core/ports';
import { type QueuedTimer, type SimClock, type SimTimer, TimerQueue } from '../time';

/**
 * Virtual time for the fault simulator: while installed, `setTimeout`/`setInterval`, `Date` and
 * `performance.now()` of this process are simulated, and time moves only when everything that can
 * run without it has run. So the real worker code (its batch timers, lease waits, quota pauses and
 * deadlines, which use the global timers and clock) runs unchanged, a run of many simulated minutes
 * takes a few milliseconds, and two runs of one seed take the same steps in the same order.
 *
 * Determinism holds because nothing in a run does real I/O: requests reach the app in process, and
 * every platform is a model in this folder. `setImmediate` and `process.nextTick` stay real: they
 * are how the run loop lets promise chains and streams finish before the clock moves.
 */

interface Scheduled extends QueuedTimer {
  id: number;
  callback: () => void;
  intervalMs?: number;
}

const realSetImmediate = setImmediate;
const noop = () => {};
const RealDate = Date;

/** How the run loop ended. */
export type RunEnd = 'done' | 'bound' | 'stalled';

export class VirtualTime implements SimClock {
  /** The worker's clock (the same as the global `Date` while installed). */
  readonly clock: Clock;
  private simulatedMs = 0;
  private readonly epochMs: number;
  private readonly heap = new TimerQueue<Scheduled>();
  private readonly held = new Set<Promise<void>>();
  private readonly byId = new Map<number, Scheduled>();
  private seq = 0;
  private nextId = 1;
  private saved: Record<string, unknown> | undefined;
  /**
   * How far off the clock the *worker* reads (`Date`) is for the code running now: clock skew of
   * one instance (0 by default). The simulation's own clock (`clock`, `nowMs`) is never skewed.
   */
  skewMs: () => number = () => 0;
  /**
   * What a callback given to the global `setTimeout`/`setInterval` runs as: bound to the code that
   * set it (the instance whose timer it is, for {@link skewMs}). As it is by default.
   */
  bindTimer: (callback: () => void) => () => void = (callback) => callback;

  constructor(epochMs = Date.parse('2026-11-30T08:00:00.000Z')) {
    this.epochMs = epochMs;
    this.clock = { now: () => new RealDate(this.epochMs + this.simulatedMs) };
  }

  nowMs(): number {
    return this.simulatedMs;
  }

  /** The simulated wall-clock time in epoch milliseconds. */
  epochNowMs(): number {
    return this.epochMs + this.simulatedMs;
  }

  after(simulatedMs: number, callback: () => void): SimTimer {
    const item = this.schedule(callback, simulatedMs);
    return {
      cancel: () => this.cancel(item.id),
    };
  }

  /**
   * Real work the clock waits for: {@link run} does not move simulated time while it is pending.
   * Without it, an instance built with real I/O (a module import, `listen()`) came up whenever the
   * disk answered, at a different simulated time from one run of a seed to the next.
   */
  hold(work: Promise<unknown>): void {
    const held: Promise<void> = work.then(noop, noop).finally(() => this.held.delete(held));
    this.held.add(held);
  }

  sleep(simulatedMs: number): Promise<void> {
    return new Promise((resolve) => {
      this.after(simulatedMs, resolve);
    });
  }

  /** Replaces the global timers and clock with this virtual time, until {@link uninstall}. */
  install(): void {
    if (this.saved) return;
    const g = globalThis as unknown as Record<string, unknown>;
    this.saved = {
      setTimeout: g.setTimeout,
      clearTimeout: g.clearTimeout,
      setInterval: g.setInterval,
      clearInterval: g.clearInterval,
      Date: g.Date,
    };
    const handle = (item: Scheduled) => ({
      ref() {
        return this;
      },
      unref() {
        return this;
      },
      hasRef: () => true,
      refresh() {
        return this;
      },
      close() {
        return this;
      },
      [Symbol.toPrimitive]: () => item.id,
      _virtualId: item.id,
    });
    const clear = (h: unknown) => {
      if (h === undefined || h === null) return;
      const id = typeof h === 'number' ? h : (h as { _virtualId?: number })._virtualId;
      if (typeof id === 'number') this.cancel(id);
    };
    /** `setTimeout`, or `setInterval` (its period at least 1 ms). */
    const timer =
      (repeats: boolean) =>
      (callback: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) =>
        handle(
          this.schedule(
            this.bindTimer(() => callback(...args)),
            ms ?? 0,
            repeats ? Math.max(1, ms ?? 0) : undefined,
          ),
        );
    g.setTimeout = timer(false);
    g.clearTimeout = clear;
    g.setInterval = timer(true);
    g.clearInterval = clear;
    const time = this;
    class VirtualDate extends RealDate {
      constructor(...args: unknown[]) {
        if (args.length === 0) super(time.epochNowMs() + time.skewMs());
        else super(...(args as [number]));
      }
      static override now(): number {
        return time.epochNowMs() + time.skewMs();
      }
    }
    g.Date = VirtualDate;
    Object.defineProperty(performance, 'now', {
      value: () => this.simulatedMs,
      configurable: true,
      writable: true,
    });
  }

  /** Puts the real timers and clock back; pending virtual timers are dropped. */
  uninstall(): void {
    if (!this.saved) return;
    Object.assign(globalThis, this.saved);
    delete (performance as unknown as Record<string, unknown>).now;
    this.saved = undefined;
    this.heap.clear();
    this.byId.clear();
  }

  /**
   * Runs the simulation: lets everything runnable run, then moves the clock to the next timer, until
   * `done()` holds, the clock would pass `boundMs`, or no timer is left (nothing can happen any more).
   */
  async run(done: () => boolean, boundMs: number): Promise<RunEnd> {
    for (;;) {
      await this.settle();
      while (this.held.size > 0) {
        await Promise.all([...this.held]);
        await this.settle();
      }
      if (done()) return 'done';
      const next = this.heap.peek();
      if (!next) return 'stalled';
      if (next.dueMs > boundMs) {
        this.simulatedMs = Math.max(this.simulatedMs, boundMs);
        return 'bound';
      }
      this.heap.pop();
      this.byId.delete(next.id);
      this.simulatedMs = Math.max(this.simulatedMs, next.dueMs);
      if (next.intervalMs !== undefined) {
        next.dueMs = this.simulatedMs + next.intervalMs;
        next.seq = this.seq++;
        this.heap.push(next);
        this.byId.set(next.id, next);
      }
      next.callback();
    }
  }

  /** Moves the clock to `ms` (never back), running everything that falls due on the way. */
  async advanceTo(ms: number): Promise<void> {
    this.after(ms - this.simulatedMs, noop);
    await this.run(() => false, ms);
  }

  /** Lets promise chains, `nextTick`s and `setImmediate`s run out (real turns, no simulated time). */
  async settle(): Promise<void> {
    for (let turns = 0; turns < 1_000; turns++) {
      await new Promise<void>((resolve) => realSetImmediate(resolve));
      if (!process.getActiveResourcesInfo().includes('Immediate')) return;
    }
  }

  private schedule(callback: () => void, ms: number, intervalMs?: number): Scheduled {
    const item: Scheduled = {
      id: this.nextId++,
      dueMs: this.simulatedMs + Math.max(0, Number(ms) || 0),
      seq: this.seq++,
      callback,
      cancelled: false,
      ...(intervalMs !== undefined ? { intervalMs } : {}),
    };
    this.heap.push(item);
    this.byId.set(item.id, item);
    return item;
  }

  private cancel(id: number): void {
    const item = this.byId.get(id);
    if (!item) return;
    item.cancelled = true;
    // A cancelled timer stays in the heap until its due time: let go of what its callback holds.
    item.callback = noop;
    this.byId.delete(id);
  }
}
