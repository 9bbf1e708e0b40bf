import { GcsMemoStore } from '../../worker/src/adapters/memo-stores/gcs-memo-store';
import { MEMO_CALL_TIMEOUT_MS } from '../../worker/src/contract/settings';
import { AnalysisCache } from '../../worker/src/core/memo';
import type { MemoStore } from '../../worker/src/core/ports';
import { type BucketCall, BucketObjects } from '../models/cloud-storage';
import { seededRandom } from '../random';
import type { SimClock } from '../time';
import type { DatedCause } from './invariants';
import type { FaultLog, FaultSchedule } from './schedule';

/** `{ [name]: wrap(method) }` when `target` has a method `name`, else nothing. */
function optional<N extends string>(
  target: object,
  name: N,
  wrap: (call: (key: string) => Promise<boolean>) => (key: string) => Promise<boolean>,
): Partial<Record<N, (key: string) => Promise<boolean>>> {
  const method = (target as Record<string, unknown>)[name];
  if (typeof method !== 'function') return {};
  const call = (key: string) => (method as (key: string) => Promise<boolean>).call(target, key);
  return { [name]: wrap(call) } as Partial<Record<N, (key: string) => Promise<boolean>>>;
}

/**
 * The memo bucket: the worker's real `GcsMemoStore`, one per instance, over the Cloud Storage
 * bucket they share (`sim/models/cloud-storage.ts`: generations, custom metadata, 412 to a write
 * whose `ifGenerationMatch` does not hold, 429 past one write a second per object, 404), so the
 * adapter's object names, create-only writes and compare-and-swap lease rewrites all run. Here:
 *
 * - tens of milliseconds per call, and the schedule's faults per call: slow calls (seconds), errors
 *   (a 503 the client surfaces), hangs (no answer, ever: only a caller's own timeout ends the wait).
 *   A write takes effect when its latency ends, not when it is sent.
 *
 * It keeps, per document, the memo calls (as the worker's port sees them) that lost a paid answer
 * for the worker, the only excuse the paid-once check accepts: a keep that failed (the analysis is
 * not kept), a read that failed while the analysis was kept and its row not yet written (once
 * written, the store's lookup answers), a lease call that failed (a concurrent delivery cannot see
 * the holder). A call fails when it throws or outlasts the worker's memo call timeout.
 */
export class MemoBucket {
  /** Per dedup key, the memo calls that lost a paid answer (see above), each with when it began. */
  readonly losses = new Map<string, DatedCause[]>();
  /** Per dedup key, the lease calls that failed from the worker's view, each with when it began. */
  readonly leaseFailures = new Map<string, DatedCause[]>();
  /**
   * Keeps of an analysis that landed: the dedup key and the instance that sent it. The paid
   * attempts of an analysis that did not end (its progress, under a key of its own) are no answer:
   * a delivery that finds only them and the generation gone has nothing to write but `object_gone`.
   */
  readonly kept: Array<{ dedupKey: string; instance: number; atMs: number }> = [];
  /** The bucket's objects, and its answers to writes: 429 past one a second per object, 412. */
  private readonly bucket = new BucketObjects({
    rateLimited: (name) =>
      this.faults.injected('memo.objectRateLimited', [this.keyFor(this.memoKeyOf(name))], `429 on ${name}`),
    preconditionFailed: (name) =>
      this.faults.injected('memo.preconditionFailed', [this.keyFor(this.memoKeyOf(name))], `412 on ${name}`),
  });
  private next = 0;
  private readonly random: () => number;

  constructor(
    private readonly time: SimClock,
    private readonly schedule: FaultSchedule['memo'],
    private readonly faults: FaultLog,
    /** The dedup key behind a memo key (for the fault log), when known. */
    private readonly dedupKeyOf: (memoKey: string) => string | undefined,
    /** Whether the key's row is in the table now (the store's lookup would find it). */
    private readonly hasRow: (dedupKey: string) => boolean = () => false,
    seed = 0,
  ) {
    this.random = seededRandom(seed ^ 0x3e3e);
  }

  /** A loss of a paid answer for `dedupKey` (also for callers outside the bucket, e.g. a killed keeper). */
  lost(dedupKey: string, cause: string, atMs = this.time.nowMs()): void {
    this.losses.set(dedupKey, [...(this.losses.get(dedupKey) ?? []), { atMs, what: cause }]);
  }

  /** The MemoStore one instance's AnalysisMemo uses: the real GcsMemoStore on this bucket. */
  store(instance = -1): MemoStore {
    const real = new GcsMemoStore({
      storage: this.bucket.storage((operation, name, act) => this.call(operation, name, act)),
      bucket: MEMO_BUCKET,
      sleep: (ms) => this.time.sleep(ms),
      random: this.random,
    });
    return {
      get: (key) => this.watch('get', key, real.get(key)),
      create: (key, entry) =>
        this.watch('create', key, real.create(key, entry)).then(() => {
          const dedupKey = this.dedupKeyOf(key);
          if (dedupKey && key !== AnalysisCache.progressKey(dedupKey))
            this.kept.push({ dedupKey, instance, atMs: this.time.nowMs() });
        }),
      lease: (key, expiresAt, now) => this.watch('lease', key, real.lease(key, expiresAt, now)),
      renew: (key, token, expiresAt, release) =>
        this.watch('renew', key, real.renew(key, token, expiresAt, release)),
      // An optional call of the port, when the adapter has it (whether a key was ever leased).
      ...optional(real, 'hasLease', (call) => (key: string) => this.watch('hasLease', key, call(key))),
    };
  }

  /**
   * When the bucket first held what tells a delivery that `dedupKey` was worked on: its kept
   * analysis or its lease (undefined: never). From then on the worker asks the store before paying
   * for it.
   */
  workedOnSince(memoKeyOf: { analysis: string; lease: string }): number | undefined {
    const times = [`analyses/${memoKeyOf.analysis}.json`, `leases/${memoKeyOf.lease}.json`]
      .map((name) => this.bucket.object(MEMO_BUCKET, name)?.createdMs)
      .filter((ms): ms is number => ms !== undefined);
    return times.length > 0 ? Math.min(...times) : undefined;
  }

  /** Notes a memo call that failed for the worker (threw, or outlasted its memo call timeout). */
  private watch<T>(operation: string, key: string, call: Promise<T>): Promise<T> {
    const dedupKey = this.dedupKeyOf(key);
    if (!dedupKey) return call;
    const existed = this.bucket.object(MEMO_BUCKET, `analyses/${key}.json`) !== undefined;
    // A failed call is dated from its start: the worker may give up on it (and act) before the
    // bucket's own timeout notes it, never before it began.
    const startedMs = this.time.nowMs();
    let noted = false;
    const note = (how: string) => {
      if (noted) return;
      noted = true;
      const what = `memo ${operation} ${how} at ${this.time.nowMs()} ms`;
      const lose = (cause: string) => this.lost(dedupKey, cause, startedMs);
      if (operation === 'create') lose(`${what}: the analysis was not kept`);
      else if (operation === 'get' && existed && !this.hasRow(dedupKey))
        lose(`${what}: the kept analysis could not be read`);
      else if (operation === 'lease' || operation === 'renew') {
        lose(`${what}: a concurrent delivery could not see the holder`);
        this.leaseFailures.set(dedupKey, [
          ...(this.leaseFailures.get(dedupKey) ?? []),
          { atMs: startedMs, what },
        ]);
      }
      // Whether the key was ever leased (a delivery whose version kept nothing asks, to find a
      // written document): unanswered, the delivery may pay for a document already written.
      else if (operation === 'hasLease') lose(`${what}: it could not tell the key was leased`);
    };
    const timer = this.time.after(MEMO_CALL_TIMEOUT_MS, () => note('timed out'));
    call.then(
      () => timer.cancel(),
      () => {
        timer.cancel();
        note('failed');
      },
    );
    return call;
  }

  /** The memo key an object is about (`<bucket>/analyses/<key>.json`, `<bucket>/leases/<key>.json`). */
  private memoKeyOf(name: string): string {
    const m = /(?:^|\/)(?:analyses|leases)\/([^/]+\/[0-9a-f]{64})/.exec(name);
    return m?.[1] ?? name;
  }

  private keyFor(memoKey: string): string {
    return this.dedupKeyOf(memoKey) ?? memoKey;
  }

  /** One call to the bucket: the schedule's latency and fault, then the act (when the latency ends). */
  private async call<T>(operation: BucketCall, name: string, act: (atMs: number) => T): Promise<T> {
    const plan = this.schedule.calls[this.next++] ?? { latencyMs: 50 };
    const keys = [this.keyFor(this.memoKeyOf(name))];
    if (plan.fault === 'hang') {
      this.faults.injected('memo.hang', keys, `${operation} ${name} never answers`);
      return new Promise<T>(() => {});
    }
    if (plan.fault === 'slow')
      this.faults.injected('memo.slow', keys, `${operation} ${name} takes ${plan.latencyMs} ms`);
    await this.time.sleep(plan.latencyMs);
    if (plan.fault === 'error') {
      this.faults.injected('memo.error', keys, `${operation} ${name}: 503`);
      throw Object.assign(new Error('We encountered an internal error. Please try again.'), { code: 503 });
    }
    return act(this.time.nowMs());
  }
}

const MEMO_BUCKET = 'docline-sim-memo';
