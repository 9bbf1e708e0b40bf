import type { GoogleGenAI } from '@google/genai';
import { geminiError } from '../../worker/src/adapters/analyzers/gemini-analyzer';
import type { AnalysisResult, LineItem } from '../../worker/src/contract/analysis';
import { geminiUsdPerDocument } from '../../worker/src/contract/cost-model';
import { DELIVERY_DEFAULTS } from '../../worker/src/contract/settings';
import type { Analyzer, AnalyzerInput } from '../../worker/src/core/ports';
import { type DocumentKind, type FaultLog, type FaultSchedule, LARGE_ANALYSIS } from '../faults/schedule';
import { seededRandom } from '../random';
import { sampleAnalysis } from '../samples';
import type { SimClock } from '../time';
import { type Latency, type LatencySpec, latencyFrom, REFUSAL_LATENCY } from './latency';

/**
 * Gemini, as every simulator of docline sees it, in three layers that share its errors, its
 * answers and its prices:
 *
 * 1. **Quota** ({@link QuotaModel}): whether Gemini accepts a call now. The documentation gives two
 *    models and neither is a fixed number for docline's deployment (Vertex AI's Gemini 2.x runs on
 *    Dynamic Shared Quota; the Developer API has per-tier limits), so both are here:
 *    {@link TierQuota} (RPM, TPM, RPD), {@link SpendWindow} (a tier's spend-based limit, in front
 *    of its other windows) and {@link SharedCapacity} (DSQ). Whether a call is accepted is a
 *    deterministic function of the time it arrives and the windows' content, so the sweep's
 *    oracle ({@link QuotaModel.nextAcceptMs}) can know the quota exactly.
 * 2. **At the worker's Analyzer port** ({@link GeminiPortModel}): a quota, a latency per call, a
 *    429's latency, and an answer for every accepted call. The sweep, the growth stage and the
 *    burst run the worker on it: cheap enough to run thousands of documents on 2 cores.
 * 3. **At the @google/genai client** ({@link GeminiClientModel}): the fault simulator's Gemini,
 *    under the real `GeminiAnalyzer` (its retry, schema check, safety handling, timeout and error
 *    mapping all run), with the faults the seed's schedule draws, and the bill the invariants read.
 *
 * Refusals, at both levels, are the errors the real API raises, so the worker answers what it
 * would answer to Gemini (at the port, mapped by the real adapter's own `geminiError`).
 */

/** The message of Gemini's 429 RESOURCE_EXHAUSTED. */
const QUOTA_EXHAUSTED = 'Resource has been exhausted (e.g. check quota).';

/**
 * The body of the Gemini API's 429 for a full window of the project's tier, as the SDK puts it in
 * its error's message: a `QuotaFailure` naming the quota and a `google.rpc.RetryInfo` whose
 * `retryDelay` is the wait in whole seconds, while the message gives it to the nanosecond (reported
 * bodies: "Please retry in 58.934310785s." with `"retryDelay": "58s"`; googleapis/python-genai
 * pull request 2114, read on 2026-12-07). Assumed: the wait is until the window would accept the
 * call, truncated to the second; Google does not document how it is computed.
 */
export function windowFullBody(waitMs: number): string {
  return JSON.stringify({
    error: {
      code: 429,
      message: `You exceeded your current quota, please check your plan and billing details. Please retry in ${(waitMs / 1000).toFixed(3)}s.`,
      status: 'RESOURCE_EXHAUSTED',
      details: [
        {
          '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
          violations: [{ quotaId: 'GenerateRequestsPerMinutePerProjectPerModel' }],
        },
        { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${Math.floor(waitMs / 1000)}s` },
      ],
    },
  });
}

/** Vertex AI's 429 when its shared pay-as-you-go capacity is busy (its error-code-429 page): no wait named. */
const SHARED_CAPACITY_BUSY = JSON.stringify({
  error: {
    code: 429,
    message: 'Resource exhausted, please try again later.',
    status: 'RESOURCE_EXHAUSTED',
  },
});

/** Output tokens of an analysis (a long invoice's counts its bytes instead, see layer 3). */
const OUTPUT_TOKENS = 400;

/** An error as @google/genai raises it for an HTTP status. */
function apiError(status: number, message: string): Error {
  return Object.assign(new Error(message), { name: 'ApiError', status });
}

/** Input tokens of a document: 1,000–2,600, fixed per name (a hash), so every design sees the same. */
export function tokensOf(name: string): number {
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  return 1_000 + ((h >>> 0) % 1_601);
}

/**
 * What one Gemini call spends, USD: the cost model's price of an analysis, for these tokens. The
 * spend window and the sweep's dollars per document both price a call with it.
 */
export function geminiCallUsd(inputTokens: number, outputTokens = OUTPUT_TOKENS): number {
  return geminiUsdPerDocument({
    promptTokensPerDocument: inputTokens,
    outputTokensPerDocument: outputTokens,
  });
}

// ── 1. Quota ─────────────────────────────────────────────────────────────────────────────────

export interface QuotaModel {
  readonly kind: 'tiers' | 'shared';
  /** Accepts a call of `tokens` input tokens now (and counts it), or refuses it. */
  tryAccept(tokens: number): boolean;
  /** The earliest simulated time ≥ now at which a call of `tokens` would be accepted (the oracle's knowledge). */
  nextAcceptMs(tokens: number): number;
}

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

  fits(now: number, w: number): boolean {
    return this.used(now) + w <= this.limit;
  }

  /** The weight inside the window at `now`. */
  used(now: number): number {
    this.expire(now);
    return this.sum;
  }

  take(now: number, w: number): void {
    this.at.push(now);
    this.weight.push(w);
    this.sum += w;
  }

  /** The earliest time ≥ `from` (itself ≥ now) at which `w` fits under the limit; changes nothing. */
  nextFit(now: number, from: number, w: number): number {
    this.expire(now);
    let sum = this.sum;
    let i = this.head;
    // Entries that have left the window by `from`.
    for (; i < this.at.length && this.at[i]! <= from - this.windowMs; i++) sum -= this.weight[i]!;
    if (sum + w <= this.limit) return from;
    for (; i < this.at.length; i++) {
      sum -= this.weight[i]!;
      if (sum + w <= this.limit) return this.at[i]! + this.windowMs + 1e-6;
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

/**
 * Developer API tiers: requests per minute and input tokens per minute, each a sliding 60 s window
 * over accepted calls, and optionally requests per day (24 h); a call past any of them is refused.
 * Unless built with `countsRefused`, a refused call counts towards no window.
 */
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

/** The Gemini API's spend-based rate limit: USD over any rolling 10 minutes. */
export const SPEND_WINDOW_MS = 10 * 60_000;

/**
 * A Gemini API tier's spend-based rate limit in front of its other windows (a {@link QuotaModel}
 * such as {@link TierQuota}). Documented (https://ai.google.dev/gemini-api/docs/rate-limits,
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
  private readonly spend: WeightedWindow;

  constructor(
    private readonly time: SimClock,
    private readonly inner: QuotaModel,
    usdPer10Minutes: number,
  ) {
    this.spend = new WeightedWindow(usdPer10Minutes, SPEND_WINDOW_MS);
  }

  /** USD spent over the last 10 minutes (rolling). */
  spentUsd(): number {
    return this.spend.used(this.time.nowMs());
  }

  tryAccept(tokens: number): boolean {
    const now = this.time.nowMs();
    const usd = geminiCallUsd(tokens);
    if (!this.spend.fits(now, usd)) {
      this.refusedForSpend++;
      return false;
    }
    if (!this.inner.tryAccept(tokens)) return false;
    this.spend.take(now, usd);
    return true;
  }

  nextAcceptMs(tokens: number): number {
    const now = this.time.nowMs();
    return Math.max(this.spend.nextFit(now, now, geminiCallUsd(tokens)), this.inner.nextAcceptMs(tokens));
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
 * would refuse half of every burst's slots on top of its intensity.
 */
export function slotDraw(slot: number, seed: number): number {
  let h = Math.imul(slot ^ seed, 2654435761) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 2246822507) >>> 0;
  return ((h ^ (h >>> 13)) >>> 0) / 4294967296;
}

/**
 * Dynamic Shared Quota: an average share of `requestsPerMinute` (a sliding 60 s window, an
 * assumption: DSQ publishes no figure), plus busy bursts of the shared capacity during which a
 * share of calls is refused whatever this project's own rate. Bursts start at random (mean one
 * every {@link BURST_MEAN_GAP_MS}), last 10–120 s, and their intensity (the refused share) follows a slow
 * daily-like swell times a random draw: it varies over time. Inside a burst, a call is refused when
 * a deterministic draw for its 250 ms slot falls under the intensity (so the oracle can know it; a
 * real client cannot).
 */
/** The mean gap between two busy bursts of the shared capacity (an assumption: DSQ publishes none). */
const BURST_MEAN_GAP_MS = 5 * 60_000;

export class SharedCapacity implements QuotaModel {
  readonly kind = 'shared';
  readonly bursts: Burst[] = [];
  private readonly share: WeightedWindow;
  private readonly slotSeed: number;

  constructor(
    private readonly time: SimClock,
    options: { requestsPerMinute: number; seed: number; horizonMs: number },
  ) {
    this.share = new WeightedWindow(options.requestsPerMinute, 60_000);
    this.slotSeed = options.seed;
    const random = seededRandom(options.seed);
    // Bursts over the whole horizon, drawn up front: exponential gaps, 10–120 s long.
    for (let t = -Math.log(1 - random()) * BURST_MEAN_GAP_MS; t < options.horizonMs; ) {
      const forMs = 10_000 + random() * 110_000;
      // A slow swell over 6 h (0.3–1.0) times a random draw: the intensity varies over time.
      const swell = 0.65 + 0.35 * Math.sin((2 * Math.PI * t) / (6 * 3_600_000));
      this.bursts.push({ atMs: t, forMs, intensity: Math.min(0.95, swell * (0.3 + 0.7 * random())) });
      t += forMs + -Math.log(1 - random()) * BURST_MEAN_GAP_MS;
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

// ── 2. At the Analyzer port ──────────────────────────────────────────────────────────────────

/** How long calls take at the port: an accepted call's latency, and a 429's. */
export interface PortLatencies {
  latency: Latency;
  refusalLatency: Latency;
}

/** The sweep's latencies: the cell's distribution (with its tail), and {@link REFUSAL_LATENCY}, each its own stream. */
export function sweepLatencies(latency: LatencySpec, seed: number): PortLatencies {
  return { latency: latencyFrom(latency, seed), refusalLatency: latencyFrom(REFUSAL_LATENCY, seed + 1) };
}

/**
 * Gemini at the worker's Analyzer port (and, through {@link call}, at the sweep's oracle). A call
 * the quota refuses is free and ends with a 429 after its latency; an accepted call is paid when
 * accepted, takes its latency and always answers, with `promptTokens(name)` input tokens (by
 * default {@link tokensOf}). Every worker instance shares one model: one quota, one bill.
 */
export class GeminiPortModel {
  paid = 0;
  refused = 0;
  /** Paid calls per object name. */
  readonly paidByObject = new Map<string, number>();
  private readonly latency: Latency;
  private readonly refusalLatency: Latency;

  constructor(
    private readonly time: SimClock,
    readonly quota: QuotaModel,
    latencies: PortLatencies,
    private readonly promptTokens: (name: string) => number = tokensOf,
  ) {
    this.latency = latencies.latency;
    this.refusalLatency = latencies.refusalLatency;
  }

  /** One call: resolves true once analysed (paid), false after a 429's latency. */
  async call(name: string): Promise<boolean> {
    return (await this.attempt(name)) === true;
  }

  /** One call: true once analysed (paid), or after a 429's latency the body of the 429. */
  private async attempt(name: string): Promise<true | string> {
    const tokens = this.promptTokens(name);
    if (!this.quota.tryAccept(tokens)) {
      this.refused++;
      // The Gemini API's tiers name their wait (RetryInfo); Vertex AI's shared capacity names none.
      const body =
        this.quota.kind === 'tiers'
          ? windowFullBody(this.quota.nextAcceptMs(tokens) - this.time.nowMs())
          : SHARED_CAPACITY_BUSY;
      await this.time.sleep(this.refusalLatency());
      return body;
    }
    this.paid++;
    this.paidByObject.set(name, (this.paidByObject.get(name) ?? 0) + 1);
    await this.time.sleep(this.latency());
    return true;
  }

  /** The Analyzer port for one worker instance. */
  analyzer(): Analyzer {
    return {
      analyze: async (input: AnalyzerInput): Promise<AnalysisResult> => {
        const answer = await this.attempt(input.name);
        if (answer !== true) throw geminiError(apiError(429, answer));
        const tokens = this.promptTokens(input.name);
        return {
          analysis: sampleAnalysis(),
          model: DELIVERY_DEFAULTS.geminiModel,
          usage: { promptTokens: tokens, outputTokens: OUTPUT_TOKENS, totalTokens: tokens + OUTPUT_TOKENS },
        };
      },
    };
  }
}

// ── 3. At the @google/genai client, with the fault schedule ──────────────────────────────────
/**
 * Gemini as the real `GeminiAnalyzer` sees it: a stand-in for the @google/genai client's
 * `models.generateContent`, so the adapter's own retry, schema check, safety handling, timeout and
 * error mapping all run. Its faults come from the seed's schedule (sim/faults/schedule.ts), whose
 * draws keep each seed's streams in order, rather than from layer 1's quota models. What it models:
 *
 * - latency around 6 s with a slow tail (the schedule's `slowTail` calls take 30–150 s, often past
 *   the adapter's timeout);
 * - Dynamic Shared Quota: no per-minute figure, but bursts of busy shared capacity during which a
 *   share of the calls is refused with 429 (free, not counted towards anything);
 * - outages: windows (minutes to hours) in which every call is refused, with 429 or 503 (free);
 * - 4xx answers that are not about the document (a billing or region FAILED_PRECONDITION, a model
 *   that refuses the schema, a 409, a 499): free, and no verdict on the document;
 * - 5xx (free), and hangs: the call is accepted and paid, and no answer ever comes (the client's
 *   timeout or abort signal ends the wait, when it has one);
 * - per document: an analysis, a safety block (paid, answered with finishReason SAFETY) or an
 *   answer outside the schema (paid, each time). Every analysis it answers is a different one (its
 *   invoice number names the call), so a row shows which answer it carries. A long invoice's
 *   analysis carries its 500 line items (about `analysisBytes` of JSON; its output tokens counted
 *   at 4 bytes each).
 *
 * Its bill is the ground truth the invariants read, call by call: which document, which request
 * and instance, when it started and ended, whether it was paid, whether its answer reached a live
 * process. A paid call is a new *analysis* unless it is the second attempt that follows an answer
 * outside the schema delivered for that document (the analyzer asks twice before it refuses); a
 * paid call whose answer never reached a live process is a *lost answer* (the only reason a
 * document may be paid again).
 */

/** The marker line that ties a document's bytes to its name (the request carries only bytes). */
export const DOCUMENT_MARKER = 'sim-document: ';

/** The classes of 4xx Gemini answers that say nothing about the document. */
export const GEMINI_CLIENT_ERRORS = {
  failedPrecondition: {
    status: 400,
    message:
      'FAILED_PRECONDITION: User location is not supported for the API use, or billing is not enabled.',
    apiStatus: 'FAILED_PRECONDITION',
  },
  schemaRefused: {
    status: 400,
    message: 'INVALID_ARGUMENT: The model does not support the response schema given.',
    apiStatus: 'INVALID_ARGUMENT',
  },
  permissionDenied: {
    status: 403,
    message: 'PERMISSION_DENIED: The caller does not have permission.',
    apiStatus: 'PERMISSION_DENIED',
  },
  notFound: {
    status: 404,
    message: 'NOT_FOUND: models/gemini is not found for API version v1beta.',
    apiStatus: 'NOT_FOUND',
  },
  conflict: {
    status: 409,
    message: 'ABORTED: The operation was aborted due to a conflict.',
    apiStatus: 'ABORTED',
  },
  cancelled: { status: 499, message: 'CANCELLED: The operation was cancelled.', apiStatus: 'CANCELLED' },
  /**
   * A 400 that names the input and asks for a retry: Gemini failed on its side
   * this time; the document is good, and must never be refused for it.
   */
  retryAsked: {
    status: 400,
    message:
      'INVALID_ARGUMENT: Unable to process input image. Please retry or report in https://developers.generativeai.google/guide/troubleshooting',
    apiStatus: 'INVALID_ARGUMENT',
  },
} as const;
export type GeminiClientError = keyof typeof GEMINI_CLIENT_ERRORS;

/** One call, as Gemini billed and answered it. */
export interface GeminiCall {
  index: number;
  document: string;
  /** The Cloud Run request the call was made for (undefined: outside any request). */
  request?: number;
  instance: number;
  startMs: number;
  /** When its answer (or refusal) left, or the client gave up (undefined: still running). */
  endMs?: number;
  paid: boolean;
  /** A paid call that starts a new analysis of its document (see above). */
  newAnalysis: boolean;
  /** `answered` reached a live process; `lost`: paid, and the answer reached none; `refused`: free. */
  outcome?: 'answered' | 'lost' | 'refused';
  /** The invoice number of the analysis it answered (an answer in the schema). */
  invoiceNumber?: string;
}

export interface GeminiRecord {
  calls: GeminiCall[];
  /** Calls Gemini accepted and billed, per object name. */
  paidByDocument: Map<string, number>;
  /** Paid analyses per object name (see above). */
  analysesByDocument: Map<string, number>;
  /** Per object name, the invoice numbers of every analysis answered for it. */
  answersByDocument: Map<string, string[]>;
}

interface CallConfig {
  httpOptions?: { timeout?: number };
  abortSignal?: AbortSignal;
}

/** The instance a client belongs to: its index, and whether its process still lives. */
export interface CallerInstance {
  index: number;
  alive(): boolean;
}

export class GeminiClientModel {
  readonly record: GeminiRecord = {
    calls: [],
    paidByDocument: new Map(),
    analysesByDocument: new Map(),
    answersByDocument: new Map(),
  };
  private next = 0;
  /** Documents whose last delivered answer missed the schema: their next paid call is the second attempt. */
  private readonly secondAttemptDue = new Set<string>();

  constructor(
    private readonly time: SimClock,
    private readonly schedule: FaultSchedule['gemini'],
    private readonly documents: Map<
      string,
      { kind: DocumentKind; analysisMs: number; analysisBytes?: number }
    >,
    private readonly faults: FaultLog,
    private readonly keyOf: (name: string) => string,
    /** The request whose handler makes the current call. */
    private readonly requestOf: () => number | undefined = () => undefined,
  ) {}

  /** The client one worker instance builds its `GeminiAnalyzer` on (all share this model). */
  client(instance: CallerInstance = { index: -1, alive: () => true }): GoogleGenAI {
    return {
      models: { generateContent: (params: unknown) => this.generate(params, instance) },
    } as unknown as GoogleGenAI;
  }

  private async generate(params: unknown, instance: CallerInstance): Promise<unknown> {
    const p = params as {
      contents: Array<{ parts: Array<{ inlineData?: { data: string } }> }>;
      config?: CallConfig;
    };
    const data = p.contents[0]?.parts.find((part) => part.inlineData)?.inlineData?.data ?? '';
    const text = Buffer.from(data, 'base64').toString('utf8');
    const name =
      text
        .split('\n')
        .find((l) => l.startsWith(DOCUMENT_MARKER))
        ?.slice(DOCUMENT_MARKER.length) ?? '';
    const doc = this.documents.get(name) ?? { kind: 'invoice', analysisMs: 6_000 };
    const kind = doc.kind;
    const scheduled = this.schedule.calls[this.next++] ?? { draw: 1 };
    const plan = { ...scheduled, latencyMs: scheduled.latencyMs ?? doc.analysisMs };
    const key = this.keyOf(name);
    const request = this.requestOf();
    const call: GeminiCall = {
      index: this.record.calls.length,
      document: name,
      ...(request === undefined ? {} : { request }),
      instance: instance.index,
      startMs: this.time.nowMs(),
      paid: false,
      newAnalysis: false,
    };
    this.record.calls.push(call);
    const end = (outcome: GeminiCall['outcome']) => {
      call.endMs = this.time.nowMs();
      call.outcome = outcome;
    };

    const now = this.time.nowMs();
    const outage = (this.schedule.outages ?? []).find((o) => now >= o.atMs && now < o.atMs + o.forMs);
    try {
      if (outage) {
        this.faults.injected('gemini.outage', [key], `${outage.status} (outage of ${outage.forMs} ms)`);
        await this.wait(200, p.config);
        throw apiError(
          outage.status,
          outage.status === 429
            ? QUOTA_EXHAUSTED
            : outage.status === 400
              ? GEMINI_CLIENT_ERRORS.retryAsked.message
              : 'The service is currently unavailable.',
        );
      }
      const busy = this.schedule.busy.find((b) => now >= b.atMs && now < b.atMs + b.forMs);
      if (busy && plan.draw < busy.refuseShare) {
        this.faults.injected('gemini.rateLimited', [key], 'shared capacity busy: 429');
        await this.wait(100, p.config);
        throw apiError(429, QUOTA_EXHAUSTED);
      }
      if (plan.fault === 'serverError') {
        this.faults.injected('gemini.serverError', [key], '503 before any work');
        await this.wait(plan.latencyMs, p.config);
        throw apiError(503, 'The model is overloaded. Please try again later.');
      }
      if (plan.fault === 'clientError') {
        const c = GEMINI_CLIENT_ERRORS[plan.clientError ?? 'failedPrecondition'];
        this.faults.injected(
          'gemini.clientError',
          [key],
          `${c.status} ${c.apiStatus}, not about the document`,
        );
        await this.wait(plan.latencyMs, p.config);
        throw apiError(c.status, c.message);
      }
    } catch (error) {
      end('refused');
      throw error;
    }
    // Accepted: from here the call is billed, whether or not its answer arrives.
    call.paid = true;
    call.newAnalysis = !this.secondAttemptDue.delete(name);
    const bump = (m: Map<string, number>) => m.set(name, (m.get(name) ?? 0) + 1);
    bump(this.record.paidByDocument);
    if (call.newAnalysis) bump(this.record.analysesByDocument);
    try {
      if (plan.fault === 'hang') {
        this.faults.injected('gemini.hang', [key], 'accepted, never answers');
        await this.wait(Number.POSITIVE_INFINITY, p.config);
      }
      if (plan.fault === 'slowTail') this.faults.injected('gemini.slowTail', [key], `${plan.latencyMs} ms`);
      await this.wait(plan.latencyMs, p.config);
    } catch (error) {
      // Paid, and the answer never reached the worker.
      end('lost');
      throw error;
    }
    // An answer that reaches a killed process is paid and lost.
    const delivered = instance.alive();
    end(delivered ? 'answered' : 'lost');
    const lineItems = doc.analysisBytes ? longInvoiceLines(doc.analysisBytes, call.index) : [];
    const outputTokens = doc.analysisBytes ? Math.ceil(doc.analysisBytes / 4) : OUTPUT_TOKENS;
    const usageMetadata = {
      promptTokenCount: 1_500,
      candidatesTokenCount: outputTokens,
      totalTokenCount: 1_500 + outputTokens,
    };
    const modelVersion = DELIVERY_DEFAULTS.geminiModel;
    if (kind === 'safetyBlocked')
      return { candidates: [{ finishReason: 'SAFETY' }], usageMetadata, modelVersion };
    if (kind === 'unreadable') {
      // The analyzer asks again once; the second answer ends its analysis either way.
      if (delivered && call.newAnalysis) this.secondAttemptDue.add(name);
      return {
        candidates: [{ content: { parts: [{ text: 'I cannot read this.' }] }, finishReason: 'STOP' }],
        usageMetadata,
        modelVersion,
      };
    }
    call.invoiceNumber = `SIM-${call.index}`;
    if (doc.analysisBytes)
      this.faults.injected(
        'gemini.largeAnalysis',
        [key],
        `an analysis of ${lineItems.length} line items (~${doc.analysisBytes} bytes)`,
      );
    this.record.answersByDocument.set(name, [
      ...(this.record.answersByDocument.get(name) ?? []),
      call.invoiceNumber,
    ]);
    return {
      candidates: [
        {
          content: {
            parts: [
              {
                text: JSON.stringify(
                  sampleAnalysis({ invoice_number: call.invoiceNumber, line_items: lineItems }),
                ),
              },
            ],
          },
          finishReason: 'STOP',
        },
      ],
      usageMetadata,
      modelVersion,
    };
  }

  /** Waits `ms`, unless the client's timeout or abort signal ends the call first (AbortError). */
  private wait(ms: number, config: CallConfig | undefined): Promise<void> {
    const timeoutMs = config?.httpOptions?.timeout;
    const signal = config?.abortSignal;
    if (signal?.aborted) return Promise.reject(abortError());
    return new Promise((resolve, reject) => {
      const timers: Array<{ cancel(): void }> = [];
      const abort = () => {
        for (const t of timers) t.cancel();
        reject(abortError());
      };
      if (Number.isFinite(ms))
        timers.push(
          this.time.after(ms, () => {
            for (const t of timers) t.cancel();
            signal?.removeEventListener('abort', abort);
            resolve();
          }),
        );
      if (timeoutMs !== undefined && timeoutMs < ms) timers.push(this.time.after(timeoutMs, abort));
      signal?.addEventListener('abort', abort, { once: true });
    });
  }
}

/**
 * The line items of a long invoice: {@link LARGE_ANALYSIS.lineItems} lines whose descriptions make
 * the analysis about `bytes` of JSON (a line's other fields take ~80 bytes), different per call.
 */
function longInvoiceLines(bytes: number, call: number): LineItem[] {
  const count = LARGE_ANALYSIS.lineItems;
  const descriptionChars = Math.max(16, Math.floor(bytes / count) - 80);
  const words = 'Fourniture vis inox A2 M6x20 boite de 100 pieces livraison atelier reference lot ';
  return Array.from({ length: count }, (_, i) => {
    const head = `Ligne ${i + 1} appel ${call}: `;
    const description = (head + words.repeat(Math.ceil(descriptionChars / words.length))).slice(
      0,
      descriptionChars,
    );
    const quantity = (i % 12) + 1;
    const unitPrice = 2.5 + (i % 40) * 0.25;
    return {
      description,
      quantity,
      unit_price: unitPrice,
      amount: Math.round(quantity * unitPrice * 100) / 100,
      vat_rate: 20,
    };
  });
}

function abortError(): Error {
  return Object.assign(new Error('The operation was aborted.'), { name: 'AbortError' });
}
