import { GEMINI_API_TIERS, geminiCapacityNote, geminiTierFor } from '../src/contract/gemini-tiers';

describe("the Gemini API's published tiers", () => {
  it('grow in spend per 10 minutes and in cap, tier after tier', () => {
    for (let i = 1; i < GEMINI_API_TIERS.length; i++) {
      expect(GEMINI_API_TIERS[i]!.spendUsdPer10Minutes).toBeGreaterThan(
        GEMINI_API_TIERS[i - 1]!.spendUsdPer10Minutes,
      );
      expect(GEMINI_API_TIERS[i]!.billingCapUsd).toBeGreaterThan(GEMINI_API_TIERS[i - 1]!.billingCapUsd);
    }
  });

  it("takes the least tier whose 10-minute spend limit carries a busy day's peak and whose cap carries the month", () => {
    // $0.001 a document: 1,000 a day spend $0.02 in a busy 10 minutes and $30 a month.
    expect(geminiTierFor(1_000, 0.001)).toMatchObject({ tier: { name: 'Tier 1' }, monthlyUsd: 30 });
    expect(geminiTierFor(1_000, 0.001).peakUsdPer10Minutes).toBeCloseTo((1_000 * 3 * 0.001) / 144, 12);
    // 10,000 a day: $300 a month, past Tier 1's $250 cap though far under its $10 per 10 minutes.
    expect(geminiTierFor(10_000, 0.001).tier?.name).toBe('Tier 2');
    // A month past Tier 2's cap needs Tier 3.
    expect(geminiTierFor(100_000, 0.001).tier?.name).toBe('Tier 3');
    // Past every published cap: no tier.
    expect(geminiTierFor(1_000_000, 0.001).tier).toBeUndefined();
  });

  it("words the preview's line with the volume, both backends and the date the tiers were read", () => {
    const note = geminiCapacityNote(10_000, 0.001);
    expect(note).toMatch(/^Gemini at documentsPerDay 10,000 \(/);
    expect(note).toContain('about 21 requests a minute');
    expect(note).toContain('Dynamic Shared Quota');
    expect(note).toMatch(
      /Tier 2 \(\$100 paid and 3 days since the first successful payment: \$50 per 10 minutes, a \$2,000 cap\)/,
    );
    expect(note).toMatch(/Tiers read on \d{4}-\d{2}-\d{2}/);
  });
});
