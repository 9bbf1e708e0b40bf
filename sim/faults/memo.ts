import { MemoryMemoStore } from '../../worker/src/adapters/memory-memo-store';
import type { MemoEntry, MemoStore } from '../../worker/src/core/ports';
import type { SimClock } from '../time';
import type { FaultLog, FaultSchedule } from './schedule';

/**
 * The memo bucket, modelled on Cloud Storage: one for every instance, create-only writes (a
 * precondition `ifGenerationMatch=0`, so the first writer wins), tens of milliseconds per call, and
 * the schedule's faults per call: slow calls (seconds), errors (a 503 the client surfaces), and
 * hangs (no answer, ever: only a caller's own timeout ends the wait). A write takes effect when its
 * latency ends, not when it is sent.
 */
export class MemoBucket {
  /**
   * Dedup keys whose paid analysis the bucket failed to keep or to give back: a call about them
   * failed, hung or was slow (a cache that fails costs a new analysis, by design).
   */
  readonly failedFor = new Set<string>();
  private readonly inner = new MemoryMemoStore();
  private next = 0;

  constructor(
    private readonly time: SimClock,
    private readonly schedule: FaultSchedule['memo'],
    private readonly faults: FaultLog,
    /** The dedup key behind a memo key (for the fault log), when known. */
    private readonly dedupKeyOf: (memoKey: string) => string | undefined,
  ) {}

  /** The MemoStore one instance's AnalysisMemo uses. */
  store(): MemoStore {
    return {
      get: (key) => this.call('get', key, () => this.inner.get(key)),
      create: (key, entry: MemoEntry) => this.call('create', key, () => this.inner.create(key, entry)),
      lease: (key, expiresAt) => this.call('lease', key, () => this.inner.lease(key, expiresAt)),
      renew: (key, expiresAt) => this.call('renew', key, () => this.inner.renew(key, expiresAt)),
    };
  }

  private async call<T>(operation: string, key: string, act: () => Promise<T>): Promise<T> {
    const plan = this.schedule.calls[this.next++] ?? { latencyMs: 50 };
    const keys = [this.dedupKeyOf(key) ?? key];
    if (plan.fault) this.failedFor.add(keys[0]!);
    if (plan.fault === 'hang') {
      this.faults.injected('memo.hang', keys, `${operation} never answers`);
      return new Promise<T>(() => {});
    }
    if (plan.fault === 'slow')
      this.faults.injected('memo.slow', keys, `${operation} takes ${plan.latencyMs} ms`);
    await this.time.sleep(plan.latencyMs);
    if (plan.fault === 'error') {
      this.faults.injected('memo.error', keys, `${operation}: 503`);
      throw Object.assign(new Error('We encountered an internal error. Please try again.'), { code: 503 });
    }
    return act();
  }
}
