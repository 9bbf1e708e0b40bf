import { geminiError } from '../worker/src/adapters/analyzers/gemini-analyzer';
import type { AnalysisResult } from '../worker/src/contract/analysis';
import { PRICES } from '../worker/src/contract/cost-model';
import { DELIVERY_DEFAULTS } from '../worker/src/contract/settings';
import type { Analyzer, AnalyzerInput } from '../worker/src/core/ports';
import type { QuotaModel } from './models/gemini';
import { sampleAnalysis } from './samples';
import { type SimClock, type SimTime, SlidingWindowLimit } from './time';

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

/**
 * What one Gemini call spends, USD: its input tokens and `outputTokens` (the simulators' 400) at the
 * priced model's prices (worker/src/contract/cost-model.ts). The spend window below and the sweep's
 * dollars per document both price a call with it.
 */
export function geminiCallUsd(inputTokens: number, outputTokens = 400): number {
  return (
    (inputTokens / 1e6) * PRICES.geminiInputUsdPerMillionTokens +
    (outputTokens / 1e6) * PRICES.geminiOutputUsdPerMillionTokens
  );
}

/** The Gemini API's spend-based rate limit: USD over any rolling 10 minutes. */
export const SPEND_WINDOW_MS = 10 * 60_000;

/**
 * A Gemini API tier's spend-based rate limit in front of its other windows (a {@link QuotaModel}
 * such as sim/models/gemini.ts's TierQuota). Documented (https://ai.google.dev/gemini-api/docs/rate-limits,
 * "Spend-based rate limits", read on 2026-12-04, `GEMINI_TIERS_AS_OF`): each tier has a spend limit
 * "evaluated over a rolling 10-minute window" (worker/src/contract/gemini-tiers.ts holds the
 * figures), and past it the API answers 429 RESOURCE_EXHAUSTED. Assumed: a call's spend counts when
 * it is accepted, at its price ({@link geminiCallUsd}: Google does not say whether the window
 * counts a call at its start or once billed); a call the spend limit refuses spends nothing and is
 * not passed on to the other windows (so it does not count there, whatever they do with refusals);
 * a call that would take the window past the limit is refused whole. The monthly billing cap is
 * not modelled: no sweep cell spends near it.
 *
 * Exact for the oracle ({@link nextAcceptMs}) over windows that only free up with time, as a tier's
 * RPM, TPM and RPD windows do: the answer is the later of the spend window's and the inner model's.
 */
export class SpendWindow implements QuotaModel {
  readonly kind = 'tiers';
  /** Calls the spend limit refused. */
  refusedForSpend = 0;
  private readonly at: number[] = [];
  private readonly usd: number[] = [];
  private head = 0;
  private spent = 0;

  constructor(
    private readonly time: SimClock,
    private readonly inner: QuotaModel,
    readonly usdPer10Minutes: number,
  ) {}

  /** USD spent over the last 10 minutes (rolling). */
  spentUsd(): number {
    this.expire(this.time.nowMs());
    return this.spent;
  }

  tryAccept(tokens: number): boolean {
    const now = this.time.nowMs();
    const usd = geminiCallUsd(tokens);
    this.expire(now);
    if (this.spent + usd > this.usdPer10Minutes) {
      this.refusedForSpend++;
      return false;
    }
    if (!this.inner.tryAccept(tokens)) return false;
    this.at.push(now);
    this.usd.push(usd);
    this.spent += usd;
    return true;
  }

  nextAcceptMs(tokens: number): number {
    const now = this.time.nowMs();
    this.expire(now);
    const usd = geminiCallUsd(tokens);
    let spent = this.spent;
    let fits = now;
    // The spend leaves the window call by call, oldest first, until this call's fits.
    for (let i = this.head; spent + usd > this.usdPer10Minutes && i < this.at.length; i++) {
      spent -= this.usd[i]!;
      fits = this.at[i]! + SPEND_WINDOW_MS + 1e-6;
    }
    if (spent + usd > this.usdPer10Minutes) return Number.POSITIVE_INFINITY; // one call over the limit
    return Math.max(fits, this.inner.nextAcceptMs(tokens));
  }

  private expire(now: number): void {
    while (this.head < this.at.length && this.at[this.head]! <= now - SPEND_WINDOW_MS) {
      this.spent -= this.usd[this.head]!;
      this.head++;
    }
    if (this.head > 4096) {
      this.at.splice(0, this.head);
      this.usd.splice(0, this.head);
      this.head = 0;
    }
  }
}
