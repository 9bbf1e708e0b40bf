import type { AnalysisResult } from '../contract/analysis';
import type { Row } from '../contract/row';
import type { Deadline } from './deadline';
import { ConfigurationError, DependencyRefusedError, OutcomeUnknownError, TransientError } from './errors';
import { type Analyzer, type AnalyzerInput, type Clock, type Logger, type Store, systemClock } from './ports';

/**
 * The outage breaker: one per instance, watching the two paid dependencies a delivery cannot do
 * without, the analyzer (Gemini) and the store (BigQuery).
 *
 * Why: an outage of either can last hours (a regional incident, a billing or quota problem). Every
 * delivery meanwhile fails, and Pub/Sub retries it, up to `maxDeliveryAttempts` times (its retry
 * horizon covers `DEPENDENCY_OUTAGE_SECONDS`, contract/settings.ts). Without a breaker each of
 * those retries looks the document up (a billed BigQuery statement), reads it, and calls the
 * analyzer, where a call that times out may still be billed. With it, once a dependency has failed
 * `failures` calls in a row over at least `openAfterMs`, a delivery that needs it is answered 503 at
 * once, before it costs anything ({@link DependencyOutageError}); one delivery every `probeEveryMs`
 * goes through to see whether it is back, and the first call of the dependency that succeeds closes
 * the breaker. So a recovery is seen within one probe interval of any instance, and the backlog
 * flows again at the pace Pub/Sub redelivers it.
 *
 * While a breaker is open, an ERROR line with the field `outage` is logged when it opens and again
 * every `remindEveryMs`: the stack's outage alert matches it, and stays open while it lasts.
 */

/** What a delivery calls that can be out. */
export type Dependency = 'analyzer' | 'store';

/** The delivery was not started because its dependency is out: 503, Pub/Sub retries it later. */
export class DependencyOutageError extends TransientError {
  constructor(dependency: Dependency, sinceMs: number) {
    super(
      'dependency_outage',
      `the ${dependency} has been failing since ${new Date(sinceMs).toISOString()}: answered without calling it, Pub/Sub retries the message`,
    );
  }
}

export interface OutageBreakerOptions {
  clock?: Clock;
  logger?: Logger;
}

/** The breaker's thresholds. */
export const OUTAGE_DEFAULTS = Object.freeze({
  /** Failed calls in a row that open the breaker… */
  failures: 5,
  /** …spanning at least this long, so that a burst of errors does not open it. */
  openAfterMs: 30_000,
  /** While open, one delivery this often goes through as a probe. */
  probeEveryMs: 15_000,
  /** While open, the alert line is logged again this often. */
  remindEveryMs: 300_000,
});

/**
 * The failures of each dependency that say it is out rather than busy or refusing one document. A
 * rate limit (429) is not one: the quota gate waits a spent quota out in line, inside the request,
 * and a burst of 429s must not turn into fast 503s.
 */
const OUTAGE_CODES: Readonly<Record<Dependency, readonly string[]>> = {
  analyzer: ['analyzer_unavailable', 'analyzer_timeout'],
  store: ['bigquery_unavailable', 'bigquery_timeout', 'bigquery_outcome_unknown'],
};

/** The analyzer's code for a model Gemini does not serve (adapters/analyzers/gemini-analyzer.ts). */
export const MODEL_NOT_FOUND = 'analyzer_model_not_found';

/** Whether `error`, from a call of `dependency`, says that the dependency is out. */
export function isOutage(dependency: Dependency, error: unknown): boolean {
  if (error instanceof DependencyRefusedError) return true;
  // A model Gemini does not serve refuses every delivery alike, as a refusal does.
  if (error instanceof ConfigurationError && error.code === MODEL_NOT_FOUND) return dependency === 'analyzer';
  if (error instanceof OutcomeUnknownError) return dependency === 'store';
  return error instanceof TransientError && OUTAGE_CODES[dependency].includes(error.code);
}

interface State {
  /** Failed calls in a row, and when the first of them failed. */
  failures: number;
  firstFailureMs: number;
  /** When the breaker opened; undefined while it is closed. */
  openSinceMs?: number;
  lastProbeMs: number;
  lastAlertMs: number;
  lastError?: string;
}

export class OutageBreaker {
  private readonly states = new Map<Dependency, State>();
  private readonly clock: Clock;

  constructor(private readonly options: OutageBreakerOptions = {}) {
    this.clock = options.clock ?? systemClock;
  }

  /** Whether the breaker of `dependency` is open now. */
  isOpen(dependency: Dependency): boolean {
    return this.states.get(dependency)?.openSinceMs !== undefined;
  }

  /**
   * Lets a delivery that needs `dependency` go on, or throws {@link DependencyOutageError} while it
   * is out, except for one probe every `probeEveryMs`. Costs nothing.
   */
  admit(dependency: Dependency): void {
    const state = this.states.get(dependency);
    if (state?.openSinceMs === undefined) return;
    const nowMs = this.now();
    this.remind(dependency, state, nowMs);
    if (nowMs - state.lastProbeMs >= OUTAGE_DEFAULTS.probeEveryMs) {
      state.lastProbeMs = nowMs;
      return;
    }
    throw new DependencyOutageError(dependency, state.openSinceMs);
  }

  /** A call of `dependency` answered: it is not out (any longer). */
  succeeded(dependency: Dependency): void {
    const state = this.states.get(dependency);
    if (!state) return;
    if (state.openSinceMs !== undefined) {
      this.options.logger?.warn(`dependency back: the ${dependency} answers again`, {
        outageOver: dependency,
        lastedMs: this.now() - state.openSinceMs,
      });
    }
    this.states.delete(dependency);
  }

  /** A call of `dependency` failed: counted when the failure says it is out. */
  failed(dependency: Dependency, error: unknown): void {
    if (!isOutage(dependency, error)) return;
    const nowMs = this.now();
    const state = this.states.get(dependency) ?? {
      failures: 0,
      firstFailureMs: nowMs,
      lastProbeMs: nowMs,
      lastAlertMs: Number.NEGATIVE_INFINITY,
    };
    state.failures += 1;
    state.lastError = error instanceof Error ? error.message : String(error);
    this.states.set(dependency, state);
    if (
      state.openSinceMs === undefined &&
      state.failures >= OUTAGE_DEFAULTS.failures &&
      nowMs - state.firstFailureMs >= OUTAGE_DEFAULTS.openAfterMs
    ) {
      state.openSinceMs = state.firstFailureMs;
      state.lastProbeMs = nowMs;
      this.remind(dependency, state, nowMs);
    }
  }

  /** The analyzer, its calls counted by this breaker. */
  analyzer(inner: Analyzer): Analyzer {
    return {
      analyze: (input: AnalyzerInput): Promise<AnalysisResult> =>
        this.watch('analyzer', inner.analyze(input)),
    };
  }

  /** The store, its calls counted by this breaker (a batch that fails fails each of its deliveries). */
  store(inner: Store): Store {
    return {
      seen: (key: string, deadline?: Deadline) => this.watch('store', inner.seen(key, deadline)),
      record: (row: Row, deadline?: Deadline) => this.watch('store', inner.record(row, deadline)),
      ping: () => inner.ping(),
      ...(inner.drain ? { drain: () => inner.drain?.() } : {}),
      ...(inner.close ? { close: () => inner.close?.() ?? Promise.resolve() } : {}),
    };
  }

  private async watch<T>(dependency: Dependency, call: Promise<T>): Promise<T> {
    try {
      const answer = await call;
      this.succeeded(dependency);
      return answer;
    } catch (error) {
      this.failed(dependency, error);
      throw error;
    }
  }

  /** The alert line: when the breaker opens, and again every `remindEveryMs` while it is open. */
  private remind(dependency: Dependency, state: State, nowMs: number): void {
    if (state.openSinceMs === undefined || nowMs - state.lastAlertMs < OUTAGE_DEFAULTS.remindEveryMs) return;
    state.lastAlertMs = nowMs;
    this.options.logger?.error(
      `dependency outage: the ${dependency} has failed every call since ${new Date(state.openSinceMs).toISOString()}; ` +
        `deliveries that need it are answered 503 without calling it, one probe every ${Math.round(OUTAGE_DEFAULTS.probeEveryMs / 1000)} s`,
      {
        outage: dependency,
        sinceMs: state.openSinceMs,
        failures: state.failures,
        lastError: state.lastError,
      },
    );
  }

  private now(): number {
    return this.clock.now().getTime();
  }
}
