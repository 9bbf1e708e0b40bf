import { BUSIEST_DAY_FACTOR, geminiUsdPerDocument, PRICED_GEMINI_MODEL } from './cost-model';

/**
 * The Gemini API's paid usage tiers as Google publishes them, read on {@link GEMINI_TIERS_AS_OF}:
 * - the spend-based rate limit of each tier, "evaluated over a rolling 10-minute window"
 *   (https://ai.google.dev/gemini-api/docs/rate-limits, "Spend-based rate limits"); past it the API
 *   answers 429 RESOURCE_EXHAUSTED;
 * - the billing tier cap and how a billing account qualifies
 *   (https://ai.google.dev/gemini-api/docs/billing, "About billing and tiers"). The page gives no
 *   period for the cap: docline reads it as a month's spend (assumed). Tier 3's cap is given as
 *   "$20,000 - $100,000+": docline takes the lower bound.
 * Tiers, rate limits and caps are set per billing account, not per project. The per-model RPM, TPM
 * and RPD of each tier are shown in AI Studio only, so they are not here.
 *
 * Vertex AI (the stack's default backend) has no such tiers: pay-as-you-go Gemini there runs on
 * Dynamic Shared Quota, capacity shared by every customer of the region, whose 429s come in busy
 * bursts whatever a project's own rate; Provisioned Throughput buys capacity of one's own.
 */
export const GEMINI_TIERS_AS_OF = '2026-12-04';

export interface GeminiApiTier {
  name: string;
  qualification: string;
  /** The spend-based rate limit: USD over any rolling 10 minutes. */
  spendUsdPer10Minutes: number;
  /** The billing tier cap, USD (read as a month's spend). */
  billingCapUsd: number;
}

export const GEMINI_API_TIERS: readonly GeminiApiTier[] = Object.freeze([
  Object.freeze({
    name: 'Tier 1',
    qualification: 'an active billing account linked',
    spendUsdPer10Minutes: 10,
    billingCapUsd: 250,
  }),
  Object.freeze({
    name: 'Tier 2',
    qualification: '$100 paid and 3 days since the first successful payment',
    spendUsdPer10Minutes: 50,
    billingCapUsd: 2_000,
  }),
  Object.freeze({
    name: 'Tier 3',
    qualification: '$1,000 paid and 30 days since the first successful payment',
    spendUsdPer10Minutes: 200,
    billingCapUsd: 20_000,
  }),
]);

/** Days in the month the billing cap is read against. */
const DAYS_A_MONTH = 30;

export interface TierNeed {
  /** The least tier whose limits carry the volume; undefined: none of the published ones does. */
  tier?: GeminiApiTier;
  /** What a busy day spends in 10 minutes (its rate is {@link BUSIEST_DAY_FACTOR} × the average). */
  peakUsdPer10Minutes: number;
  /** What a month of average days spends. */
  monthlyUsd: number;
}

/** The Gemini API tier a volume needs, at the priced model's cost of one document. */
export function geminiTierFor(
  documentsPerDay: number,
  usdPerDocument: number = geminiUsdPerDocument(),
): TierNeed {
  const peakUsdPer10Minutes = ((documentsPerDay * BUSIEST_DAY_FACTOR) / 144) * usdPerDocument;
  const monthlyUsd = documentsPerDay * DAYS_A_MONTH * usdPerDocument;
  const tier = GEMINI_API_TIERS.find(
    (t) => t.spendUsdPer10Minutes >= peakUsdPer10Minutes && t.billingCapUsd >= monthlyUsd,
  );
  return { ...(tier ? { tier } : {}), peakUsdPer10Minutes, monthlyUsd };
}

const usd = (n: number) => `$${n < 10 ? n.toFixed(2) : Math.round(n).toLocaleString('en-US')}`;

/** The preview's line on what Gemini capacity a volume needs, on either backend. */
export function geminiCapacityNote(documentsPerDay: number, usdPerDocument?: number): string {
  const need = geminiTierFor(documentsPerDay, usdPerDocument);
  const top = GEMINI_API_TIERS[GEMINI_API_TIERS.length - 1]!;
  const peakPerMinute = Math.ceil((documentsPerDay * BUSIEST_DAY_FACTOR) / 1_440);
  const spend = `${usd(need.peakUsdPer10Minutes)} in a busy day's 10 minutes, ${usd(need.monthlyUsd)} a month`;
  const apiTier = need.tier
    ? `on the Gemini API it needs ${need.tier.name} (${need.tier.qualification}: ${usd(need.tier.spendUsdPer10Minutes)} per 10 minutes, a ${usd(need.tier.billingCapUsd)} cap)`
    : `on the Gemini API no published tier carries it (${top.name}: ${usd(top.spendUsdPer10Minutes)} per 10 minutes, a cap from ${usd(top.billingCapUsd)}): ask Google for higher limits`;
  return (
    `Gemini at documentsPerDay ${documentsPerDay.toLocaleString('en-US')} (${PRICED_GEMINI_MODEL}): about ${peakPerMinute.toLocaleString('en-US')} requests a minute at a busy day's peak, ${spend}. ` +
    `On Vertex AI (this stack) it runs on shared capacity (Dynamic Shared Quota: no tier, 429s in busy bursts; Provisioned Throughput for capacity of its own); ` +
    `${apiTier}. Tiers read on ${GEMINI_TIERS_AS_OF} (docs/deploy.md).`
  );
}
