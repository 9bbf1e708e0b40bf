import { VirtualTime } from '../../sim/faults/virtual-time';
import { SimBucketStore } from '../../sim/models/cloud-storage';
import {
  GeminiPortModel,
  geminiCallUsd,
  SharedCapacity,
  SPEND_WINDOW_MS,
  SpendWindow,
  slotDraw,
  sweepLatencies,
  TierQuota,
} from '../../sim/models/gemini';
import { GEMINI_LATENCIES, latencyFrom, mergeLatency } from '../../sim/models/latency';
import { EVERY_ACK, FAST_ACKS_ONLY } from '../../sim/models/push-window';
import { Warehouse, type WarehouseOptions } from '../../sim/models/warehouse';
import { GcsMemoStore } from '../../worker/src/adapters/memo-stores/gcs-memo-store';
import { COST_DEFAULTS, MERGE_LATENCY_SECONDS, PRICES } from '../../worker/src/contract/cost-model';
import { GEMINI_API_TIERS } from '../../worker/src/contract/gemini-tiers';
import { ConfigurationError, TransientError } from '../../worker/src/core/errors';
import { testRow as sampleRow } from '../../worker/test/support/builders';
import { analysisUsd, comparisonBilledBytes } from '../sweep/cell';
import { sweepGrid } from '../sweep/grid';

describe('latency distributions', () => {
  it('draw the same values for the same seed, around the median, with a slow tail', () => {
    const a = latencyFrom(GEMINI_LATENCIES.fast, 7);
    const b = latencyFrom(GEMINI_LATENCIES.fast, 7);
    const draws = Array.from({ length: 4_000 }, () => a());
    expect(Array.from({ length: 4_000 }, () => b())).toEqual(draws);
    const sorted = [...draws].sort((x, y) => x - y);
    const median = sorted[2_000]!;
    expect(median).toBeGreaterThan(5_000);
    expect(median).toBeLessThan(7_000);
    // The tail: about 2 % of calls take 3× the median or more.
    const slow = draws.filter((d) => d >= 3 * 6_000).length / draws.length;
    expect(slow).toBeGreaterThan(0.01);
    expect(slow).toBeLessThan(0.04);
  });

  it('MERGE latency stays within the one range the cost model uses', () => {
    const draw = mergeLatency(3);
    const draws = Array.from({ length: 1_000 }, () => draw());
    expect(Math.min(...draws)).toBeGreaterThanOrEqual(MERGE_LATENCY_SECONDS.low * 1000);
    expect(Math.max(...draws)).toBeLessThanOrEqual(MERGE_LATENCY_SECONDS.high * 1000);
    expect(COST_DEFAULTS.mergeSecondsLow).toBe(MERGE_LATENCY_SECONDS.low);
    expect(COST_DEFAULTS.mergeSecondsHigh).toBe(MERGE_LATENCY_SECONDS.high);
  });
});

describe('Gemini tiers (RPM and TPM windows)', () => {
  it('refuses past the requests per minute, and accepts again exactly when the window frees', async () => {
    const time = new VirtualTime();
    const quota = new TierQuota(time, { requestsPerMinute: 3, tokensPerMinute: 1_000_000 });
    expect([1, 2, 3].map(() => quota.tryAccept(100))).toEqual([true, true, true]);
    expect(quota.tryAccept(100)).toBe(false);
    const at = quota.nextAcceptMs(100);
    expect(at).toBeCloseTo(60_000, 0);
    await time.advanceTo(at - 1);
    expect(quota.tryAccept(100)).toBe(false);
    await time.advanceTo(at);
    expect(quota.tryAccept(100)).toBe(true);
  });

  it('counts a refused call against the window when the tier is built to (a 429 is not said to be free)', async () => {
    const lenient = new VirtualTime();
    const strict = new VirtualTime();
    const free = new TierQuota(lenient, { requestsPerMinute: 1, tokensPerMinute: 1e9 });
    const counted = new TierQuota(strict, {
      requestsPerMinute: 1,
      tokensPerMinute: 1e9,
      countsRefused: true,
    });
    for (const [time, quota] of [
      [lenient, free],
      [strict, counted],
    ] as const) {
      expect(quota.tryAccept(100)).toBe(true);
      await time.advanceTo(30_000);
      expect(quota.tryAccept(100)).toBe(false);
      await time.advanceTo(61_000);
    }
    // A minute after the accepted call: free again, unless the refused call at 30 s still counts.
    expect(free.tryAccept(100)).toBe(true);
    expect(counted.tryAccept(100)).toBe(false);
    // The refused call at 61 s counted too: free once it has left the window.
    await strict.advanceTo(121_001);
    expect(counted.tryAccept(100)).toBe(true);
  });

  it('refuses past the requests per day, its window starting with the previous day of a steady flow', () => {
    const time = new VirtualTime();
    const quota = new TierQuota(time, {
      requestsPerMinute: 100,
      tokensPerMinute: 1e9,
      requestsPerDay: 722,
      // Half a request a minute over the past day (exact in binary: no rounding at the limit).
      requestsInPastDay: 720,
    });
    expect([1, 2, 3].map(() => quota.tryAccept(100))).toEqual([true, true, false]);
    expect(quota.refusedForTheDay).toBe(1);
    // A whole request frees when the past day's two oldest minutes (half a request each) have left.
    expect(quota.nextAcceptMs(100)).toBeCloseTo(120_000, -1);
  });

  it('refuses past the tokens per minute even under the request limit', () => {
    const time = new VirtualTime();
    const quota = new TierQuota(time, { requestsPerMinute: 100, tokensPerMinute: 5_000 });
    expect(quota.tryAccept(3_000)).toBe(true);
    expect(quota.tryAccept(2_500)).toBe(false);
    expect(quota.tryAccept(2_000)).toBe(true);
  });

  it('a 429 takes time and is not paid', async () => {
    const time = new VirtualTime();
    const gemini = new GeminiPortModel(
      time,
      new TierQuota(time, { requestsPerMinute: 1, tokensPerMinute: 1e9 }),
      sweepLatencies(GEMINI_LATENCIES.fast, 1),
    );
    const first = gemini.call('a');
    const second = gemini.call('b');
    let refusedAt = -1;
    void second.then(() => {
      refusedAt = time.nowMs();
    });
    await time.run(() => refusedAt >= 0, 600_000);
    expect(await second).toBe(false);
    expect(refusedAt).toBeGreaterThan(0);
    expect(gemini.refused).toBe(1);
    let analysed = false;
    void first.then((ok) => {
      analysed = ok;
    });
    await time.run(() => analysed, 600_000);
    expect(gemini.paid).toBe(1);
    // The accepted call took its latency: far longer than the refusal.
    expect(time.nowMs()).toBeGreaterThan(refusedAt);
  });
});

describe("the Gemini API's spend-based rate limit (USD over a rolling 10 minutes)", () => {
  const roomy = (time: VirtualTime) =>
    new TierQuota(time, { requestsPerMinute: 1_000, tokensPerMinute: 1e9 });

  it('prices a call at the priced model: its input tokens and 400 output tokens', () => {
    expect(geminiCallUsd(1_000)).toBeCloseTo(
      (1_000 * PRICES.geminiInputUsdPerMillionTokens + 400 * PRICES.geminiOutputUsdPerMillionTokens) / 1e6,
      15,
    );
    expect(analysisUsd('sweep/000001-a.txt')).toBeGreaterThan(geminiCallUsd(1_000) - 1e-12);
  });

  it('refuses the call that would spend past the limit, spends nothing for it, and accepts again when the oldest spend leaves', async () => {
    const time = new VirtualTime();
    const spend = new SpendWindow(time, roomy(time), 2.5 * geminiCallUsd(1_000));
    expect(spend.tryAccept(1_000)).toBe(true);
    await time.advanceTo(60_000);
    expect(spend.tryAccept(1_000)).toBe(true);
    expect(spend.tryAccept(1_000)).toBe(false);
    expect(spend.refusedForSpend).toBe(1);
    expect(spend.spentUsd()).toBeCloseTo(2 * geminiCallUsd(1_000), 15);
    // The first call's spend leaves the window 10 minutes after it: not a minute, as RPM would.
    const at = spend.nextAcceptMs(1_000);
    expect(at).toBeCloseTo(SPEND_WINDOW_MS, 0);
    await time.advanceTo(SPEND_WINDOW_MS - 1);
    expect(spend.tryAccept(1_000)).toBe(false);
    await time.advanceTo(at);
    expect(spend.tryAccept(1_000)).toBe(true);
  });

  it("answers the oracle with the later of its own window and the tier's", async () => {
    const time = new VirtualTime();
    const spend = new SpendWindow(
      time,
      new TierQuota(time, { requestsPerMinute: 1, tokensPerMinute: 1e9 }),
      100 * geminiCallUsd(1_000),
    );
    expect(spend.tryAccept(1_000)).toBe(true);
    // Spend to spare: the tier's minute decides.
    expect(spend.nextAcceptMs(1_000)).toBeCloseTo(60_000, 0);
    // A call the tier refuses is not counted as spent.
    expect(spend.tryAccept(1_000)).toBe(false);
    expect(spend.spentUsd()).toBeCloseTo(geminiCallUsd(1_000), 15);
    expect(spend.refusedForSpend).toBe(0);
  });

  it('is in the sweep at Tier 1, where a 10,000-upload backlog spends past it', () => {
    const tier1 = GEMINI_API_TIERS.find((t) => t.name === 'Tier 1')!;
    const [spendCell] = sweepGrid(false, ['tiers-4000rpm-fast-everyAck-10000-tier1spend']);
    expect(spendCell).toMatchObject({ spendTier: 'Tier 1', documents: 10_000, tuning: false });
    // The backlog's analyses cost more than Tier 1 lets through in 10 minutes.
    expect(10_000 * geminiCallUsd(1_000)).toBeGreaterThan(tier1.spendUsdPer10Minutes);
  });
});

describe('Gemini shared capacity (Dynamic Shared Quota)', () => {
  it('has random bursts whose intensity varies, the same for the same seed', () => {
    const time = new VirtualTime();
    const a = new SharedCapacity(time, { requestsPerMinute: 1_000, seed: 4, horizonMs: 86_400_000 });
    const b = new SharedCapacity(time, { requestsPerMinute: 1_000, seed: 4, horizonMs: 86_400_000 });
    expect(a.bursts).toEqual(b.bursts);
    expect(a.bursts.length).toBeGreaterThan(100);
    const intensities = a.bursts.map((x) => x.intensity);
    expect(Math.max(...intensities) - Math.min(...intensities)).toBeGreaterThan(0.4);
    const burst = a.bursts[0]!;
    expect(a.intensityAt(burst.atMs + 1)).toBe(burst.intensity);
    expect(a.intensityAt(burst.atMs - 1)).toBe(0);
  });

  it('refuses the share of slots its intensity says, in every burst (an unsigned draw)', () => {
    const draws = Array.from({ length: 20_000 }, (_, slot) => slotDraw(slot, 4));
    expect(Math.min(...draws)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...draws)).toBeLessThan(1);
    expect(draws.filter((d) => d < 0.5).length / draws.length).toBeCloseTo(0.5, 1);
    const time = new VirtualTime();
    const quota = new SharedCapacity(time, { requestsPerMinute: 1_000, seed: 4, horizonMs: 86_400_000 });
    let slots = 0;
    let refused = 0;
    let expected = 0;
    for (const burst of quota.bursts) {
      for (let ms = Math.ceil(burst.atMs / 250) * 250; ms < burst.atMs + burst.forMs; ms += 250) {
        slots += 1;
        expected += burst.intensity;
        if (quota.refusedBySharedLoad(ms)) refused += 1;
      }
    }
    // Over a day of bursts (tens of thousands of slots), the refused share is the mean intensity.
    expect(slots).toBeGreaterThan(10_000);
    expect(Math.abs(refused - expected) / slots).toBeLessThan(0.02);
  });

  it('refuses some calls inside a burst whatever the own rate, and the oracle time is accepted', async () => {
    const time = new VirtualTime();
    const quota = new SharedCapacity(time, { requestsPerMinute: 100_000, seed: 9, horizonMs: 86_400_000 });
    const burst = quota.bursts.find((b) => b.intensity > 0.5)!;
    await time.advanceTo(burst.atMs);
    const outcomes: boolean[] = [];
    for (let i = 0; i < 40; i++) {
      outcomes.push(quota.tryAccept(1));
      await time.advanceTo(time.nowMs() + 250);
    }
    expect(outcomes.filter((x) => !x).length).toBeGreaterThan(5);
    const at = quota.nextAcceptMs(1);
    await time.advanceTo(at);
    expect(quota.tryAccept(1)).toBe(true);
  });
});

describe('push window models', () => {
  it('everyAck grows on slow acks; fastAcksOnly grows only under 1 s and never falls under the initial window', () => {
    expect(EVERY_ACK.afterAck(10, 6_000)).toBe(11);
    expect(FAST_ACKS_ONLY.afterAck(10, 500)).toBe(11);
    expect(FAST_ACKS_ONLY.afterAck(10, 6_000)).toBeLessThan(10);
    expect(FAST_ACKS_ONLY.afterAck(FAST_ACKS_ONLY.initial, 6_000)).toBe(FAST_ACKS_ONLY.initial);
    expect(EVERY_ACK.afterNack(10)).toBe(5);
    expect(FAST_ACKS_ONLY.afterNack(1)).toBe(1);
  });
});

describe('the memo bucket (Cloud Storage-like)', () => {
  const memoOn = (time: VirtualTime, bucket: SimBucketStore) =>
    new GcsMemoStore({
      storage: bucket.storage(),
      bucket: 'm',
      sleep: (ms) => time.sleep(ms),
      random: () => 1,
    });
  const now = new Date(Date.parse('2026-11-30T23:59:45Z'));
  const expires = new Date(Date.parse('2026-12-01T00:00:00Z'));

  it('allows one write per second per object: the real GcsMemoStore spaces its own writes of one object a second apart', async () => {
    const time = new VirtualTime();
    const bucket = new SimBucketStore(time, 1);
    const memo = memoOn(time, bucket);
    const first = memo.lease('k', expires, now);
    await time.advanceTo(300);
    await expect(first).resolves.toMatchObject({ earlier: false });
    // The holder renews within the second (a heartbeat, then a write's bound): sent at once, the
    // bucket would answer 429, and its retry half a second later 429 again. It waits the second out.
    const token = ((await first) as { token: string }).token;
    const renewed = memo.renew('k', token, new Date(expires.getTime() + 5_000));
    await time.run(() => false, 3_000);
    await expect(renewed).resolves.toBeDefined();
    expect(bucket.refusedObjectRate).toBe(0);
    const waiter = memo.lease('k', expires, now);
    await time.run(() => false, time.nowMs() + 1_000);
    await expect(waiter).resolves.toEqual({ heldUntil: new Date(expires.getTime() + 5_000) });
    // Two writes, none refused; the reads of the lease are class B.
    expect(bucket.classA).toBe(2);
    expect(bucket.classB).toBeGreaterThan(0);
  });

  it('refuses a second instance writing within the second (429); its retry a second later finds the lease held (412)', async () => {
    const time = new VirtualTime();
    const bucket = new SimBucketStore(time, 1);
    // Two notifications of one upload, at two instances at once: both find no lease and create it.
    const [a, b] = [
      memoOn(time, bucket).lease('k', expires, now),
      memoOn(time, bucket).lease('k', expires, now),
    ];
    await time.run(() => false, 5_000);
    const answers = await Promise.all([a, b]);
    expect(bucket.refusedObjectRate).toBe(1);
    expect(answers.filter((x) => 'token' in x)).toHaveLength(1);
    expect(answers.filter((x) => 'heldUntil' in x)).toEqual([{ heldUntil: expires }]);
  });
});

describe('the memo bucket answers every call of the real GcsMemoStore', () => {
  it('tells a key never leased from a leased one (hasLease) and reads kept analyses back', async () => {
    const time = new VirtualTime();
    const bucket = new SimBucketStore(time, 1);
    const memo = new GcsMemoStore({ storage: bucket.storage(), bucket: 'm', sleep: (ms) => time.sleep(ms) });
    const settled = async <T>(p: Promise<T>): Promise<T> => {
      await time.run(() => false, time.nowMs() + 5_000);
      return p;
    };
    // A model without exists() made every peek "cannot tell", and every delivery asked BigQuery first.
    await expect(settled(memo.hasLease('k'))).resolves.toBe(false);
    const reads = bucket.classB;
    await settled(memo.lease('k', new Date(Date.parse('2026-12-01T00:00:00Z')), new Date(0)));
    await expect(settled(memo.hasLease('k'))).resolves.toBe(true);
    expect(bucket.classB).toBeGreaterThan(reads);
    await expect(settled(memo.get('nothing'))).resolves.toBeUndefined();
  });
});

describe('the pre-filled warehouse', () => {
  const options = { seed: 1, redeliveryWindowDays: 15, maximumBytesBilled: 100_000_000 };
  /** The sweep's table, published with `options` and `more` over them. */
  const warehouse = (time: VirtualTime, more: Partial<NonNullable<WarehouseOptions['published']>> = {}) =>
    new Warehouse(time, { table: 'docline-sweep:docline.documents', published: { ...options, ...more } });

  it('starts with 15 days at the documented daily volume and bills at least 10 MiB a statement', async () => {
    const time = new VirtualTime();
    const w = warehouse(time);
    expect(w.prefilledRows).toBe(COST_DEFAULTS.documentsPerDay * 15);
    // A lookup reads the key days of the last 6 hours: at most 1.25 days of keys, whatever the age.
    expect(w.estimateBytes()).toBeGreaterThan(0);
    expect(w.estimateBytes()).toBeLessThanOrEqual(
      1.25 * COST_DEFAULTS.documentsPerDay * COST_DEFAULTS.lookupBytesPerRow + 1e-6,
    );
    const year = warehouse(time, { prefilledDays: 365 });
    expect(year.prefilledRows).toBe(COST_DEFAULTS.documentsPerDay * 365);
    expect(year.estimateBytes()).toBe(w.estimateBytes());
    const done = w.store().recordMany([sampleRow({ dedup_key: 'gs://b/x#1' })]);
    await time.run(() => false, 10_000);
    await expect(done).resolves.toEqual(new Set(['gs://b/x#1']));
    expect(w.stats.billedBytes).toBe(10 * 1024 * 1024);
    expect(w.viewRows).toBe(1);
  });

  it("bills reconcile's comparison every row since its oldest object's key day, not a lookup's last 6 hours", () => {
    const time = new VirtualTime();
    const perDay = 1_000_000;
    const w = warehouse(time, { documentsPerDay: perDay, prefilledDays: 365 });
    const now = time.clock.now().getTime();
    const monthAgo = new Date(now - 30 * 86_400_000);
    const bytesPerRow = 100;
    // 30 whole days before today's, and today's rows before now.
    const open = comparisonBilledBytes(w, { bucket: 'b', prefix: '', since: monthAgo }, bytesPerRow);
    expect(open).toBeGreaterThanOrEqual(30 * perDay * bytesPerRow);
    expect(open).toBeLessThanOrEqual(31 * perDay * bytesPerRow);
    expect(open).toBeGreaterThan(w.estimateBytes() * 10);
    // A bounded statement bills its days only; contiguous statements bill the whole range together.
    const split = new Date(Math.floor((now - 10 * 86_400_000) / 86_400_000) * 86_400_000);
    const first = comparisonBilledBytes(
      w,
      { bucket: 'b', prefix: '', since: monthAgo, until: split },
      bytesPerRow,
    );
    const rest = comparisonBilledBytes(w, { bucket: 'b', prefix: '', since: split }, bytesPerRow);
    expect(first).toBe(20 * perDay * bytesPerRow);
    expect(first + rest).toBeCloseTo(open, 0);
    // A recent object's comparison still bills BigQuery's minimum.
    expect(
      comparisonBilledBytes(
        warehouse(time),
        { bucket: 'b', prefix: '', since: new Date(now - 3_600_000) },
        100,
      ),
    ).toBe(10 * 1024 * 1024);
  });

  it('counts, for each instance, the instances whose MERGE started in the last minute (jobs.list), itself included, for free', async () => {
    const time = new VirtualTime();
    const w = warehouse(time);
    const [a, b, idle] = [w.store(), w.store(), w.store()];
    const count = async (s: typeof a) => {
      const n = s.writers!();
      await time.advanceTo(time.nowMs() + 1_000);
      return n;
    };
    expect(await count(a)).toBe(1);
    void a.recordMany([sampleRow({ dedup_key: 'gs://b/a#1' })]);
    void b.recordMany([sampleRow({ dedup_key: 'gs://b/b#1' })]);
    await time.advanceTo(5_000);
    expect(await count(idle)).toBe(3);
    expect(await count(a)).toBe(2);
    // A minute on, only a writes again.
    await time.advanceTo(66_000);
    void a.recordMany([sampleRow({ dedup_key: 'gs://b/a#2' })]);
    await time.advanceTo(70_000);
    expect(await count(b)).toBe(2);
    expect(await count(idle)).toBe(2);
    expect(w.stats.billedBytes).toBe(3 * 10 * 1024 * 1024);
  });

  it('checks maximumBytesBilled against each statement estimate', async () => {
    const time = new VirtualTime();
    const w = warehouse(time, { maximumBytesBilled: 1_000 });
    await expect(w.store().seenMany(['gs://b/x#1'])).rejects.toBeInstanceOf(ConfigurationError);
    expect(w.stats.refusedBytesBilled).toBe(1);
  });

  it('holds 2 running + 20 queued MERGEs, then refuses; and refuses past 25 statements in 10 s', async () => {
    const time = new VirtualTime();
    const w = warehouse(time);
    const submit = (i: number) =>
      w
        .store()
        .recordMany([sampleRow({ dedup_key: `gs://b/x#${i}` })])
        .then(
          () => 'ok',
          (e: unknown) => e,
        );
    const first = Array.from({ length: 23 }, (_, i) => submit(i));
    expect(w.stats.refusedQueueFull).toBe(1);
    // By 9 s at least 6 have finished (3 s at most each, 2 at once): the queue has room again.
    await time.advanceTo(9_000);
    // Some have finished: the queue has room, but 22 + 3 = 25 statements in 10 s is the limit.
    const second = Array.from({ length: 4 }, (_, i) => submit(100 + i));
    await time.run(() => false, 200_000);
    const outcomes = await Promise.all([...first, ...second]);
    expect(w.stats.refusedRate).toBe(1);
    expect(outcomes.filter((o) => o !== 'ok').every((o) => o instanceof TransientError)).toBe(true);
    expect(w.viewRows).toBe(25);
  });
});
