import {
  BUSIEST_DAY_FACTOR,
  COST_DEFAULTS,
  costModel,
  EXAMPLE_DEDUP_KEY,
  KEY_DAY_LAYOUT,
  LIMITS,
  PLANNED_KEY_BYTES,
  PRICES,
  requiredMaximumBytesBilled,
} from '../cost-model';

const MIB = 1024 * 1024;
const TIB = 1024 ** 4;

describe('costModel', () => {
  it("bills the 10 MiB minimum per document: a MERGE reads its key day's partition only, whatever the table's age", () => {
    const model = costModel();
    const pruned = model.merge.find((s) => s.pruned && !s.clustered)!;
    // 600 documents a day × 75 bytes of dedup_key + key_day ≈ 44 KiB: far under the minimum.
    expect(pruned.estimateBytesPerQuery).toBeCloseTo(600 * COST_DEFAULTS.lookupBytesPerRow);
    expect(pruned.estimateBytesPerQuery).toBeLessThan(10 * MIB);
    // A ten-times older (larger) table reads the same partition.
    const older = costModel({ tableBytes: 10 * COST_DEFAULTS.tableBytes }).merge.find(
      (s) => s.pruned && !s.clustered,
    )!;
    expect(older.estimateBytesPerQuery).toBe(pruned.estimateBytesPerQuery);
    // One MERGE per document: a new document's lookup is skipped (the memo holds nothing for it).
    expect(pruned.billedBytesHigh).toBe(1000 * 10 * MIB);
    // 10,000 MiB = 9.77 GiB = 0.0095367 TiB at $6.25.
    expect(pruned.usdHigh).toBeCloseTo((10_000 / (1024 * 1024)) * 6.25, 10);
  });

  it('prices a lookup (a redelivery seen() catches) at 1.25 days of keys: today and the first 6 hours of yesterday', () => {
    const model = costModel({ documentsPerDay: 1_000_000 });
    expect(model.redelivery.billedBytes).toBe(1.25 * 1_000_000 * COST_DEFAULTS.lookupBytesPerRow);
    expect(model.assumptions.join(' ')).toMatch(/partitioned by the key's day \(key_day\)/);
    expect(model.assumptions.join(' ')).not.toMatch(/processed_at/);
  });

  it('bills the referenced columns of the whole table without a partition filter, and the cap refuses it', () => {
    const model = costModel({ tableBytes: 3_000_000_000, rowBytes: 1_000, lookupBytesPerRow: 50 });
    const unpruned = model.merge.find((s) => !s.pruned && !s.clustered)!;
    // 3 million rows × 50 bytes = 150 MB per statement, over the 100 MB cap.
    expect(unpruned.estimateBytesPerQuery).toBe(150_000_000);
    expect(unpruned.refusedByCap).toBe(true);
    expect(unpruned.usdHigh).toBeCloseTo(((1000 * 150_000_000) / TIB) * 6.25, 10);
  });

  it('gives a clustered table a range from the minimum to the estimate', () => {
    const clustered = costModel().merge.find((s) => !s.pruned && s.clustered)!;
    expect(clustered.billedBytesPerQueryLow).toBe(LIMITS.minBilledBytesPerTable);
    expect(clustered.billedBytesPerQueryHigh).toBe(clustered.estimateBytesPerQuery);
  });

  it('prices Gemini per token and the plain sample as ingestion only', () => {
    const model = costModel({
      promptTokensPerDocument: 2_000,
      outputTokensPerDocument: 1_000,
      rowBytes: 1024,
    });
    // 2M input tokens × $0.30 + 1M output tokens × $2.50.
    expect(model.gemini.usd).toBeCloseTo(0.6 + 2.5, 10);
    const ingestion = ((1000 * 1024) / 1024 ** 3) * PRICES.storageWriteUsdPerGiB;
    expect(model.noDedup.usd).toBeCloseTo(ingestion, 12);
  });

  it('derives the MERGE rate from two running statements per table', () => {
    const model = costModel({ mergeSecondsLow: 0.5, mergeSecondsHigh: 4 });
    expect(model.dml.documentsPerSecondHigh).toBe(4);
    expect(model.dml.documentsPerSecondLow).toBe(0.5);
    expect(model.dml.documentsPerDayLow).toBe(43_200);
    expect(model.dml.queueFullSecondsAtDoubleRate).toBe(40);
  });
});

describe('requiredMaximumBytesBilled (the byte cap a volume needs)', () => {
  /** The pre-run estimate of a late-day statement over two key days, each of `dayFactor` average days. */
  const lateDayEstimate = (documentsPerDay: number, dayFactor: number, keyBytes: number) =>
    KEY_DAY_LAYOUT.maxKeyDaysPerStatement * documentsPerDay * dayFactor * (2 + keyBytes + 8);
  const exampleKey = Buffer.byteLength(EXAMPLE_DEDUP_KEY, 'utf8');

  it.each([10_000, 100_000, 1_000_000])(
    'at %i a day, holds a late-day statement on a 3× day, with 3× longer keys, and with both',
    (documentsPerDay) => {
      const cap = requiredMaximumBytesBilled(documentsPerDay);
      expect(BUSIEST_DAY_FACTOR).toBe(3);
      expect(lateDayEstimate(documentsPerDay, 3, exampleKey)).toBeLessThanOrEqual(cap);
      expect(lateDayEstimate(documentsPerDay, 1, 3 * exampleKey)).toBeLessThanOrEqual(cap);
      expect(lateDayEstimate(documentsPerDay, 3, 3 * exampleKey)).toBeLessThanOrEqual(cap);
      expect(3 * exampleKey).toBeLessThanOrEqual(PLANNED_KEY_BYTES);
    },
  );

  it('still refuses what the cap is for: a statement with no partition filter on a year-old table', () => {
    const documentsPerDay = 1_000_000;
    const wholeTable = 365 * documentsPerDay * COST_DEFAULTS.lookupBytesPerRow;
    expect(wholeTable).toBeGreaterThan(requiredMaximumBytesBilled(documentsPerDay));
  });
});
