import { MemoryMemoStore } from '../src/adapters/memo-stores/memory-memo-store';
import type { AnalysisResult } from '../src/contract/analysis';
import { TransientError } from '../src/core/errors';
import { parsePush } from '../src/core/event';
import { handle } from '../src/core/handle';
import { AnalysisMemo, LeaseRoundsUsedUpError } from '../src/core/memo';
import { DependencyOutageError, OutageBreaker } from '../src/core/outage';
import { pushBody } from './support/builders';
import { MemoryLogger, sampleAnalysis } from './support/fakes';
import { handlerDeps } from './support/handler';
import { ManualClock } from './support/manual-time';

/**
 * Issue 45, item 2: hours of dependency trouble must not use up a key's lease rounds, and rounds
 * used up must never mean working (paying, writing) without a lease.
 */

const DAY_MS = 24 * 60 * 60 * 1000;
const INVOICE = 'FACTURE N° F-2026-0042\nTotal TTC : 1 234,56 €\n';

describe('lease rounds under dependency trouble', () => {
  it('answers 503 from an open outage breaker before any lease round is taken', async () => {
    const clock = new ManualClock();
    const memoStore = new MemoryMemoStore();
    const outage = new OutageBreaker({ clock, failures: 1, openAfterMs: 0, probeEveryMs: 3_600_000 });
    const memo = new AnalysisMemo(memoStore, { ttlMs: 8 * DAY_MS, clock });
    const { reader, analyzer, deps } = handlerDeps({ clock, memo, outage });
    outage.failed('analyzer', new TransientError('analyzer_unavailable', 'Gemini: 503'));
    clock.ms += 1_000; // past the probe that opening the breaker let through
    const body = pushBody('1', { size: Buffer.byteLength(INVOICE) });
    const attrs = (body.message as { attributes: Record<string, string> }).attributes;
    reader.put(attrs.bucketId!, attrs.objectId!, attrs.objectGeneration!, INVOICE);
    for (let attempt = 0; attempt < 20; attempt++) {
      await expect(handle(parsePush(body), deps)).rejects.toBeInstanceOf(DependencyOutageError);
      clock.ms += 20_000; // Pub/Sub's backoff: each attempt comes after the last round expired
      outage.failed('analyzer', new TransientError('analyzer_unavailable', 'Gemini: 503'));
    }
    expect(memoStore.leases.size).toBe(0);
    expect(analyzer.calls).toHaveLength(0);
  });

  it('answers 503 when every round is used up, never analysing or writing without a lease', async () => {
    const clock = new ManualClock();
    const memoStore = new MemoryMemoStore();
    const logger = new MemoryLogger();
    const memo = new AnalysisMemo(memoStore, { ttlMs: 8 * DAY_MS, clock, maxLeaseRounds: 3, logger });
    const key = 'gs://acme/2026/11/f.pdf#1';
    const base = AnalysisMemo.leaseKey(key);
    for (const round of [base, `${base}~1`, `${base}~2`])
      await memoStore.lease(round, new Date(clock.ms - 1));
    const work = jest.fn(
      async (): Promise<AnalysisResult> => ({
        analysis: sampleAnalysis(),
        model: 'gemini-2.5-flash',
        usage: { promptTokens: 1, outputTokens: 1, totalTokens: 2 },
      }),
    );
    await expect(memo.analyse(key, work)).rejects.toBeInstanceOf(LeaseRoundsUsedUpError);
    await expect(memo.writeTurn(key)).rejects.toMatchObject({ code: 'lease_rounds_used_up' });
    expect(work).not.toHaveBeenCalled();
    expect(logger.entries.some((e) => e.severity === 'ERROR' && /no lease round left/.test(e.message))).toBe(
      true,
    );
  });
});
