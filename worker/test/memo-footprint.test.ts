import { sampleAnalysis } from '../../sim/samples';
import { MemoryMemoStore } from '../src/adapters/memo-stores/memory-memo-store';
import type { AnalysisResult } from '../src/contract/analysis';
import { Deadline } from '../src/core/deadline';
import { parsePush } from '../src/core/event';
import { handle } from '../src/core/handle';
import { AnalysisMemo } from '../src/core/memo';
import { pushBody } from './support/builders';
import { transient } from './support/fakes';
import { handlerDeps } from './support/handler';
import { ManualClock, ManualTime } from './support/manual-time';
import { analyse } from './support/memo';

/**
 * An instance handles millions of deliveries; every per-key memory of its memo
 * must stay bounded, or the instance is killed for memory with no drain.
 */

const DAY_MS = 24 * 60 * 60 * 1000;
const INVOICE = 'FACTURE N° F-2026-0042\nTotal TTC : 1 234,56 €\n';

const paid = (): AnalysisResult => ({
  analysis: sampleAnalysis(),
  model: 'gemini-2.5-flash',
  usage: { promptTokens: 1200, outputTokens: 300, totalTokens: 1500 },
});
const failing = (): Promise<AnalysisResult> => Promise.reject(transient());

describe("the memo's per-key memories", () => {
  it('hold nothing for the documents written: one instance writing many documents does not grow', async () => {
    const clock = new ManualClock();
    const memo = new AnalysisMemo(new MemoryMemoStore(), { ttlMs: 8 * DAY_MS, clock });
    const { reader, deps } = handlerDeps({ clock, memo });
    for (let i = 0; i < 200; i++) {
      const body = pushBody(`m${i}`, { size: Buffer.byteLength(INVOICE), name: `2026/11/f-${i}.txt` });
      reader.putAnnounced(body, INVOICE);
      expect(await handle(parsePush(body), deps)).toMatchObject({ status: 'ok' });
    }
    expect(memo.footprint()).toEqual({ inFlight: 0, writing: 0 });
  });

  it('hold nothing for failed work: the lease is released, and the retry takes it at once', async () => {
    const clock = new ManualClock();
    const store = new MemoryMemoStore();
    const memo = new AnalysisMemo(store, { ttlMs: 8 * DAY_MS, clock });
    for (let i = 0; i < 30; i++)
      await expect(analyse(memo, `gs://b/f-${i}.pdf#1`, failing)).rejects.toMatchObject({
        code: 'analyzer_unavailable',
      });
    expect(memo.footprint()).toEqual({ inFlight: 0, writing: 0 });
    expect([...store.leases.values()].every((l) => l.released)).toBe(true);
    // The retry takes the released lease at once: no wait, no second holder.
    expect(await analyse(memo, 'gs://b/f-29.pdf#1', async () => paid())).toMatchObject({
      source: 'analyzer',
    });
  });

  it("drop the write turn of an analysis that never came to write, at its delivery's deadline", async () => {
    const time = new ManualTime();
    const memo = new AnalysisMemo(new MemoryMemoStore(), {
      ttlMs: 8 * DAY_MS,
      clock: time.clock,
      timers: time,
      sleep: time.sleep,
    });
    for (let i = 0; i < 30; i++) {
      const deadline = new Deadline(time.ms + 60_000, time.clock, time);
      await analyse(memo, `gs://b/g-${i}.pdf#1`, async () => paid(), undefined, deadline);
    }
    expect(memo.footprint().writing).toBe(30);
    // Past the deliveries' deadline, the heartbeats stop on their own, and their turns go.
    await time.advance(80_000);
    expect(memo.footprint()).toEqual({ inFlight: 0, writing: 0 });
  });
});
