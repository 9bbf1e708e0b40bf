import { createHash } from 'node:crypto';
import type { AnalysisResult } from '../contract/analysis';
import { type Clock, type Logger, type MemoStore, systemClock } from './ports';

/**
 * The memo of paid analyses: after an analysis and before the write, its result is kept under the
 * dedup key and the analyzer's version, so that a delivery retried after a failed write (a busy
 * store, a full DML queue) does not pay for the same analysis again.
 *
 * It is a cache, never a claim: a miss, an unreadable entry or a memo that is down means the
 * delivery does the work itself; nothing is written before the analysis is paid, so a crash still
 * leaves only the message. Entries older than the dedup window are ignored (and pruned by the
 * store). Within one instance, concurrent deliveries of one key share one analysis (single flight);
 * the wait lasts as long as that analysis and ends on its own.
 */

export interface AnalysisMemoOptions {
  /** Entries older than this are ignored: the dedup window. */
  ttlMs: number;
  clock?: Clock;
  logger?: Logger;
}

/** Where a delivery's analysis came from. */
export type AnalysisSource = 'analyzer' | 'memo' | 'shared';

export class AnalysisMemo {
  private readonly inFlight = new Map<string, Promise<AnalysisResult>>();
  private readonly clock: Clock;

  constructor(
    private readonly store: MemoStore,
    private readonly options: AnalysisMemoOptions,
  ) {
    this.clock = options.clock ?? systemClock;
  }

  /** The storage key: the analysis version, then a hash of the dedup key (safe in any object name). */
  static key(dedupKey: string, version: string): string {
    return `${version}/${createHash('sha256').update(dedupKey).digest('hex')}`;
  }

  /**
   * The analysis of `dedupKey` by analyzer `version`: from the memo when it holds one, from the
   * same analysis when one is already running in this instance, else from `work()` (which reads and
   * pays), kept in the memo afterwards. Errors of `work()` propagate; the memo's own never do.
   */
  async analyse(
    dedupKey: string,
    version: string,
    work: () => Promise<AnalysisResult>,
  ): Promise<{ result: AnalysisResult; source: AnalysisSource }> {
    const key = AnalysisMemo.key(dedupKey, version);
    const running = this.inFlight.get(key);
    if (running) return { result: await running, source: 'shared' };

    const kept = await this.lookup(key, dedupKey);
    if (kept) return { result: kept, source: 'memo' };

    // A lookup ran meanwhile: another delivery may have started the work in between.
    const started = this.inFlight.get(key);
    if (started) return { result: await started, source: 'shared' };
    const promise = work().then(async (result) => {
      await this.keep(key, dedupKey, result);
      return result;
    });
    this.inFlight.set(key, promise);
    try {
      return { result: await promise, source: 'analyzer' };
    } finally {
      this.inFlight.delete(key);
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
