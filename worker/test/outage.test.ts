import { sampleAnalysis } from '../../sim/samples';
import { MemoryMemoStore } from '../src/adapters/memo-stores/memory-memo-store';
import type { AnalysisResult } from '../src/contract/analysis';
import {
  DELIVERY_DEFAULTS,
  DEPENDENCY_OUTAGE_SECONDS,
  type DeliverySettings,
  retryHorizonSeconds,
} from '../src/contract/settings';
import { ConfigurationError, DependencyRefusedError, TransientError } from '../src/core/errors';
import { parsePush } from '../src/core/event';
import { handle } from '../src/core/handle';
import { AnalysisMemo } from '../src/core/memo';
import { type Dependency, DependencyOutageError, OUTAGE_DEFAULTS, OutageBreaker } from '../src/core/outage';
import type { Analyzer, Clock } from '../src/core/ports';
import { pushBody } from './support/builders';
import { docsTableRows } from './support/docs-table';
import { MemoryLogger } from './support/fakes';
import { handlerDeps } from './support/handler';

const HOUR_S = 3_600;

describe("Pub/Sub's retry horizon", () => {
  it('covers a 6-hour outage of a dependency with the default delivery settings', () => {
    expect(retryHorizonSeconds(DELIVERY_DEFAULTS)).toBe(56_430);
    expect(retryHorizonSeconds(DELIVERY_DEFAULTS)).toBeGreaterThanOrEqual(DEPENDENCY_OUTAGE_SECONDS);
    // Even if Pub/Sub's backoff grew by 10 % a step instead of doubling.
    expect(retryHorizonSeconds(DELIVERY_DEFAULTS, 1.1)).toBeGreaterThan(DEPENDENCY_OUTAGE_SECONDS);
  });

  it('would be 40 minutes with 10 attempts: every good document arriving in a longer outage would be dead-lettered', () => {
    expect(retryHorizonSeconds({ ...DELIVERY_DEFAULTS, maxDeliveryAttempts: 10 })).toBe(2_430);
    expect(retryHorizonSeconds({ ...DELIVERY_DEFAULTS, maxDeliveryAttempts: 15 })).toBeLessThan(2 * HOUR_S);
  });

  it('is what docs/architecture.md says, row by row', () => {
    const rows = docsTableRows('docs/architecture.md', 'retry-horizon');
    expect(rows.length).toBe(3);
    for (const [attemptsCell, , horizon] of rows.map((row) => row.map((c) => c.replaceAll('*', '')))) {
      const attempts = Number(/^\d+/.exec(attemptsCell!)?.[0]);
      const seconds = Number(/^([\d,]+) s/.exec(horizon!)?.[1]?.replaceAll(',', ''));
      expect(seconds).toBe(retryHorizonSeconds({ ...DELIVERY_DEFAULTS, maxDeliveryAttempts: attempts }));
    }
  });

  it('sums the backoffs between the attempts, capped at the maximum', () => {
    const s = { minRetryBackoffSeconds: 100, maxRetryBackoffSeconds: 300, maxDeliveryAttempts: 5 };
    expect(retryHorizonSeconds(s)).toBe(100 + 200 + 300 + 300);
  });
});

describe('OutageBreaker', () => {
  function breaker() {
    const clock = { ms: Date.parse('2026-12-02T08:00:00.000Z') };
    const logger = new MemoryLogger();
    const b = new OutageBreaker({ clock: { now: () => new Date(clock.ms) }, logger });
    /** `times` failures of `dependency` with `error`, `stepMs` apart. */
    const failFor = (dependency: Dependency, error: unknown, times: number, stepMs = 10_000) => {
      for (let i = 0; i < times; i++) {
        b.failed(dependency, error);
        clock.ms += stepMs;
      }
    };
    return { b, clock, logger, failFor };
  }
  const down = new TransientError('analyzer_unavailable', 'Gemini: 503');

  it('stays closed through a burst of failures shorter than openAfterMs', () => {
    const { b, failFor } = breaker();
    failFor('analyzer', down, 20, 1_000);
    expect(b.isOpen('analyzer')).toBe(false);
    expect(() => b.admit('analyzer')).not.toThrow();
  });

  it('opens after failures in a row over 30 s, logs the alert line, and answers fast except for a probe every 15 s', () => {
    const { b, clock, logger, failFor } = breaker();
    failFor('analyzer', down, OUTAGE_DEFAULTS.failures);
    expect(b.isOpen('analyzer')).toBe(true);
    const alert = logger.entries.find((e) => e.severity === 'ERROR');
    expect(alert).toMatchObject({ outage: 'analyzer' });
    expect(alert?.message).toContain('dependency outage: the analyzer');
    // The store is not affected.
    expect(() => b.admit('store')).not.toThrow();
    // It opened 10 s ago: answered at once, until the probe of the next interval is due.
    expect(() => b.admit('analyzer')).toThrow(DependencyOutageError);
    clock.ms += 4_000;
    expect(() => b.admit('analyzer')).toThrow(DependencyOutageError);
    clock.ms += 1_000;
    expect(() => b.admit('analyzer')).not.toThrow();
    expect(() => b.admit('analyzer')).toThrow(DependencyOutageError);
    clock.ms += 15_000;
    expect(() => b.admit('analyzer')).not.toThrow();
    // One success closes it.
    b.succeeded('analyzer');
    expect(b.isOpen('analyzer')).toBe(false);
    expect(() => b.admit('analyzer')).not.toThrow();
    expect(logger.entries.some((e) => e.outageOver === 'analyzer')).toBe(true);
  });

  it('logs the alert line again every 5 minutes while it lasts', () => {
    const { b, clock, logger, failFor } = breaker();
    failFor('store', new TransientError('bigquery_unavailable', 'BigQuery: 503'), 5);
    for (let minute = 0; minute < 30; minute++) {
      clock.ms += 60_000;
      try {
        b.admit('store');
      } catch {}
    }
    expect(logger.entries.filter((e) => e.severity === 'ERROR' && e.outage === 'store')).toHaveLength(7);
  });

  it('counts what says the dependency is out: 5xx, timeouts, a refusal of the worker; not a rate limit or a refused document', () => {
    const { b, failFor } = breaker();
    failFor('analyzer', new TransientError('analyzer_rate_limited', 'Gemini: 429'), 10);
    failFor('analyzer', new Error('a bug'), 10);
    expect(b.isOpen('analyzer')).toBe(false);
    failFor('analyzer', new DependencyRefusedError('analyzer_precondition', 'billing'), 10);
    expect(b.isOpen('analyzer')).toBe(true);
  });

  it("counts a model Gemini does not serve (404, a configuration fault) as the analyzer's outage, not a store's fault", () => {
    const { b, clock } = breaker();
    for (let i = 0; i < 10; i++) {
      b.failed('store', new ConfigurationError('bytes_billed_limit', 'raise MAXIMUM_BYTES_BILLED'));
      b.failed('analyzer', new ConfigurationError('analyzer_model_not_found', 'Gemini: 404'));
      clock.ms += 10_000;
    }
    expect(b.isOpen('store')).toBe(false);
    expect(b.isOpen('analyzer')).toBe(true);
  });
});

/**
 * A dependency out for 6 hours while documents arrive at a steady rate, each message retried by
 * Pub/Sub on the default retry policy (backoff doubling from 10 s to 600 s, 100 attempts): what the
 * worker does with every delivery, on one instance, in simulated time.
 */
describe('a 6-hour outage of a dependency', () => {
  const INVOICE = 'FACTURE N° F-2026-0042\nTotal TTC : 1 234,56 €\n';
  const settings: DeliverySettings = DELIVERY_DEFAULTS;
  const OUTAGE_MS = DEPENDENCY_OUTAGE_SECONDS * 1000;
  const ARRIVAL_EVERY_MS = 60_000;

  function run(dependency: Dependency) {
    const start = Date.parse('2026-12-02T00:00:00.000Z');
    let nowMs = start;
    const clock: Clock = { now: () => new Date(nowMs) };
    const logger = new MemoryLogger();
    const outage = new OutageBreaker({ clock, logger });
    const out = () => nowMs < start + OUTAGE_MS;
    const calls = { analyzer: 0, paid: 0, writes: 0 };
    const analyzer: Analyzer = {
      async analyze(): Promise<AnalysisResult> {
        calls.analyzer++;
        if (dependency === 'analyzer' && out())
          throw new TransientError('analyzer_unavailable', 'Gemini: 503');
        calls.paid++;
        return {
          analysis: sampleAnalysis(),
          model: 'm',
          usage: { promptTokens: 10, outputTokens: 5, totalTokens: 15 },
        };
      },
    };
    const memo = new AnalysisMemo(new MemoryMemoStore(), { ttlMs: 15 * 24 * HOUR_S * 1000, clock });
    const { store, reader, deps } = handlerDeps({ clock, memo });
    const record = store.record.bind(store);
    store.record = async (row) => {
      calls.writes++;
      if (dependency === 'store' && out()) throw new TransientError('bigquery_unavailable', 'BigQuery: 503');
      return record(row);
    };
    const seen = store.seen.bind(store);
    store.seen = async (key) => {
      if (dependency === 'store' && out()) throw new TransientError('bigquery_unavailable', 'BigQuery: 503');
      return seen(key);
    };
    deps.store = outage.store(store);
    deps.analyzer = outage.analyzer(analyzer);
    deps.outage = outage;
    return { start, setNow: (ms: number) => (nowMs = ms), deps, reader, calls, logger, outage, out };
  }

  it.each(['analyzer', 'store'] as const)(
    'the %s: no document dead-lettered, each ok within one backoff of recovery, paid once, alerted while it lasts',
    async (dependency) => {
      const world = run(dependency);
      // Documents arrive every minute during the outage and for an hour after.
      const arrivals = (OUTAGE_MS + 3_600_000) / ARRIVAL_EVERY_MS;
      type Delivery = { atMs: number; doc: number; attempt: number };
      const queue: Delivery[] = [];
      const bodies = new Map<number, ReturnType<typeof pushBody>>();
      for (let doc = 0; doc < arrivals; doc++) {
        const body = pushBody(`m-${doc}`, { name: `in/${doc}.txt`, size: Buffer.byteLength(INVOICE) });
        world.reader.putAnnounced(body, INVOICE);
        bodies.set(doc, body);
        queue.push({ atMs: world.start + doc * ARRIVAL_EVERY_MS, doc, attempt: 1 });
      }
      const okAt = new Map<number, number>();
      const deadLettered: number[] = [];
      let callsWhileOut = 0;
      let alertsWhileOut = 0;
      while (queue.length > 0) {
        queue.sort((a, b) => a.atMs - b.atMs);
        const next = queue.shift()!;
        world.setNow(next.atMs);
        const before = world.calls.analyzer + world.calls.writes;
        try {
          const outcome = await handle(parsePush(bodies.get(next.doc)!), world.deps);
          expect(outcome.status).toBe('ok');
          okAt.set(next.doc, next.atMs);
        } catch (error) {
          expect(error).toBeInstanceOf(TransientError);
          if (next.attempt >= settings.maxDeliveryAttempts) deadLettered.push(next.doc);
          else {
            const backoffS = Math.min(
              settings.maxRetryBackoffSeconds,
              settings.minRetryBackoffSeconds * 2 ** (next.attempt - 1),
            );
            queue.push({ atMs: next.atMs + backoffS * 1000, doc: next.doc, attempt: next.attempt + 1 });
          }
        }
        if (world.out()) callsWhileOut += world.calls.analyzer + world.calls.writes - before;
      }
      for (const e of world.logger.entries)
        if (e.severity === 'ERROR' && e.outage === dependency) alertsWhileOut++;

      const recoveryMs = world.start + OUTAGE_MS;
      expect(deadLettered).toEqual([]);
      expect(okAt.size).toBe(arrivals);
      // From recovery (or its arrival, when later) to its ok row.
      const lateness = Math.max(
        ...[...okAt].map(([doc, at]) => at - Math.max(recoveryMs, world.start + doc * ARRIVAL_EVERY_MS)),
      );
      expect(lateness).toBeLessThanOrEqual(settings.maxRetryBackoffSeconds * 1000);
      // Paid once per document: a failed call is not billed, the memo keeps what a failed write paid.
      expect(world.calls.paid / arrivals).toBeLessThanOrEqual(1.01);
      // The breaker let through about one probe every 15 s, not every retry of every document.
      const retries = arrivals * 30;
      expect(callsWhileOut).toBeLessThan(OUTAGE_MS / OUTAGE_DEFAULTS.probeEveryMs + 20);
      expect(callsWhileOut).toBeLessThan(retries / 5);
      // An alert line at least every 5 minutes while it lasted, and none left open after.
      expect(alertsWhileOut).toBeGreaterThanOrEqual(OUTAGE_MS / OUTAGE_DEFAULTS.remindEveryMs - 1);
      expect(world.outage.isOpen(dependency)).toBe(false);
    },
  );
});
