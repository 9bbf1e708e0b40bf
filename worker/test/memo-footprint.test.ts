import { MemoryMemoStore } from '../src/adapters/memo-stores/memory-memo-store';
import type { AnalysisResult } from '../src/contract/analysis';
import { TransientError } from '../src/core/errors';
import { parsePush } from '../src/core/event';
import { handle } from '../src/core/handle';
import { AnalysisMemo } from '../src/core/memo';
import { pushBody } from './support/builders';
import { sampleAnalysis } from './support/fakes';
import { handlerDeps } from './support/handler';
import { ManualClock } from './support/manual-time';

/**
 * Issue 45, item 1: an instance handles millions of deliveries; every per-key memory of its memo
 * must stay bounded, or the instance is killed for memory with no drain.
 */

const DAY_MS = 24 * 60 * 60 * 1000;
const INVOICE = 'FACTURE N° F-2026-0042\nTotal TTC : 1 234,56 €\n';

const paid = (): AnalysisResult => ({
  analysis: sampleAnalysis(),
  model: 'gemini-2.5-flash',
  usage: { promptTokens: 1200, outputTokens: 300, totalTokens: 1500 },
});
const failing = async (): Promise<AnalysisResult> => {
  throw new TransientError('analyzer_unavailable', 'Gemini: 503');
};

describe("the memo's per-key memories", () => {
  it('hold nothing for the documents written: one instance writing many documents does not grow', async () => {
    const clock = new ManualClock();
    const memo = new AnalysisMemo(new MemoryMemoStore(), { ttlMs: 8 * DAY_MS, clock });
    const { reader, deps } = handlerDeps({ clock, memo });
    for (let i = 0; i < 200; i++) {
      const body = pushBody(`m${i}`, { size: Buffer.byteLength(INVOICE), name: `2026/11/f-${i}.txt` });
      const attrs = (body.message as { attributes: Record<string, string> }).attributes;
      reader.put(attrs.bucketId!, attrs.objectId!, attrs.objectGeneration!, INVOICE);
      expect(await handle(parsePush(body), deps)).toMatchObject({ status: 'ok' });
    }
    expect(memo.footprint()).toEqual({ inFlight: 0, heldHere: 0, writing: 0, expiredRounds: 0 });
  });

  it("forget the oldest failed round past their bound, and still let the latest failure's retry take its round up at once", async () => {
    const clock = new ManualClock();
    const store = new MemoryMemoStore();
    const memo = new AnalysisMemo(store, { ttlMs: 8 * DAY_MS, clock, maxRememberedKeys: 10 });
    for (let i = 0; i < 30; i++)
      await expect(memo.analyse(`gs://b/f-${i}.pdf#1`, failing)).rejects.toMatchObject({
        code: 'analyzer_unavailable',
      });
    expect(memo.footprint().heldHere).toBe(10);
    // The latest failure is still remembered: its retry here takes its live round up, no wait.
    expect(await memo.analyse('gs://b/f-29.pdf#1', async () => paid())).toMatchObject({
      source: 'analyzer',
    });
  });

  it('bound the rounds seen expired, and the write turns of analyses that never came to write', async () => {
    const clock = new ManualClock();
    const store = new MemoryMemoStore();
    const memo = new AnalysisMemo(store, { ttlMs: 8 * DAY_MS, clock, maxRememberedKeys: 10 });
    for (let i = 0; i < 30; i++) {
      // An earlier holder's round, long expired: the delivery passes over it and takes the next.
      await store.lease(AnalysisMemo.leaseKey(`gs://b/g-${i}.pdf#1`), new Date(clock.ms - 60_000));
      // Analysed, never written (its deadline ended the delivery): its write turn stays behind.
      await memo.analyse(`gs://b/g-${i}.pdf#1`, async () => paid());
    }
    const { expiredRounds, writing } = memo.footprint();
    expect(expiredRounds).toBe(10);
    expect(writing).toBeLessThanOrEqual(10);
  });
});
