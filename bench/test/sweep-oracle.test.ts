import { GeminiPortModel } from '../../sim/models/gemini';
import { MERGE_LATENCY_SECONDS } from '../../worker/src/contract/cost-model';
import { type CellSpec, runConsumer } from '../sweep/cell';
import { sweepGrid } from '../sweep/grid';

const spec = (overrides: Partial<CellSpec> = {}): CellSpec => ({
  analyzer: 'tiers',
  quota: 600,
  latency: 'fast',
  window: 'everyAck',
  documents: 60,
  backlog: 'upload',
  seed: 3,
  ...overrides,
});

describe('the oracle consumer', () => {
  it.each(['tiers', 'shared'] as const)(
    'on the %s model: analyses each document once, is never refused, never nacks, and bounds docline',
    async (analyzer) => {
      const oracle = await runConsumer(spec({ analyzer }), 'oracle');
      const docline = await runConsumer(spec({ analyzer }), 'docline');
      expect(oracle.figures.drained).toBe(true);
      expect(oracle.figures.paidAnalyses).toBe(60);
      expect(oracle.figures.refused429).toBe(0);
      expect(oracle.figures.nacks).toBe(0);
      expect(oracle.figures.lost).toBe(0);
      expect(docline.figures.viewRows).toBe(60);
      expect(docline.figures.drainMs).toBeGreaterThanOrEqual(oracle.figures.drainMs);
    },
  );

  it('is held back by the quota it knows: at 60 per minute, 60 documents need about a minute more than the upload', async () => {
    const oracle = await runConsumer(spec({ quota: 60 }), 'oracle');
    // 60 uploads spread over 60 s, 60 accepted per sliding minute, plus the last analysis' latency.
    expect(oracle.figures.drainMs).toBeGreaterThan(60_000);
    expect(oracle.figures.drainMs).toBeLessThan(60_000 + 60_000);
  });

  it('acks only once its line is written: each push outlasts its analysis by at least one MERGE', async () => {
    const analysedMs: number[] = [];
    const call = GeminiPortModel.prototype.call;
    const spy = jest.spyOn(GeminiPortModel.prototype, 'call').mockImplementation(async function (
      this: GeminiPortModel,
      name: string,
    ) {
      const startedMs = Date.now(); // virtual time: the cell installs it
      const paid = await call.call(this, name);
      analysedMs.push(Date.now() - startedMs);
      return paid;
    });
    try {
      const oracle = await runConsumer(spec({ documents: 1 }), 'oracle');
      expect(analysedMs).toHaveLength(1);
      expect(oracle.figures.drainMs).toBeGreaterThanOrEqual(
        analysedMs[0]! + MERGE_LATENCY_SECONDS.low * 1000,
      );
    } finally {
      spy.mockRestore();
    }
  });

  it("perDelivery, the burst's baseline, writes each delivery's row in a MERGE of its own and keeps no memo", async () => {
    const baseline = await runConsumer(spec(), 'perDelivery');
    const docline = await runConsumer(spec(), 'docline');
    expect(baseline.figures.viewRows).toBe(60);
    // A MERGE per delivery that came to write (a doubled notification's second one too)…
    expect(baseline.figures.merges).toBeGreaterThanOrEqual(60);
    expect(baseline.figures.lookups).toBeGreaterThanOrEqual(60);
    expect(baseline.figures.memoClassA + baseline.figures.memoClassB).toBe(0);
    // …where group commit gathers them, and the memo is used.
    expect(docline.figures.merges).toBeLessThan(baseline.figures.merges);
    expect(docline.figures.memoClassA).toBeGreaterThan(0);
  });

  it('replays exactly for one seed', async () => {
    const a = await runConsumer(spec({ analyzer: 'shared' }), 'docline');
    const b = await runConsumer(spec({ analyzer: 'shared' }), 'docline');
    expect({ ...a.figures, wallSeconds: 0 }).toEqual({ ...b.figures, wallSeconds: 0 });
  });

  it('a backfill goes through reconcile: everything listed is missing and announced once', async () => {
    const run = await runConsumer(spec({ backlog: 'backfill', documents: 120, quota: 4_000 }), 'docline');
    expect(run.reconcile).toMatchObject({ listed: 120, missing: 120, listCalls: 1, publishCalls: 2 });
    expect(run.figures.pushes).toBeGreaterThanOrEqual(120);
    expect(run.figures.viewRows).toBe(120);
    expect(run.figures.deadLetters).toBe(0);
  });
});

describe('the grid', () => {
  it('marks exactly the tuning set as tuning and spans the quotas, models and backlogs of the issue', () => {
    const grid = sweepGrid(false);
    // The burst's point and one cell per other regime; every other cell is reported, never tuned on.
    expect(grid.filter((c) => c.tuning).map((c) => c.name)).toEqual([
      'tiers-60rpm-fast-everyAck-1000',
      'tiers-1000rpm-fast-fastAcksOnly-1000',
      'shared-1000rpm-slow-everyAck-1000',
      'tiers-1000rpm-fast-everyAck-10000',
      'tiers-250rpm-fast-everyAck-1000-refusedCount',
      'shared-250rpm-fast-fastAcksOnly-1000',
    ]);
    // 28 cells, then 7 with the public reports' MERGE latency (2–4.5 s), 4 whose tier counts refused
    // calls and 1 with Tier 1's spend limit.
    expect(grid.filter((c) => !c.tuning)).toHaveLength(40);
    expect(grid.filter((c) => c.mergeSeconds?.low === 2 && c.mergeSeconds.high === 4.5)).toHaveLength(7);
    expect(grid.filter((c) => !c.tuning && c.refusedCount && c.analyzer === 'tiers')).toHaveLength(4);
    expect(grid.filter((c) => c.spendTier === 'Tier 1' && c.analyzer === 'tiers')).toHaveLength(1);
    // None of them is a tuning cell: the defaults were never chosen on them. The one tuning cell whose
    // tier counts refused calls has a quota no reported cell has.
    expect(grid.filter((c) => c.tuning && (c.mergeSeconds || c.spendTier))).toEqual([]);
    // So do the ones whose tier counts refused calls and the shared capacity's fast one.
    expect(grid.filter((c) => c.tuning && c.quota === 250).map((c) => c.analyzer)).toEqual([
      'tiers',
      'shared',
    ]);
    expect(grid.filter((c) => !c.tuning && c.quota === 250)).toEqual([]);
    expect(new Set(grid.map((c) => c.quota))).toEqual(new Set([60, 250, 1_000, 4_000]));
    expect(new Set(grid.map((c) => c.analyzer))).toEqual(new Set(['tiers', 'shared']));
    expect(new Set(grid.map((c) => c.window))).toEqual(new Set(['everyAck', 'fastAcksOnly']));
    expect(new Set(grid.map((c) => c.documents))).toEqual(new Set([1_000, 10_000, 100_000]));
    expect(grid.filter((c) => c.documents === 100_000).every((c) => c.backlog === 'backfill')).toBe(true);
    expect(new Set(grid.map((c) => c.name)).size).toBe(grid.length);
  });
});
