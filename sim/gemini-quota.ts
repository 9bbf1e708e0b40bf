import { geminiError } from '../worker/src/adapters/analyzers/gemini-analyzer';
import type { AnalysisResult } from '../worker/src/contract/analysis';
import { DELIVERY_DEFAULTS } from '../worker/src/contract/settings';
import type { Analyzer, AnalyzerInput } from '../worker/src/core/ports';
import { sampleAnalysis } from '../worker/test/support/fakes';
import { type SimTime, SlidingWindowLimit } from './time';

/**
 * Gemini as the burst sees it, in process, implementing the worker's Analyzer port: every call
 * takes ~6 s (simulated), and above the requests-per-minute quota the call is refused at once with
 * a 429, mapped by the real adapter's own `geminiError` (so the worker answers exactly what it would
 * answer to Gemini's 429). One quota is shared by every worker instance (one project). A refused
 * call is free and does not count towards the quota; a call that answers is a paid analysis.
 */

export interface GeminiSimOptions {
  time: SimTime;
  /** Requests per minute (default 1,000). */
  requestsPerMinute?: number;
  /** Simulated latency of an analysis (default 6 s). */
  latencyMs?: () => number;
  /** Simulated latency of a 429 (default 0.1 s). */
  refusalLatencyMs?: number;
}

export class GeminiSim {
  /** Analyses that answered (each one paid). */
  paid = 0;
  /** Calls refused with 429. */
  refused = 0;
  /** When each paid analysis was accepted (simulated ms), for the pace by minute. */
  readonly paidAtMs: number[] = [];
  /** Paid analyses per object (`bucket/name#generation`). */
  readonly paidByObject = new Map<string, number>();
  private readonly quota: SlidingWindowLimit;
  private readonly time: SimTime;
  private readonly latencyMs: () => number;
  private readonly refusalLatencyMs: number;

  constructor(options: GeminiSimOptions) {
    this.time = options.time;
    this.quota = new SlidingWindowLimit(options.requestsPerMinute ?? 1_000, 60_000, () => this.time.nowMs());
    this.latencyMs = options.latencyMs ?? (() => 6_000);
    this.refusalLatencyMs = options.refusalLatencyMs ?? 100;
  }

  /** An Analyzer for one worker instance; all share this quota and these counts. */
  analyzer(): Analyzer & { version: string } {
    return { version: 'burst-sim-gemini-1', analyze: (input) => this.analyze(input) };
  }

  async analyze(input: AnalyzerInput): Promise<AnalysisResult> {
    if (!this.quota.tryTake()) {
      this.refused++;
      await this.time.sleep(this.refusalLatencyMs);
      throw geminiError(
        Object.assign(new Error('Resource has been exhausted (e.g. check quota).'), {
          name: 'ApiError',
          status: 429,
        }),
      );
    }
    this.paidAtMs.push(this.time.nowMs());
    await this.time.sleep(this.latencyMs());
    this.paid++;
    this.paidByObject.set(input.name, (this.paidByObject.get(input.name) ?? 0) + 1);
    return {
      analysis: sampleAnalysis(),
      model: DELIVERY_DEFAULTS.geminiModel,
      usage: { promptTokens: 1_500, outputTokens: 400, totalTokens: 1_900 },
    };
  }
}
