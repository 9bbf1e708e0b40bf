import { createHash } from 'node:crypto';
import type { AnalysisResult } from '../contract/analysis';
import { type Admission, admitAtOnce, type Clock, type Logger, type MemoStore, systemClock } from './ports';

/**
 * The memo of paid analyses: after an analysis and before the write, its result is kept under the
 * dedup key and the analyzer's version, so that a delivery retried after a failed write (a busy
 * store, a full DML queue) does not pay for the same analysis again.
 *
 * It is a cache, never a claim: a miss, an unreadable entry or a memo that is down means the
 * delivery does the work itself; nothing is written before the analysis is paid, so a crash still
 * leaves only the message. Entries older than the dedup window are ignored (and pruned by the
 * store). Within one instance, concurrent deliveries of one key share one analysis (single flight);
 * across instances a short lease makes a concurrent delivery wait for the holder's analysis, at
 * most until the lease expires on its own; then it does the work. Neither wait can block a document.
 */

export interface AnalysisMemoOptions {
  /** Entries older than this are ignored: the dedup window. */
  ttlMs: number;
  /**
   * How long a lease makes a concurrent delivery of the same key (in another instance) wait for the
   * holder's analysis before doing the work itself; 0 turns leases off. A few typical analyses: a
   * holder that failed cannot release its lease (the worker may not delete memo objects), so a retry
   * waits out the rest of it.
   */
  leaseMs?: number;
  /** How often a waiting delivery looks for the holder's analysis. */
  pollMs?: number;
  clock?: Clock;
  /** Waits this long (injectable for simulations). */
  sleep?: (ms: number) => Promise<void>;
  logger?: Logger;
}

/** The defaults of the lease: long enough for one analysis, short enough to fit a push request. */
export const MEMO_LEASE_DEFAULTS = Object.freeze({ leaseMs: 15_000, pollMs: 1_000 });

/** Where a delivery's analysis came from. */
export type AnalysisSource = 'analyzer' | 'memo' | 'shared';

export class AnalysisMemo {
  private readonly inFlight = new Map<string, Promise<{ result: AnalysisResult; source: AnalysisSource }>>();
  private readonly clock: Clock;
  private readonly leaseMs: number;
  private readonly pollMs: number;
  private readonly sleep: (ms: number) => Promise<void>;
  /** Keys whose lease this instance took for a work that then failed: its retries here do not wait. */
  private readonly failedHere = new Set<string>();

  constructor(
    private readonly store: MemoStore,
    private readonly options: AnalysisMemoOptions,
  ) {
    this.clock = options.clock ?? systemClock;
    this.leaseMs = options.leaseMs ?? MEMO_LEASE_DEFAULTS.leaseMs;
    this.pollMs = options.pollMs ?? MEMO_LEASE_DEFAULTS.pollMs;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  /** The storage key: the analysis version, then a hash of the dedup key (safe in any object name). */
  static key(dedupKey: string, version: string): string {
    return `${version}/${createHash('sha256').update(dedupKey).digest('hex')}`;
  }

  /**
   * The analysis of `dedupKey` by analyzer `version`: from the memo when it holds one, from the
   * same analysis when one is already running in this instance, else from `work()` (which reads and
   * pays), kept in the memo afterwards. Errors of `work()` propagate; the memo's own never do.
   *
   * `admission` admits the work; the lease is taken only once admitted, so a delivery waiting its
   * turn holds no lease that could expire under it, and one that waited looks in the memo again
   * (a concurrent delivery elsewhere may have paid meanwhile).
   */
  async analyse(
    dedupKey: string,
    version: string,
    work: () => Promise<AnalysisResult>,
    admission: Admission = admitAtOnce,
  ): Promise<{ result: AnalysisResult; source: AnalysisSource }> {
    const key = AnalysisMemo.key(dedupKey, version);
    const running = this.inFlight.get(key);
    if (running) return { result: (await running).result, source: 'shared' };

    const kept = await this.lookup(key, dedupKey);
    if (kept) return { result: kept, source: 'memo' };

    // A lookup ran meanwhile: another delivery may have started the work in between.
    const started = this.inFlight.get(key);
    if (started) return { result: (await started).result, source: 'shared' };
    const promise = admission.run(async (waitedMs) => {
      const keptMeanwhile = waitedMs > 0 ? await this.lookup(key, dedupKey) : undefined;
      if (keptMeanwhile) return { result: keptMeanwhile, source: 'shared' as const };
      return this.leaseThenWork(key, dedupKey, work);
    });
    this.inFlight.set(key, promise);
    try {
      return await promise;
    } finally {
      this.inFlight.delete(key);
    }
  }

  /**
   * Across instances: the first delivery takes a short lease and works; a concurrent one (two
   * notifications of one upload reaching two instances) waits for the holder's analysis to appear
   * in the memo, at most until the lease expires, then works itself. A lease that cannot be taken
   * or read never stops the work.
   */
  private async leaseThenWork(
    key: string,
    dedupKey: string,
    work: () => Promise<AnalysisResult>,
  ): Promise<{ result: AnalysisResult; source: AnalysisSource }> {
    const holderUntil = await this.takeLease(key, dedupKey);
    if (holderUntil) {
      while (this.clock.now() < holderUntil) {
        await this.sleep(Math.min(this.pollMs, holderUntil.getTime() - this.clock.now().getTime()));
        const kept = await this.lookup(key, dedupKey);
        if (kept) return { result: kept, source: 'shared' };
      }
    }
    let result: AnalysisResult;
    try {
      result = await work();
    } catch (error) {
      // The lease cannot be released (the worker may not delete memo objects); this instance
      // remembers instead, so a retry landing here does not wait out its own failed lease.
      this.failedHere.add(key);
      throw error;
    }
    this.failedHere.delete(key);
    await this.keep(key, dedupKey, result);
    return { result, source: 'analyzer' };
  }

  /** The expiry of a lease another delivery holds, or undefined when this one may work now. */
  private async takeLease(key: string, dedupKey: string): Promise<Date | undefined> {
    if (this.leaseMs <= 0 || this.failedHere.has(key)) return undefined;
    try {
      const held = await this.store.lease(key, new Date(this.clock.now().getTime() + this.leaseMs));
      return held && held > this.clock.now() ? held : undefined;
    } catch (error) {
      this.options.logger?.warn('the memo could not take a lease: analysing without one', {
        dedupKey,
        error: error instanceof Error ? error.message : String(error),
      });
      return undefined;
    }
  }

  private async lookup(key: string, dedupKey: string): Promise<AnalysisResult | undefined> {
    try {
      const entry = await this.store.get(key);
      if (!entry) return undefined;
      const ageMs = this.clock.now().getTime() - Date.parse(entry.createdAt);
      if (!(ageMs <= this.options.ttlMs)) return undefined;
      return { analysis: entry.analysis, model: entry.model, usage: entry.usage };
    } catch (error) {
      this.options.logger?.warn('the memo of paid analyses could not be read: analysing again', {
        dedupKey,
        error: error instanceof Error ? error.message : String(error),
      });
      return undefined;
    }
  }

  private async keep(key: string, dedupKey: string, result: AnalysisResult): Promise<void> {
    try {
      await this.store.create(key, { ...result, createdAt: this.clock.now().toISOString() });
    } catch (error) {
      this.options.logger?.warn(
        'the memo of paid analyses could not keep an analysis: a retry would pay again',
        {
          dedupKey,
          error: error instanceof Error ? error.message : String(error),
        },
      );
    }
  }
}
