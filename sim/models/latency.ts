import { MERGE_LATENCY_SECONDS } from '../../worker/src/contract/cost-model';
import { seededRandom } from '../random';

/**
 * Latency distributions for the sweep's platform models, drawn from a seeded generator so that two
 * runs of one seed draw the same latencies. Each states what it assumes: the documentation gives no
 * latency figure for Gemini, Cloud Storage or BigQuery DML, so every number here is an assumption,
 * named in bench/README.md's sweep section.
 */

/** Draws one latency, in simulated milliseconds. */
export type Latency = () => number;

/** A description of a distribution, kept in the results and the docs. */
export interface LatencySpec {
  name: string;
  /** Median, ms. */
  medianMs: number;
  /** Log-normal spread (σ of ln): 0 is a fixed latency. */
  sigma: number;
  /** Share of calls in the slow tail, and how many times the median a tail call takes (uniform between 3× and this). */
  tailShare: number;
  tailFactor: number;
}

/**
 * A log-normal body around the median with a separate slow tail: a share `tailShare` of calls takes
 * between 3× and `tailFactor` × the median. Assumption: public reports of LLM APIs show a right-skewed
 * body plus rare calls many times slower; neither figure is documented.
 */
export function latencyFrom(spec: LatencySpec, seed: number): Latency {
  const random = seededRandom(seed);
  return () => {
    const u = random();
    if (spec.tailShare > 0 && u < spec.tailShare) {
      return spec.medianMs * (3 + random() * (spec.tailFactor - 3));
    }
    if (spec.sigma === 0) return spec.medianMs;
    // Box–Muller from two uniforms (1 − u keeps the log away from 0).
    const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
    return spec.medianMs * Math.exp(spec.sigma * z);
  };
}

/** Uniform between `lowMs` and `highMs`. */
export function uniformLatency(lowMs: number, highMs: number, seed: number): Latency {
  const random = seededRandom(seed);
  return () => lowMs + random() * (highMs - lowMs);
}

/**
 * The one MERGE latency, shared with the cost model (worker/src/contract/cost-model.ts): uniform
 * between its low and high figure. Public reports give 2–4.5 s for single-row DML jobs; a batched
 * MERGE over `UNNEST(@rows)` is one job, so the same range is assumed whatever the batch size.
 */
export function mergeLatency(seed: number): Latency {
  return uniformLatency(MERGE_LATENCY_SECONDS.low * 1000, MERGE_LATENCY_SECONDS.high * 1000, seed);
}

/** Gemini latencies of the sweep: "fast" is the burst's 6 s with a tail; "slow" a model that thinks. */
export const GEMINI_LATENCIES: Readonly<Record<'fast' | 'slow', LatencySpec>> = Object.freeze({
  fast: { name: 'fast', medianMs: 6_000, sigma: 0.35, tailShare: 0.02, tailFactor: 10 },
  slow: { name: 'slow', medianMs: 20_000, sigma: 0.5, tailShare: 0.05, tailFactor: 8 },
});

/** How long a 429 takes to come back: assumed ~0.5 s median, with a tail (it is a round trip to a busy service). */
export const REFUSAL_LATENCY: LatencySpec = Object.freeze({
  name: '429',
  medianMs: 500,
  sigma: 0.6,
  tailShare: 0.01,
  tailFactor: 10,
});
