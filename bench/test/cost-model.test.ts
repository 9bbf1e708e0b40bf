import { COST_DEFAULTS, costModel, LIMITS, PRICES } from '../cost-model';

const MIB = 1024 * 1024;
const TIB = 1024 ** 4;

describe('costModel', () => {
  it('bills the 10 MiB minimum twice per document when the dedup window keeps the scan small', () => {
    const model = costModel();
    const windowed = model.merge.find((s) => s.windowed && !s.clustered)!;
    // 15 days × 600 documents × 75 bytes ≈ 659 KiB: far under the minimum.
    expect(windowed.estimateBytesPerQuery).toBeCloseTo(
      COST_DEFAULTS.dedupWindowDays * 600 * COST_DEFAULTS.lookupBytesPerRow,
    );
    expect(windowed.estimateBytesPerQuery).toBeLessThan(10 * MIB);
    // One MERGE per document: a new document's lookup is skipped (the memo holds nothing for it).
    expect(windowed.billedBytesHigh).toBe(1000 * 10 * MIB);
    // 10,000 MiB = 9.77 GiB = 0.0095367 TiB at $6.25.
    expect(windowed.usdHigh).toBeCloseTo((10_000 / (1024 * 1024)) * 6.25, 10);
  });

  it('bills the referenced columns of the whole table without the window, and the cap refuses it', () => {
    const model = costModel({ tableBytes: 3_000_000_000, rowBytes: 1_000, lookupBytesPerRow: 50 });
    const unwindowed = model.merge.find((s) => !s.windowed && !s.clustered)!;
    // 3 million rows × 50 bytes = 150 MB per statement, over the 100 MB cap.
    expect(unwindowed.estimateBytesPerQuery).toBe(150_000_000);
    expect(unwindowed.refusedByCap).toBe(true);
    expect(unwindowed.usdHigh).toBeCloseTo(((1000 * 150_000_000) / TIB) * 6.25, 10);
  });

  it('gives a clustered table a range from the minimum to the estimate', () => {
    const clustered = costModel().merge.find((s) => !s.windowed && s.clustered)!;
    expect(clustered.billedBytesPerQueryLow).toBe(LIMITS.minBilledBytesPerTable);
    expect(clustered.billedBytesPerQueryHigh).toBe(clustered.estimateBytesPerQuery);
  });

  it('prices Gemini per token and append mode as one lookup plus ingestion', () => {
    const model = costModel({
      promptTokensPerDocument: 2_000,
      outputTokensPerDocument: 1_000,
      rowBytes: 1024,
    });
    // 2M input tokens × $0.30 + 1M output tokens × $2.50.
    expect(model.gemini.usd).toBeCloseTo(0.6 + 2.5, 10);
    const ingestion = ((1000 * 1024) / 1024 ** 3) * PRICES.storageWriteUsdPerGiB;
    expect(model.noDedup.usd).toBeCloseTo(ingestion, 12);
    expect(model.append.usd).toBeCloseTo(((1000 * 10 * MIB) / TIB) * 6.25 + ingestion, 12);
  });

  it('derives the MERGE rate from two running statements per table', () => {
    const model = costModel({ mergeSecondsLow: 0.5, mergeSecondsHigh: 4 });
    expect(model.dml.documentsPerSecondHigh).toBe(4);
    expect(model.dml.documentsPerSecondLow).toBe(0.5);
    expect(model.dml.documentsPerDayLow).toBe(43_200);
    expect(model.dml.queueFullSecondsAtDoubleRate).toBe(40);
  });
});
