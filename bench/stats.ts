/**
 * Small statistics helpers for the benchmark: nearest-rank percentiles, throughput summaries and
 * ratios. Pure functions, so the unit tests can check them by hand-computed examples.
 */

/** Throughput and latency of one measured run. */
export interface RunSummary {
  /** Requests (or messages) completed. */
  count: number;
  elapsedMs: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
}

/**
 * The nearest-rank percentile (the smallest value with at least `p` % of the values at or below it).
 * Returns NaN for no values, so an empty run can never pass for a fast one.
 */
export function percentile(values: ArrayLike<number>, p: number): number {
  if (p < 0 || p > 100) throw new Error(`percentile must be within 0..100 (got ${p})`);
  if (values.length === 0) return Number.NaN;
  const sorted = Float64Array.from(values).sort();
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1]!;
}

/** Summarises latencies (ms) measured over `elapsedMs` of wall time. */
export function summarize(latenciesMs: ArrayLike<number>, elapsedMs: number): RunSummary {
  const count = latenciesMs.length;
  return {
    count,
    elapsedMs,
    perSecond: elapsedMs > 0 ? (count * 1000) / elapsedMs : Number.NaN,
    p50Ms: percentile(latenciesMs, 50),
    p99Ms: percentile(latenciesMs, 99),
  };
}

/** The median (mean of the two middle values for an even count); NaN when empty. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** `numerator / denominator`, NaN when the denominator is not a positive number. */
export function ratio(numerator: number, denominator: number): number {
  return denominator > 0 ? numerator / denominator : Number.NaN;
}
