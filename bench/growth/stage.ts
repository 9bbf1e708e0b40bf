import { parseStackConfig } from '../../infra/config';
import type { TierLimits } from '../../sim/models/gemini';
import {
  COST_DEFAULTS,
  onDemandUsd,
  PRICED_GEMINI_MODEL,
  PRICES,
  PRICES_AS_OF,
} from '../../worker/src/contract/cost-model';
import { percentile } from '../stats';
import { type CellSpec, type ConsumerFigures, runConsumer, type SteadyFlow } from '../sweep/cell';

/**
 * The growth stage (`npm run bench -- --stage growth`): docline's real worker (group commit, the
 * memo, the answer table) under a steady flow of uploads for simulated hours, into a BigQuery table
 * pre-filled to a given age at the same rate, with the settings the stack derives for that volume.
 * What it asks: does any statement get refused, any document lost or dead-lettered, and does the
 * warehouse's cost per document stay flat as the table ages?
 *
 * The warehouse model (sim/models/warehouse.ts) follows BigQuery's documented rules for the
 * key-day layout: each statement's pre-run estimate is the partitions its key-day filter leaves ×
 * the bytes of the columns it reads, checked against `maximumBytesBilled`, billed at least 10 MiB;
 * assumed: it bills the estimate (the upper bound: clustering may prune more while it runs).
 */

/** Documents a day × table ages: the grid a deployment grows through, from its first day to its first year. */
export const GROWTH_RATES = [1_000, 100_000, 1_000_000] as const;
export const GROWTH_AGES_DAYS = [1, 15, 365] as const;

/**
 * A whole simulated day per cell, in windows of simulated time, each window its own run into a
 * table pre-filled up to the window's start. What a statement reads depends on the hour: a lookup
 * reads the key days of the last six hours (yesterday's whole partition until 06:00 UTC, then only
 * today's, filling up), a MERGE the key days of its rows (two of them for a batch that spans
 * midnight). So the windows cover every hour, and the first is centred on midnight:
 * - 1,000 a day: two windows of 12 h (18:00–06:00 and 06:00–18:00 UTC), the whole day, 1,000 documents;
 * - 100,000 a day: 24 windows of 1 h, each centred on an hour, the whole day, 100,000 documents;
 * - 1,000,000 a day: 24 windows of 10 min, one centred on each hour (a sixth of the day, every hour
 *   of it: the whole day is a million documents, longer than the stage may take here), 166,656 documents.
 */
export const GROWTH_WINDOWS: Readonly<
  Record<(typeof GROWTH_RATES)[number], Readonly<{ durationMs: number; count: number }>>
> = Object.freeze({
  1000: Object.freeze({ durationMs: 12 * 3_600_000, count: 2 }),
  100000: Object.freeze({ durationMs: 3_600_000, count: 24 }),
  1000000: Object.freeze({ durationMs: 10 * 60_000, count: 24 }),
});

/** The simulated day the windows cover (its midnight, UTC). */
export const GROWTH_DAY = '2026-11-30';

const DAY_MS = 86_400_000;

/** When window `k` of a rate starts (epoch ms): it is centred on midnight + k × (day / count). */
export function growthWindowStartMs(rate: (typeof GROWTH_RATES)[number], k: number): number {
  const { durationMs, count } = GROWTH_WINDOWS[rate];
  return Date.parse(`${GROWTH_DAY}T00:00:00.000Z`) + (k * DAY_MS) / count - durationMs / 2;
}

/**
 * The Gemini tier the cells run against (Developer API): its requests per minute and per day and
 * input tokens per minute, and refused calls counted against the windows (Google does not say a
 * 429 is free). Assumed figures for a paid tier of the priced model: limits differ by model and
 * tier, check the project's tier page. The daily window starts full with the previous day's
 * requests at the cell's rate: a flow that never stops has always used yesterday's share.
 */
export const GROWTH_TIER: Readonly<Omit<TierLimits, 'requestsInPastDay'>> = Object.freeze({
  requestsPerMinute: 4_000,
  tokensPerMinute: 8_000_000,
  requestsPerDay: 2_000_000,
  countsRefused: true,
});

/** One growth cell as bench/results.json holds it (`growth.cells[]`, exact keys). */
export interface GrowthCell {
  name: string;
  documentsPerDay: number;
  tableAgeDays: number;
  documents: number;
  statementsRefused: number;
  deadLetters: number;
  lost: number;
  viewRows: number;
  bytesBilledPerDocument: number;
  dollarsPerDocument: number;
  bigQueryDollarsPerDocument: number;
  geminiDollarsPerDocument: number;
  p99SecondsToRow: number;
  /** The day's windows (GROWTH_WINDOWS) and the simulated hours they add up to. */
  windows: number;
  simulatedHours: number;
  /** The window that billed the most bytes per document: its start (UTC, HH:MM) and that figure. */
  worstWindow: { startsAtUtc: string; bytesBilledPerDocument: number };
  /**
   * What the day's last lookup would be estimated at if its key-day filter did not prune (every
   * partition of the table, the day's rows included): what the table's age changes when pruning
   * fails, and whether the derived cap would then refuse it. With pruning the cells of one rate
   * read the same partitions whatever the age, so their bills are the same by construction; that
   * the live table prunes is checked after each deploy (`npm run check-pruning`).
   */
  unprunedLookupEstimateBytes: number;
  refusedWithoutPruning: boolean;
}

export interface GrowthSection {
  cells: GrowthCell[];
}

/** The goals every cell must meet (the growth stage's bar). */
export const GROWTH_GOALS = Object.freeze({
  /** Bytes billed per document on a 365-day table over the same rate's 1-day table. */
  flatnessRatio: 1.1,
  /** BigQuery over Gemini per document, at 1,000,000 a day on a 365-day table. */
  bigQueryShareOfGemini: 0.05,
});

export const growthCellName = (documentsPerDay: number, tableAgeDays: number) =>
  `growth-${documentsPerDay}perday-${tableAgeDays}d`;

/** What the stack derives for a volume (infra/config.ts): the cap, the pace, the instances. */
export function stackFor(documentsPerDay: number): SteadyFlow['stack'] {
  const config = parseStackConfig('docline-growth', 'growth', { documentsPerDay: String(documentsPerDay) });
  return {
    maximumBytesBilled: config.delivery.maximumBytesBilled,
    mergeMinIntervalMs: config.delivery.mergeMinIntervalMs,
    maxInstances: config.worker.maxInstances,
    concurrency: config.worker.concurrency,
  };
}

/** Runs one cell: the worker under the flow in each window of the day, then the day's figures. */
export async function runGrowthCell(
  documentsPerDay: (typeof GROWTH_RATES)[number],
  tableAgeDays: number,
  seed = 1,
  /** Run only the first `windows` windows (tests); the stage runs them all. */
  windows = GROWTH_WINDOWS[documentsPerDay].count,
): Promise<GrowthCell> {
  const { durationMs } = GROWTH_WINDOWS[documentsPerDay];
  const stack = stackFor(documentsPerDay);
  const perWindow = Math.round((documentsPerDay * durationMs) / DAY_MS);
  const runs: ConsumerFigures[] = [];
  let worst = { startsAtUtc: '', bytesBilledPerDocument: -1 };
  for (let k = 0; k < windows; k++) {
    const startAtMs = growthWindowStartMs(documentsPerDay, k);
    const flow: SteadyFlow = {
      documentsPerDay,
      tableAgeDays,
      durationMs,
      stack,
      tier: { ...GROWTH_TIER, requestsInPastDay: documentsPerDay },
      startAtMs,
    };
    const spec: CellSpec = {
      analyzer: 'tiers',
      quota: GROWTH_TIER.requestsPerMinute,
      latency: 'fast',
      window: 'everyAck',
      documents: perWindow,
      backlog: 'upload',
      seed: seed + k,
      flow,
    };
    const { figures } = await runConsumer(spec, 'docline');
    runs.push(figures);
    if (figures.billedBytes / perWindow > worst.bytesBilledPerDocument)
      worst = {
        startsAtUtc: new Date(startAtMs).toISOString().slice(11, 16),
        bytesBilledPerDocument: figures.billedBytes / perWindow,
      };
  }
  /** A figure summed over the day's windows, in their order. */
  const day = (of: (f: ConsumerFigures) => number) => runs.reduce((sum, f) => sum + of(f), 0);
  const documents = perWindow * windows;
  const billedBytes = day((f) => f.billedBytes);
  const geminiUsd = day((f) => f.geminiUsd);
  const bigQueryUsd = onDemandUsd(billedBytes);
  const unpruned = (tableAgeDays + 1) * documentsPerDay * COST_DEFAULTS.lookupBytesPerRow;
  return {
    name: growthCellName(documentsPerDay, tableAgeDays),
    documentsPerDay,
    tableAgeDays,
    documents,
    statementsRefused: day((f) => f.refusedBytesBilled + f.refusedDml),
    deadLetters: day((f) => f.deadLetters),
    lost: day((f) => f.lost),
    viewRows: day((f) => f.viewRows),
    bytesBilledPerDocument: billedBytes / documents,
    dollarsPerDocument: (bigQueryUsd + geminiUsd) / documents,
    bigQueryDollarsPerDocument: bigQueryUsd / documents,
    geminiDollarsPerDocument: geminiUsd / documents,
    p99SecondsToRow: percentile(
      runs.flatMap((f) => f.secondsToRow),
      99,
    ),
    windows,
    simulatedHours: (windows * durationMs) / 3_600_000,
    worstWindow: worst,
    unprunedLookupEstimateBytes: unpruned,
    refusedWithoutPruning: unpruned > stack.maximumBytesBilled,
  };
}

/** The goals a set of cells misses, one line each (empty: every goal met). */
export function growthMisses(cells: readonly GrowthCell[]): string[] {
  const misses: string[] = [];
  for (const c of cells) {
    if (c.statementsRefused > 0) misses.push(`${c.name}: ${c.statementsRefused} statements refused`);
    if (c.deadLetters > 0) misses.push(`${c.name}: ${c.deadLetters} dead letters`);
    if (c.lost > 0) misses.push(`${c.name}: ${c.lost} documents lost`);
    if (c.viewRows !== c.documents)
      misses.push(`${c.name}: ${c.viewRows} view rows for ${c.documents} documents`);
  }
  for (const rate of new Set(cells.map((c) => c.documentsPerDay))) {
    const day1 = cells.find((c) => c.documentsPerDay === rate && c.tableAgeDays === 1);
    const year = cells.find((c) => c.documentsPerDay === rate && c.tableAgeDays === 365);
    if (
      day1 &&
      year &&
      year.bytesBilledPerDocument > GROWTH_GOALS.flatnessRatio * day1.bytesBilledPerDocument
    )
      misses.push(
        `${rate} a day: ${(year.bytesBilledPerDocument / day1.bytesBilledPerDocument).toFixed(2)} × the bytes per document of day 1 on day 365`,
      );
  }
  const million = cells.find((c) => c.documentsPerDay === 1_000_000 && c.tableAgeDays === 365);
  if (
    million &&
    million.bigQueryDollarsPerDocument > GROWTH_GOALS.bigQueryShareOfGemini * million.geminiDollarsPerDocument
  )
    misses.push(
      `${million.name}: BigQuery is ${((100 * million.bigQueryDollarsPerDocument) / million.geminiDollarsPerDocument).toFixed(1)} % of Gemini per document`,
    );
  return misses;
}

/** Every cell, one after another (each takes the process's timers while it runs). */
export async function runGrowthStage(progress: (text: string) => void): Promise<GrowthSection> {
  const cells: GrowthCell[] = [];
  for (const rate of GROWTH_RATES) {
    for (const age of GROWTH_AGES_DAYS) {
      const started = Date.now();
      const cell = await runGrowthCell(rate, age);
      progress(
        `${cell.name}: ${cell.documents} documents, ${cell.statementsRefused} refused, ${cell.deadLetters} dead letters, ` +
          `${(cell.bytesBilledPerDocument / 1024 / 1024).toFixed(2)} MiB/doc, p99 ${cell.p99SecondsToRow.toFixed(0)} s ` +
          `(${((Date.now() - started) / 1000).toFixed(0)} s)`,
      );
      cells.push(cell);
    }
  }
  return { cells };
}

/** The prices the dollars come from, and their date (for the report). */
export const GROWTH_PRICES_NOTE = `BigQuery on demand $${PRICES.onDemandUsdPerTiB}/TiB; Gemini ${PRICED_GEMINI_MODEL} $${PRICES.geminiInputUsdPerMillionTokens}/1M input and $${PRICES.geminiOutputUsdPerMillionTokens}/1M output tokens (prices as of ${PRICES_AS_OF})`;
