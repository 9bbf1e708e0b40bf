import type { AnalysisResult } from '../contract/analysis';
import { TransientError } from '../core/errors';
import type { Analyzer, AnalyzerInput } from '../core/ports';

/**
 * Waits inside the request when the analyzer's quota is spent, instead of answering 503 at once.
 *
 * Why: a 429 from Gemini costs nothing, while a nack costs Pub/Sub's retry backoff (10–600 s) and
 * push backoff, which slows the whole subscription, and counts towards the dead letter. Holding the
 * request costs a concurrency slot, which is cheap by comparison: the burst simulation (bench/) shows
 * a burst answered with 503s draining far slower than one that waits. The wait is bounded
 * (`maxWaitMs`) so the request still ends well inside the worker timeout; past it the 429 becomes a
 * 503 as before. Backoff is exponential with jitter, so waiting deliveries do not retry in step.
 */
export interface QuotaWaitingAnalyzerOptions {
  /** The longest a delivery waits for quota, all retries together. */
  maxWaitMs: number;
  /** The first wait; each next one doubles, up to `maxDelayMs`. */
  initialDelayMs?: number;
  maxDelayMs?: number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

/** The error code adapters give a spent quota (Gemini's 429). */
export const RATE_LIMITED = 'analyzer_rate_limited';

export class QuotaWaitingAnalyzer implements Analyzer {
  readonly version: string;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;

  constructor(
    readonly inner: Analyzer,
    private readonly options: QuotaWaitingAnalyzerOptions,
  ) {
    this.version = inner.version;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.random = options.random ?? Math.random;
  }

  async analyze(input: AnalyzerInput): Promise<AnalysisResult> {
    let waitedMs = 0;
    let delayMs = this.options.initialDelayMs ?? 1_000;
    for (;;) {
      try {
        return await this.inner.analyze(input);
      } catch (error) {
        const rateLimited = error instanceof TransientError && error.code === RATE_LIMITED;
        // Full jitter on the upper half: between half the delay and the whole of it.
        const pauseMs = Math.round(delayMs * (0.5 + this.random() / 2));
        if (!rateLimited || waitedMs + pauseMs > this.options.maxWaitMs) throw error;
        await this.sleep(pauseMs);
        waitedMs += pauseMs;
        delayMs = Math.min(delayMs * 2, this.options.maxDelayMs ?? 8_000);
      }
    }
  }
}
