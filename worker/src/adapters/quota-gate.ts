import { Deadline, DeadlineError, ShuttingDownError } from '../core/deadline';
import { isRateLimited, RATE_LIMITED, TransientError } from '../core/errors';
import type { Admission, Clock, Timers } from '../core/ports';
import { realTimers, systemClock } from '../core/ports';

/** What a delivery does while it waits at the gate (its line, or a refused work's backoff). */
const WAITING_FOR_A_TURN = 'waiting for a turn at the analyzer';

/** The span over which the gate measures the rate the analyzer accepts (quotas are per minute). */
export const THROUGHPUT_WINDOW_MS = 60_000;

/** A cancellable timer (injectable, so the burst simulation runs the gate on simulated time). */
export type GateTimers = Timers;

export interface QuotaGateOptions {
  /**
   * Paid works (read + analyse) one instance runs at once. Without `maxBytesInFlight`, the hard
   * ceiling of the limit, whatever it learns: each work holds its document in memory, so this, not
   * Cloud Run's concurrency, bounds the bytes in memory (infra/config.ts checks it against the
   * instance's memory). With it, where the limit starts and an eighth of it its floor, and memory
   * is bounded by bytes instead. Deliveries past the limit wait here, holding only their push body.
   */
  maxInFlight: number;
  /**
   * The bytes of documents one instance holds in paid works at once (the composition root: the
   * memory `maxInFlight` documents of the largest size would take). Works are admitted while their
   * documents' declared sizes fit (one alone always does), so small documents are not held to a
   * count fitted to the largest: the limit then grows up to {@link MAX_WORKS_IN_FLIGHT}, where
   * Little's law (the instance's share of the quota × the analysis latency) and the analyzer's
   * answers put it.
   */
  maxBytesInFlight?: number;
  /** The longest a delivery waits to be admitted, all its waits together; past it, 503. */
  maxWaitMs: number;
  /**
   * The limit a fresh instance starts from (default: `maxInFlight`); it moves from there by what the
   * analyzer answers (see {@link AdaptiveLimit}). Starting at the ceiling was measured on the sweep's
   * tuning cells (docs/sweep.md): a 429 is free and halves the limit within one round, while a
   * start from a handful costs a slow start of several analysis latencies, which Vertex AI's random
   * 429 bursts then cut short again (one cell: 1.72 → 2.46 × the oracle's drain).
   */
  initialInFlight?: number;
  /** The pause after a first 429; it doubles on each next one, up to `maxPauseMs`, and ends on a success. */
  initialPauseMs?: number;
  maxPauseMs?: number;
  clock?: Clock;
  timers?: GateTimers;
  random?: () => number;
}

/**
 * How much the recent latency of a paid work may exceed its long-run average before the limit
 * shrinks: Netflix's gradient limiters use 2. Below it, more works at once still buy throughput
 * (Little's law: throughput = works at once / latency); past it, the analyzer is queueing them
 * (throughput no longer rises with the limit) and more at once only hold more documents in memory.
 */
export const LATENCY_TOLERANCE = 2;

/**
 * The share of recent answers that must be 429s before a 429 that says neither what it is nor how
 * long to wait halves the limit (one that names its wait cuts at once, a shared pool's never:
 * {@link QuotaGate.rateLimited}). A limit of this project's own, once this instance is over it,
 * refuses every call until it slides: the share climbs to 1, while a 429 among mostly accepted
 * calls only pauses the gate.
 */
export const OVER_QUOTA_SHARE = 0.5;

/**
 * A refused work's own backoff before its next try, when its 429 names no wait (Vertex AI's shared
 * capacity: "Resource exhausted, please try again later"): 0.5 s, doubling with each refusal of
 * that work, truncated at 2 s, jittered over its upper half; the work keeps its turn meanwhile, so
 * the refused works do not come back as a spike (Google's advice for a 429: truncated exponential
 * backoff, and no sharp spikes on Dynamic Shared Quota). A busy burst refuses a share of calls
 * whatever the rate, and a work waiting out a long backoff holds its push: where Pub/Sub's window
 * holds few pushes, every second of it is drain time. A 429 that names its wait (the Gemini API's
 * `RetryInfo`: a full window of the tier) is waited out instead. Chosen on the sweep's two
 * shared-capacity tuning cells (docs/sweep.md): 1.09 and 1.16 × the oracle, against 1.08 and 1.20
 * with 1–16 s, 1.08 and 1.18 with 1–4 s, 1.10 and 1.17 with 0.25–1 s or none.
 */
export const REFUSED_WORK_BACKOFF_MS = { first: 500, max: 2_000 } as const;

/**
 * How far past the wait a 429 names (a full tier window) a refused work comes back, at random: the
 * works refused together, on every instance, would otherwise all come back at the one moment the
 * window frees a place, and be refused again (where a window counts refused calls, fill it again).
 * A quarter of the window's minute, chosen on the sweep's tuning set (docs/sweep.md): 1 s, 5 s,
 * 15 s and 30 s gave 1.37, 1.31, 1.28 and 1.32 × the oracle where refusals count, 1.03, 1.02, 1.04
 * and 1.13 where they are free (60 a minute).
 */
export const NAMED_WAIT_SPREAD_MS = 15_000;

/** The ceiling of the learnt limit when memory is bounded by bytes (QuotaGateOptions.maxBytesInFlight). */
export const MAX_WORKS_IN_FLIGHT = 1_000;

/**
 * The least a limit falls to: an eighth of its ceiling (5 for the default 40), at least 1. A 429 is
 * free and takes half a second, so a floor costs at most a few refused calls per pause; a limit
 * that falls to 1 during one of Vertex AI's random busy bursts instead takes minutes of analysis
 * latencies to grow back, while its line waits out `analyzerQuotaWaitMs` and is answered 503 (the
 * sweep's tuning cells: nack storms on the shared capacity, and an instance whose limit fell
 * starving while the others took the quota).
 */
export function floorFor(ceiling: number): number {
  return Math.max(1, Math.ceil(ceiling / 8));
}

/**
 * The number of paid works admitted at once, learnt from what the analyzer answers, never a
 * constant fitted to one quota or one latency (Little's law: the works one instance needs at once
 * are its share of the quota × the analysis latency, and both change):
 *
 * - **Grows while calls succeed and the limit is in use**: +1 per success (a full round of successes
 *   doubles it, as TCP's slow start), but only while the deliveries running or waiting fill at
 *   least half of it; an idle instance does not learn a limit it never tried.
 * - **Backs off on 429s of a limit of this project's own**: halved, once per round (works admitted
 *   before the cut do not cut it again), but never under the works at once the rate the analyzer
 *   accepted over the last minute needs (Little's law: that rate × the long-run latency; a tier's
 *   window accepts exactly its quota, so fewer would leave quota unused). The gate says when
 *   ({@link QuotaGate.rateLimited}) and also pauses admissions (see {@link QuotaGate}).
 * - **Backs off when latency inflates**: with the short-run geometric mean of the latency (EWMA of
 *   its logarithm, 1/10) over {@link LATENCY_TOLERANCE} × the long-run one (1/100), so that the
 *   latency's own tail does not count as a queue, each success multiplies the limit
 *   by gradient^(1/limit), gradient = tolerance × long / short (at least ½): a full round of
 *   successes multiplies it by the gradient, as Netflix's Gradient2 limiter does. A long-run average
 *   that catches up (a slower model, not a queue) lets it grow again.
 * - Always between its floor ({@link floorFor}) and the ceiling.
 *
 * Pure and deterministic (no clock of its own): the gate feeds it latencies.
 */
export class AdaptiveLimit {
  private value: number;
  /** The share of recent answers that were 429s (an average over about one limit's worth of answers). */
  private refusedShare = 0;
  private shortLog = 0;
  private longLog = 0;
  private samples = 0;

  constructor(
    private readonly ceiling: number,
    initial: number,
    private readonly tolerance = LATENCY_TOLERANCE,
    private readonly floor = floorFor(ceiling),
  ) {
    this.value = Math.max(floor, Math.min(ceiling, initial));
  }

  /** Works admitted at once now. */
  get current(): number {
    return Math.floor(this.value);
  }

  /** The latency gradient: 1 while the recent latency stays within the tolerance, down to ½. */
  get gradient(): number {
    if (this.samples === 0) return 1;
    return Math.max(0.5, Math.min(1, this.tolerance * Math.exp(this.longLog - this.shortLog)));
  }

  /** A work succeeded after `latencyMs`; `demand` is the works running or waiting when it ended. */
  succeeded(latencyMs: number, demand: number): void {
    // Averages of the logarithm (geometric means): one call from the latency's tail moves them a
    // little, a queue that doubles every call's latency moves them all the way. The long-run one is
    // a plain mean of its first 100 samples (and the short-run one of its first 10), so that the
    // first calls do not stand for the baseline.
    this.answered(false);
    const log = Math.log(Math.max(1, latencyMs));
    this.samples += 1;
    this.shortLog += (log - this.shortLog) / Math.min(this.samples, 10);
    this.longLog += (log - this.longLog) / Math.min(this.samples, 100);
    const gradient = this.gradient;
    if (gradient < 1) this.value = Math.max(this.floor, this.value * gradient ** (1 / this.value));
    else if (demand >= this.value / 2) this.value = Math.min(this.ceiling, this.value + 1);
  }

  /**
   * The analyzer refused a work (429): counted in the refused share. True when most recent answers
   * were 429s ({@link OVER_QUOTA_SHARE}): the instance is over its own quota, and the gate halves
   * the limit ({@link rateLimited}).
   */
  refused(): boolean {
    this.answered(true);
    return this.refusedShare > OVER_QUOTA_SHARE;
  }

  /** The long-run (geometric mean) latency of a successful work, ms; undefined before the first. */
  get typicalLatencyMs(): number | undefined {
    return this.samples === 0 ? undefined : Math.exp(this.longLog);
  }

  /**
   * Halve, but never under `sustained` (the works at once the accepted rate needs). The gate calls
   * it once per round, when {@link refused} says the instance is over its quota.
   */
  rateLimited(sustained = 0): void {
    this.value = Math.max(this.floor, Math.min(this.value, Math.max(this.value / 2, sustained)));
  }

  private answered(wasRefused: boolean): void {
    this.refusedShare += ((wasRefused ? 1 : 0) - this.refusedShare) / Math.max(4, this.value);
  }
}

/**
 * Events in a sliding window, counted per second in a ring: the memory is the window's seconds,
 * whatever the rate (a list of the events' times holds a minute's worth of them: at a fast
 * analyzer's thousands a second, megabytes that the heap keeps growing into). The count covers
 * the current second and the window's other whole seconds before it.
 */
export class RecentCount {
  private readonly counts: number[];
  private readonly seconds: number[];
  constructor(
    windowMs: number,
    private readonly bucketMs = 1_000,
  ) {
    const buckets = Math.max(1, Math.ceil(windowMs / bucketMs));
    this.counts = new Array<number>(buckets).fill(0);
    this.seconds = new Array<number>(buckets).fill(Number.NEGATIVE_INFINITY);
  }

  add(nowMs: number): void {
    const second = Math.floor(nowMs / this.bucketMs);
    const at = ((second % this.counts.length) + this.counts.length) % this.counts.length;
    if (this.seconds[at] !== second) {
      this.seconds[at] = second;
      this.counts[at] = 0;
    }
    this.counts[at]! += 1;
  }

  count(nowMs: number): number {
    const second = Math.floor(nowMs / this.bucketMs);
    let total = 0;
    for (let i = 0; i < this.counts.length; i++) {
      const s = this.seconds[i]!;
      if (s <= second && s > second - this.counts.length) total += this.counts[i]!;
    }
    return total;
  }
}

interface Waiter {
  /** The declared bytes of the document the work will hold. */
  bytes: number;
  admit(): void;
  timer: { cancel(): void };
}

/**
 * Admission to the paid work when the analyzer's quota is shared and may be spent.
 *
 * Why it exists: during a burst Pub/Sub pushes far more deliveries than the analyzer's quota can
 * take (its push window grows with every ack). Answering them 503 costs Pub/Sub's retry backoff
 * and pauses the whole push subscription; letting them all call Gemini turns most calls into 429s
 * and holds every document in memory. So the deliveries wait here, in arrival order, holding a
 * Cloud Run slot and their push body only, and at most `maxInFlight` read and analyse at once.
 *
 * The number admitted at once is learnt ({@link AdaptiveLimit}): it grows while analyses succeed
 * and are needed, halves on a 429 of a limit of this project's own (once per round: works admitted
 * before the cut do not cut again; never under what the last minute's accepted rate needs at once;
 * at once when the 429 names its wait, never for a shared pool's: {@link QuotaGate.rateLimited})
 * and shrinks when the analyses' latency inflates, never past `maxInFlight` (memory). A 429 also
 * pauses admissions for a jittered, doubling moment. The refused work keeps its turn through the
 * wait its 429 names, or else a backoff of its own ({@link REFUSED_WORK_BACKOFF_MS}), then tries
 * again ahead of the line. A delivery still not admitted after `maxWaitMs` gets the 429 as a
 * transient failure (503: Pub/Sub retries it later).
 */
export class QuotaGate implements Admission {
  private readonly limit: AdaptiveLimit;
  private running = 0;
  /** Declared bytes of the documents the running works hold. */
  private bytesRunning = 0;
  private readonly waiting: Waiter[] = [];
  private pausedUntilMs = 0;
  private pauseMs = 0;
  /** Admissions so far; each work's number tells whether it was admitted after the last cut. */
  private admissions = 0;
  private admissionsAtLastCut = 0;
  private wakeup: { cancel(): void } | undefined;
  /** Works that succeeded in the last {@link THROUGHPUT_WINDOW_MS}. */
  private readonly successes = new RecentCount(THROUGHPUT_WINDOW_MS);
  private readonly clock: Clock;
  private readonly timers: GateTimers;
  private readonly random: () => number;

  constructor(private readonly options: QuotaGateOptions) {
    if (!(Number.isInteger(options.maxInFlight) && options.maxInFlight >= 1)) {
      throw new Error(`maxInFlight must be a whole number ≥ 1 (got ${options.maxInFlight})`);
    }
    const ceiling =
      options.maxBytesInFlight === undefined
        ? options.maxInFlight
        : Math.max(options.maxInFlight, MAX_WORKS_IN_FLIGHT);
    this.limit = new AdaptiveLimit(
      ceiling,
      options.initialInFlight ?? options.maxInFlight,
      LATENCY_TOLERANCE,
      floorFor(options.maxInFlight),
    );
    this.clock = options.clock ?? systemClock;
    this.timers = options.timers ?? realTimers;
    this.random = options.random ?? Math.random;
  }

  /** Works admitted at once right now (for logs and tests). */
  get admitting(): number {
    return this.limit.current;
  }

  /** Deliveries waiting to be admitted. */
  get queued(): number {
    return this.waiting.length;
  }

  /**
   * Runs `work` once admitted. The wait ends at `maxWaitMs` (a spent quota: 503), at the delivery's
   * deadline (503), or at once when the instance drains (503).
   */
  async run<T>(
    work: (waitedMs: number) => Promise<T>,
    deadline: Deadline = Deadline.none(),
    bytes = 0,
  ): Promise<T> {
    const startMs = this.nowMs();
    const deadlineMs = startMs + this.options.maxWaitMs;
    let refusals = 0;
    await this.acquire(deadlineMs, false, deadline, bytes);
    for (;;) {
      const admission = ++this.admissions;
      const admittedMs = this.nowMs();
      let again = false;
      try {
        const result = await work(admittedMs - startMs);
        this.succeeded(this.nowMs() - admittedMs);
        return result;
      } catch (error) {
        if (!isRateLimited(error)) throw error;
        this.rateLimited(admission, error);
        if (this.nowMs() >= deadlineMs) throw error;
        refusals += 1;
        // A full window that frees only past this delivery's wait: answered now (503), not held.
        if (!(await this.backOff(refusals, error.retryAfterMs, deadlineMs, deadline))) throw error;
        again = true;
      } finally {
        this.running--;
        this.bytesRunning -= bytes;
        if (!again) this.pump();
      }
      // Its turn kept: ahead of the line, admitted as soon as the limit and the pause allow.
      await this.acquire(deadlineMs, true, deadline, bytes);
    }
  }

  private nowMs(): number {
    return this.clock.now().getTime();
  }

  /**
   * A refused work's backoff before its next try, holding its turn. After a 429 that names its wait
   * (a full quota window: {@link TransientError.retryAfterMs}), that wait, plus a random part of
   * {@link NAMED_WAIT_SPREAD_MS}; after one that does not (a shared capacity's busy burst), its own
   * truncated exponential backoff ({@link REFUSED_WORK_BACKOFF_MS}). False, without waiting, when
   * the wait would end past the line's `waitUntilMs` or the delivery's deadline: a named wait means
   * no call can succeed before then, so the delivery is answered now; an unnamed one is tried again
   * at once. A wait like the line's: it ends at once when the instance drains (ShuttingDownError:
   * answered 503 now, not past Cloud Run's grace period).
   */
  private async backOff(
    refusals: number,
    retryAfterMs: number | undefined,
    waitUntilMs: number,
    deadline: Deadline,
  ): Promise<boolean> {
    const { first, max } = REFUSED_WORK_BACKOFF_MS;
    const ms =
      retryAfterMs !== undefined
        ? retryAfterMs + Math.round(NAMED_WAIT_SPREAD_MS * this.random())
        : Math.round(Math.min(first * 2 ** (refusals - 1), max) * (0.5 + this.random() / 2));
    if (this.nowMs() + ms >= Math.min(waitUntilMs, deadline.atMs)) return retryAfterMs === undefined;
    let timer: { cancel(): void } | undefined;
    const pause = new Promise<void>((resolve) => {
      timer = this.timers.after(ms, resolve);
    });
    try {
      await deadline.race(WAITING_FOR_A_TURN, pause, { wait: true });
    } finally {
      timer?.cancel();
    }
    return true;
  }

  /** Whether a work holding `bytes` may start now: the limit, the memory budget (one alone always fits), no pause. */
  private hasRoom(bytes: number): boolean {
    const budget = this.options.maxBytesInFlight;
    return (
      this.running < this.limit.current &&
      (budget === undefined || this.running === 0 || this.bytesRunning + bytes <= budget) &&
      this.nowMs() >= this.pausedUntilMs
    );
  }

  private acquire(waitUntilMs: number, front: boolean, deadline: Deadline, bytes: number): Promise<void> {
    const what = WAITING_FOR_A_TURN;
    if (deadline.isDraining) return Promise.reject(new ShuttingDownError(what));
    deadline.check(what);
    if ((front || this.waiting.length === 0) && this.hasRoom(bytes)) {
      this.running++;
      this.bytesRunning += bytes;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      // The wait ends at maxWaitMs or at the delivery's deadline, whichever comes first.
      const byDeadline = deadline.atMs < waitUntilMs;
      const leave = (error: Error) => {
        const at = this.waiting.indexOf(waiter);
        if (at < 0) return;
        this.waiting.splice(at, 1);
        waiter.timer.cancel();
        offDrain();
        reject(error);
      };
      const offDrain = deadline.onDrain(() => leave(new ShuttingDownError(what)));
      const waiter: Waiter = {
        bytes,
        admit: () => {
          waiter.timer.cancel();
          offDrain();
          this.running++;
          this.bytesRunning += bytes;
          resolve();
        },
        timer: this.timers.after(Math.max(0, Math.min(waitUntilMs, deadline.atMs) - this.nowMs()), () =>
          leave(
            byDeadline
              ? new DeadlineError(what, 'the delivery reached its deadline before its turn')
              : new TransientError(
                  RATE_LIMITED,
                  `the analyzer's quota stayed spent: not admitted within ${this.options.maxWaitMs} ms ` +
                    `(${this.running} analyses running here, ${this.waiting.length - 1} deliveries still waiting)`,
                ),
          ),
        ),
      };
      if (front) this.waiting.unshift(waiter);
      else this.waiting.push(waiter);
      this.pump();
    });
  }

  /** Admits waiting deliveries while there is room; wakes itself when a pause ends. */
  private pump(): void {
    while (this.waiting.length > 0 && this.hasRoom(this.waiting[0]!.bytes)) this.waiting.shift()!.admit();
    if (this.waiting.length === 0 || this.wakeup) return;
    const pauseLeftMs = this.pausedUntilMs - this.nowMs();
    if (pauseLeftMs <= 0) return; // room comes back when a running work ends
    this.wakeup = this.timers.after(pauseLeftMs, () => {
      this.wakeup = undefined;
      this.pump();
    });
  }

  private succeeded(latencyMs: number): void {
    this.pauseMs = 0;
    const nowMs = this.nowMs();
    this.successes.add(nowMs);
    // Demand: the works running (this one included) and the deliveries waiting for a turn.
    this.limit.succeeded(latencyMs, this.running + this.waiting.length);
  }

  /**
   * A 429: counted, and the gate pauses. The limit is cut (once per round) by what the 429 says:
   * - one that names its wait (the Gemini API's `RetryInfo`) says a window of this project's is full
   *   and refuses every call until it frees: cut at once. Where a window counts refused calls too,
   *   each call sent into it costs an accepted one later, so waiting for most answers to be 429s
   *   (the rule below) kept it full of this fleet's own calls. On the sweep's tuning cells
   *   (docs/sweep.md): `tiers-250rpm-fast-everyAck-1000-refusedCount` 1.253 → 1.206 × the oracle,
   *   at a small cost where a window does not count them: `tiers-1000rpm-fast-everyAck-10000` 1.038
   *   → 1.059 (`tiers-60rpm-fast-everyAck-1000` 1.049 → 1.044);
   * - a shared pool's ({@link TransientError.sharedCapacity}) refuses a share of calls whatever this
   *   project's rate: never cut (fewer works at once would not be refused less, they would only
   *   drain slower); its works back off on their own ({@link REFUSED_WORK_BACKOFF_MS}). On the two
   *   shared-capacity tuning cells: 1.092 and 1.165 × the oracle with the cut, 1.087 and 1.165
   *   without;
   * - any other (Provisioned Throughput's, one that says nothing) once most recent answers are 429s
   *   ({@link OVER_QUOTA_SHARE}).
   */
  private rateLimited(admission: number, refusal: TransientError): void {
    const mostRefused = this.limit.refused();
    const overQuota = !refusal.sharedCapacity && (refusal.retryAfterMs !== undefined || mostRefused);
    if (overQuota && admission > this.admissionsAtLastCut) {
      // Little's law: the works at once the rate the analyzer accepted over the last minute needs.
      const latencyMs = this.limit.typicalLatencyMs;
      const sustained =
        latencyMs === undefined
          ? 0
          : Math.round((this.successes.count(this.nowMs()) * latencyMs) / THROUGHPUT_WINDOW_MS);
      this.limit.rateLimited(sustained);
      this.admissionsAtLastCut = this.admissions;
    }
    const initial = this.options.initialPauseMs ?? 100;
    this.pauseMs =
      this.pauseMs === 0 ? initial : Math.min(this.pauseMs * 2, this.options.maxPauseMs ?? 1_000);
    // Jitter on the upper half, so instances that were refused together do not come back together.
    const until = this.nowMs() + Math.round(this.pauseMs * (0.5 + this.random() / 2));
    this.pausedUntilMs = Math.max(this.pausedUntilMs, until);
  }
}
