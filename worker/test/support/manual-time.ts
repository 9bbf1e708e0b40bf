import type { Clock, Timers } from '../../src/core/ports';

/** Lets pending promise callbacks run (one turn of the event loop). */
export const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A clock and timers the test moves by hand: no real time passes, every wait is simulated. */
export class ManualTime implements Timers {
  ms = Date.parse('2026-11-30T09:00:00.000Z');
  private timers: Array<{ dueMs: number; callback: () => void; cancelled: boolean }> = [];
  readonly clock: Clock = { now: () => new Date(this.ms) };
  after(ms: number, callback: () => void) {
    const timer = { dueMs: this.ms + ms, callback, cancelled: false };
    this.timers.push(timer);
    return {
      cancel: () => {
        timer.cancelled = true;
      },
    };
  }
  /** A sleep on this clock (for the memo's lease polls). */
  readonly sleep = (ms: number) => new Promise<void>((resolve) => this.after(ms, resolve));
  /** Moves the clock, firing each timer that falls due, in order. */
  async advance(ms: number): Promise<void> {
    const end = this.ms + ms;
    for (;;) {
      const due = this.timers
        .filter((t) => !t.cancelled && t.dueMs <= end)
        .sort((a, b) => a.dueMs - b.dueMs)[0];
      if (!due) break;
      due.cancelled = true;
      this.ms = Math.max(this.ms, due.dueMs);
      due.callback();
      await settle();
    }
    this.ms = end;
    await settle();
  }
}

/** A clock alone, that the test moves by setting `ms` (no timers). */
export class ManualClock implements Clock {
  constructor(public ms = Date.parse('2026-11-30T04:00:00.000Z')) {}
  now() {
    return new Date(this.ms);
  }
}
