import { MemoryMemoStore } from '../../worker/src/adapters/memory-memo-store';
import { MEMO_CALL_TIMEOUT_MS } from '../../worker/src/contract/settings';
import type { MemoEntry, MemoStore } from '../../worker/src/core/ports';
import type { SimClock } from '../time';
import type { FaultLog, FaultSchedule } from './schedule';

/**
 * The memo bucket, modelled on Cloud Storage: one for every instance, create-only writes (a
 * precondition `ifGenerationMatch=0`, so the first writer wins), tens of milliseconds per call, and
 * the schedule's faults per call: slow calls (seconds), errors (a 503 the client surfaces), and
 * hangs (no answer, ever: only a caller's own timeout ends the wait). A write takes effect when its
 * latency ends, not when it is sent.
 *
 * It keeps, per document, the faults that lost a paid answer for the worker (the only excuse the
 * paid-once check accepts): a keep that failed (the analysis is not kept), a read that failed while
 * the analysis was kept and its row not yet written (once written, the store's lookup answers), a
 * lease call that failed (a concurrent delivery
 * cannot see the holder). A slow call counts only when it outlasted the worker's memo call timeout
 * (a call it waited for returned the answer).
 */
export class MemoBucket {
  /** Per dedup key, the faults that lost a paid answer (see above), each in words. */
  readonly losses = new Map<string, string[]>();
  /** Keeps that landed: the dedup key and the instance that sent it. */
  readonly kept: Array<{ dedupKey: string; instance: number; atMs: number }> = [];
  /** Per dedup key, the lease calls that failed from the worker's view, each in words. */
  readonly leaseFailures = new Map<string, string[]>();
  /** Lease objects that were ever created (names), for the rounds a key used. */
  readonly leaseNames = new Set<string>();
  private readonly inner = new MemoryMemoStore();
  private next = 0;

  constructor(
    private readonly time: SimClock,
    private readonly schedule: FaultSchedule['memo'],
    private readonly faults: FaultLog,
    /** The dedup key behind a memo key (for the fault log), when known. */
    private readonly dedupKeyOf: (memoKey: string) => string | undefined,
    /** Whether the key's row is in the table now (the store's lookup would find it). */
    private readonly hasRow: (dedupKey: string) => boolean = () => false,
  ) {}

  /** A loss of a paid answer for `dedupKey` (also for callers outside the bucket, e.g. a killed keeper). */
  lost(dedupKey: string, cause: string): void {
    this.losses.set(dedupKey, [...(this.losses.get(dedupKey) ?? []), cause]);
  }

  /** The MemoStore one instance's AnalysisMemo uses. */
  store(instance = -1): MemoStore {
    return {
      get: (key) => this.call('get', key, () => this.inner.get(key)),
      create: (key, entry: MemoEntry) =>
        this.call('create', key, async () => {
          await this.inner.create(key, entry);
          const dedupKey = this.dedupKeyOf(key);
          if (dedupKey) this.kept.push({ dedupKey, instance, atMs: this.time.nowMs() });
        }),
      lease: (key, expiresAt) =>
        this.call('lease', key, async () => {
          const held = await this.inner.lease(key, expiresAt);
          if (!held) this.leaseNames.add(key);
          return held;
        }),
      renew: (key, expiresAt) => this.call('renew', key, () => this.inner.renew(key, expiresAt)),
    };
  }

  private async call<T>(operation: string, key: string, act: () => Promise<T>): Promise<T> {
    const plan = this.schedule.calls[this.next++] ?? { latencyMs: 50 };
    const dedupKey = this.dedupKeyOf(key);
    const keys = [dedupKey ?? key];
    const failed = plan.fault === 'error' || plan.fault === 'hang' || plan.latencyMs > MEMO_CALL_TIMEOUT_MS;
    if (plan.fault && failed && dedupKey) {
      const what = `memo.${plan.fault} on ${operation}`;
      if (operation === 'create') this.lost(dedupKey, `${what}: the analysis was not kept`);
      else if (operation === 'get' && this.inner.entries.has(key) && !this.hasRow(dedupKey))
        this.lost(dedupKey, `${what}: the kept analysis could not be read`);
      else if (operation === 'lease' || operation === 'renew') {
        this.lost(dedupKey, `${what}: a concurrent delivery could not see the holder`);
        this.leaseFailures.set(dedupKey, [
          ...(this.leaseFailures.get(dedupKey) ?? []),
          `${what} at ${this.time.nowMs()} ms`,
        ]);
      }
    }
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
