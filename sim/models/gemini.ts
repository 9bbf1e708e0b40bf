import { geminiError } from '../../worker/src/adapters/analyzers/gemini-analyzer';
import type { AnalysisResult } from '../../worker/src/contract/analysis';
import { DELIVERY_DEFAULTS } from '../../worker/src/contract/settings';
import type { Analyzer, AnalyzerInput } from '../../worker/src/core/ports';
import { seededRandom } from '../random';
import { sampleAnalysis } from '../samples';
import type { SimClock } from '../time';
import { type Latency, type LatencySpec, latencyFrom, REFUSAL_LATENCY } from './latency';

/**
 * Gemini as the sweep sees it: two models of the quota, because the documentation gives two and
 * neither is a fixed number for docline's deployment (Vertex AI's Gemini 2.x runs on Dynamic Shared
 * Quota; the Developer API has per-tier limits). Both are at the worker's Analyzer port, refused
 * calls mapped by the real adapter's own `geminiError`, so the worker answers what it would answer
 * to Gemini's 429.
 *
 * - {@link TierQuota} (Developer API): requests per minute and input tokens per minute, each a
 *   sliding 60 s window over accepted calls; a call past either is refused.
 * - {@link SharedCapacity} (Dynamic Shared Quota): an average share of `requestsPerMinute`
 *   (a sliding 60 s window, an assumption: DSQ publishes no figure), plus busy bursts of the shared
 *   capacity during which a share of calls is refused whatever this project's own rate. Bursts
 *   start at random (mean one every `meanGapMs`), last 10–120 s, and their intensity (the refused
 *   share) follows a slow daily-like swell times a random draw: it varies over time.
 *
 * Both assume, unless a tier is built with `countsRefused` (the cautious reading: Google does not
 * say a 429 is free): a refused call does not count towards any window; a 429 takes time
 * ({@link REFUSAL_LATENCY}); an accepted call is paid, takes a latency from the cell's distribution
 * (with a tail) and always answers. Token counts per document vary (1,000–2,600 input tokens).
 * Whether a call is accepted is a deterministic function of the time it arrives and the window's
 * content, so the oracle consumer ({@link QuotaModel.nextAcceptMs}) can know the quota exactly.
 */

export interface QuotaModel {
  readonly kind: 'tiers' | 'shared';
  /** Accepts a call of `tokens` input tokens now (and counts it), or refuses it. */
  tryAccept(tokens: number): boolean;
  /** The earliest simulated time ≥ now at which a call of `tokens` would be accepted (the oracle's knowledge). */
  nextAcceptMs(tokens: number): number;
}

/** Input tokens of a document: 1,000–2,600, fixed per name (a hash), so every design sees the same. */
export function tokensOf(name: string): number {
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  return 1_000 + ((h >>> 0) % 1_601);
}

/** Mean input tokens of {@link tokensOf}. */
export const MEAN_TOKENS = 1_800;

/** A sliding window of weighted entries (weight 1 for requests, tokens for TPM). */
class WeightedWindow {
  private readonly at: number[] = [];
  private readonly weight: number[] = [];
  private head = 0;
  private sum = 0;

  constructor(
    readonly limit: number,
    readonly windowMs: number,
  ) {}

  private expire(now: number): void {
    while (this.head < this.at.length && this.at[this.head]! <= now - this.windowMs) {
      this.sum -= this.weight[this.head]!;
      this.head++;
    }
    if (this.head > 4096) {
      this.at.splice(0, this.head);
      this.weight.splice(0, this.head);
      this.head = 0;
    }
  }

  fits(now: number, w: number, limit = this.limit): boolean {
    this.expire(now);
    return this.sum + w <= limit;
  }

  take(now: number, w: number): void {
    this.at.push(now);
    this.weight.push(w);
    this.sum += w;
  }

  /** The earliest time ≥ `from` (itself ≥ now) at which `w` fits under `limit`; changes nothing. */
  nextFit(now: number, from: number, w: number, limit = this.limit): number {
    this.expire(now);
    let sum = this.sum;
    let i = this.head;
    // Entries that have left the window by `from`.
    for (; i < this.at.length && this.at[i]! <= from - this.windowMs; i++) sum -= this.weight[i]!;
    if (sum + w <= limit) return from;
    for (; i < this.at.length; i++) {
      sum -= this.weight[i]!;
      if (sum + w <= limit) return this.at[i]! + this.windowMs + 1e-6;
    }
    return Number.POSITIVE_INFINITY; // w alone exceeds the limit
  }
}

/** The limits of a Developer API tier, as {@link TierQuota} holds to them. */
export interface TierLimits {
  requestsPerMinute: number;
  tokensPerMinute: number;
  /** Requests per day (a sliding 24 h window); unset: no daily limit. */
  requestsPerDay?: number;
  /**
   * Whether a refused call still counts towards the request windows. Google does not say that a 429
   * is free, so a model that counts it is the cautious reading: a client that retries into a full
   * window keeps it full. Default false (the sweep's first model).
   */
  countsRefused?: boolean;
  /**
   * Requests already made in the day before the start, spread evenly (a steady flow that has run
   * for a day fills the daily window before a short simulation begins). Default 0.
   */
  requestsInPastDay?: number;
}

/** Developer API tiers: requests per minute, input tokens per minute and, optionally, requests per day. */
export class TierQuota implements QuotaModel {
  readonly kind = 'tiers';
  private readonly rpm: WeightedWindow;
  private readonly tpm: WeightedWindow;
  private readonly rpd: WeightedWindow | undefined;
  private readonly countsRefused: boolean;
  /** Calls refused by the daily window. */
  refusedForTheDay = 0;

  constructor(
    private readonly time: SimClock,
    limits: TierLimits,
  ) {
    this.rpm = new WeightedWindow(limits.requestsPerMinute, 60_000);
    this.tpm = new WeightedWindow(limits.tokensPerMinute, 60_000);
    this.countsRefused = limits.countsRefused ?? false;
    if (limits.requestsPerDay !== undefined) {
      this.rpd = new WeightedWindow(limits.requestsPerDay, 86_400_000);
      // The past day's requests, one entry a minute.
      const past = limits.requestsInPastDay ?? 0;
      if (past > 0) for (let m = 1439; m >= 0; m--) this.rpd.take(time.nowMs() - m * 60_000 - 1, past / 1440);
    }
  }

  tryAccept(tokens: number): boolean {
    const now = this.time.nowMs();
    const daily = this.rpd ? this.rpd.fits(now, 1) : true;
    if (!this.rpm.fits(now, 1) || !this.tpm.fits(now, tokens) || !daily) {
      if (!daily) this.refusedForTheDay++;
      if (this.countsRefused) {
        this.rpm.take(now, 1);
        this.rpd?.take(now, 1);
      }
      return false;
    }
    this.rpm.take(now, 1);
    this.tpm.take(now, tokens);
    this.rpd?.take(now, 1);
    return true;
  }

  nextAcceptMs(tokens: number): number {
    const now = this.time.nowMs();
    let t = now;
    // The windows only free up with time: iterate to the first time all fit.
    for (let i = 0; i < 6; i++) {
      const next = Math.max(
        this.rpm.nextFit(now, t, 1),
        this.tpm.nextFit(now, t, tokens),
        this.rpd ? this.rpd.nextFit(now, t, 1) : t,
      );
      if (next === t) return t;
      t = next;
    }
    return t;
  }
}

/** One busy period of the shared capacity. */
export interface Burst {
  atMs: number;
  forMs: number;
  /** Share of calls refused while it lasts (0–0.95). */
  intensity: number;
}

/**
 * A uniform draw in [0, 1) for a 250 ms slot, a hash of the slot and the seed. The last step keeps
 * the value unsigned (`>>> 0`): JavaScript's `^` answers a signed 32-bit integer, and a signed draw
 * (sessions 5–8) refused half of every burst's slots on top of its intensity (a burst of 0.34
 * refused 84 % of its slots, one of 0.5 or more all of them).
 */
export function slotDraw(slot: number, seed: number): number {
  let h = Math.imul(slot ^ seed, 2654435761) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 2246822507) >>> 0;
  return ((h ^ (h >>> 13)) >>> 0) / 4294967296;
}

/**
 * Dynamic Shared Quota: an average share plus random busy bursts whose intensity varies over time.
 * Inside a burst, a call is refused when a deterministic draw for its 250 ms slot falls under the
 * intensity (so the oracle can know it; a real client cannot).
 */
export class SharedCapacity implements QuotaModel {
  readonly kind = 'shared';
  readonly bursts: Burst[] = [];
  private readonly share: WeightedWindow;
  private readonly slotSeed: number;

  constructor(
    private readonly time: SimClock,
    options: { requestsPerMinute: number; seed: number; horizonMs: number; meanGapMs?: number },
  ) {
    this.share = new WeightedWindow(options.requestsPerMinute, 60_000);
    this.slotSeed = options.seed;
    const random = seededRandom(options.seed);
    const meanGapMs = options.meanGapMs ?? 5 * 60_000;
    // Bursts over the whole horizon, drawn up front: exponential gaps, 10–120 s long.
    for (let t = -Math.log(1 - random()) * meanGapMs; t < options.horizonMs; ) {
      const forMs = 10_000 + random() * 110_000;
      // A slow swell over 6 h (0.3–1.0) times a random draw: the intensity varies over time.
      const swell = 0.65 + 0.35 * Math.sin((2 * Math.PI * t) / (6 * 3_600_000));
      this.bursts.push({ atMs: t, forMs, intensity: Math.min(0.95, swell * (0.3 + 0.7 * random())) });
      t += forMs + -Math.log(1 - random()) * meanGapMs;
    }
  }

  /** The refused share at `ms` (0 outside bursts). */
  intensityAt(ms: number): number {
    // Bursts are sorted and disjoint: a binary search finds the one that may hold `ms`.
    let lo = 0;
    let hi = this.bursts.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const b = this.bursts[mid]!;
      if (ms < b.atMs) hi = mid - 1;
      else if (ms >= b.atMs + b.forMs) lo = mid + 1;
      else return b.intensity;
    }
    return 0;
  }

  /** Whether the shared load refuses a call at `ms` (exported to the tests through the class). */
  refusedBySharedLoad(ms: number): boolean {
    const intensity = this.intensityAt(ms);
    if (intensity === 0) return false;
    return slotDraw(Math.floor(ms / 250), this.slotSeed) < intensity;
  }

  tryAccept(_tokens: number): boolean {
    const now = this.time.nowMs();
    if (this.refusedBySharedLoad(now) || !this.share.fits(now, 1)) return false;
    this.share.take(now, 1);
    return true;
  }

  nextAcceptMs(_tokens: number): number {
    const now = this.time.nowMs();
    let t = this.share.nextFit(now, now, 1);
    // Step through 250 ms slots until the shared load lets one through (and the share still fits).
    while (this.refusedBySharedLoad(t)) t = this.share.nextFit(now, (Math.floor(t / 250) + 1) * 250, 1);
    return t;
  }
}

/** The analyzer the sweep gives to docline's worker (and, through {@link call}, to the oracle). */
export class GeminiSweepModel {
  paid = 0;
  refused = 0;
  readonly paidByObject = new Map<string, number>();
  private readonly latency: Latency;
  private readonly refusalLatency: Latency;

  constructor(
    private readonly time: SimClock,
    readonly quota: QuotaModel,
    latency: LatencySpec,
    seed: number,
  ) {
    this.latency = latencyFrom(latency, seed);
    this.refusalLatency = latencyFrom(REFUSAL_LATENCY, seed + 1);
  }

  /** One call: resolves true once analysed (paid), false after a 429's latency. */
  async call(name: string): Promise<boolean> {
    if (!this.quota.tryAccept(tokensOf(name))) {
      this.refused++;
      await this.time.sleep(this.refusalLatency());
      return false;
    }
    this.paid++;
    this.paidByObject.set(name, (this.paidByObject.get(name) ?? 0) + 1);
    await this.time.sleep(this.latency());
    return true;
  }

  /** The Analyzer port for one worker instance; every instance shares this quota and these counts. */
  analyzer(): Analyzer {
    return {
      analyze: async (input: AnalyzerInput): Promise<AnalysisResult> => {
        if (!(await this.call(input.name))) {
          throw geminiError(
            Object.assign(new Error('Resource has been exhausted (e.g. check quota).'), {
              name: 'ApiError',
              status: 429,
            }),
          );
        }
        const tokens = tokensOf(input.name);
        return {
          analysis: sampleAnalysis(),
          model: DELIVERY_DEFAULTS.geminiModel,
          usage: { promptTokens: tokens, outputTokens: 400, totalTokens: tokens + 400 },
        };
      },
    };
  }
}
