import { DELIVERY_DEFAULTS, MIN_MAXIMUM_BYTES_BILLED } from './settings';

/**
 * The cost model of exactly-once on BigQuery, computed from documented prices and limits (never
 * run): what `seen()` + the insert-only MERGE bill per 1,000 documents, what Gemini costs, and the
 * document rate at which the per-table DML limits bite.
 *
 * The table's layout (contract/row.ts, adapters/stores/bigquery-store.ts): partitioned by the key's
 * day (`key_day`), clustered by `dedup_key`. A MERGE reads the key days of the rows it carries (a
 * batch of today's keys: today's partition); `seen()` reads the key days of the last 6 hours
 * (today's partition, and yesterday's during the first 6 hours of a UTC day: at most 1.25 days of
 * keys). So what a statement reads depends on the documents a day, never on the table's age
 * ({@link KEY_DAY_LAYOUT}, {@link maximumEstimateBytes}). For comparison the model also prices a
 * statement with no partition filter (the whole table), what any layout without one would bill.
 *
 * How BigQuery bills the two statements (on-demand):
 * - A SELECT bills the bytes of the columns it references, in the partitions it scans, at least
 *   10 MiB per table referenced.
 * - An insert-only MERGE bills `q`, the bytes of the columns referenced in the tables it scans (no
 *   `t` term: that one is only for UPDATE/DELETE clauses), with the same 10 MiB minimum.
 * - Both statements here reference `dedup_key` and `key_day` only, in the one table.
 * - The estimate made before the query runs (the one `maximumBytesBilled` is checked against) is
 *   exact for an unclustered table and an upper bound for a clustered one: clustering prunes blocks
 *   only while the query runs. So a clustered table is billed somewhere between the minimum and
 *   the estimate, and the cap still sees the estimate.
 */

const KIB = 1024;
const MIB = 1024 * KIB;
const GIB = 1024 * MIB;
const TIB = 1024 * GIB;

/** When the BigQuery {@link PRICES} were read (the providers' price pages, as quoted in the field notes). */
export const PRICES_AS_OF = '2026-12-02';

/** When {@link GEMINI_PRICES} were read. */
export const GEMINI_PRICES_AS_OF = '2026-12-03';

/**
 * Gemini's price per model, USD per million tokens on the standard (pay-as-you-go) tier, text and
 * document input up to 200K tokens; output includes thinking tokens, which Gemini bills as output
 * (the worker counts them as output too, gemini-analyzer.ts). Read on {@link GEMINI_PRICES_AS_OF}. Google's Vertex AI
 * and Gemini API pricing pages were not in the stored copies this was read from: the figures are
 * the ones third-party gateways republish as Google's list price (Vercel AI Gateway's model pages;
 * APIYI's, which says it bills "the same as the official site"), and they match what the field
 * notes quoted for Gemini 2.5 Flash. Check them on Google's pricing page before quoting.
 */
export const GEMINI_PRICES: Readonly<
  Record<string, Readonly<{ inputUsdPerMillionTokens: number; outputUsdPerMillionTokens: number }>>
> = Object.freeze({
  'gemini-3.5-flash-lite': Object.freeze({ inputUsdPerMillionTokens: 0.3, outputUsdPerMillionTokens: 2.5 }),
  'gemini-3.1-flash-lite': Object.freeze({ inputUsdPerMillionTokens: 0.25, outputUsdPerMillionTokens: 1.5 }),
  'gemini-3.5-flash': Object.freeze({ inputUsdPerMillionTokens: 1.5, outputUsdPerMillionTokens: 9 }),
});

/** Where {@link GEMINI_PRICES} were read, and on which day. */
export const GEMINI_PRICES_SOURCE =
  "https://vercel.com/ai-gateway/models/gemini-3.5-flash-lite and https://docs.apiyi.com/en/models/gemini-3-5-flash-lite (read on GEMINI_PRICES_AS_OF; Google's own pricing page was not among the stored copies)";

/** The model the cost model prices: the worker's default. */
export const PRICED_GEMINI_MODEL = DELIVERY_DEFAULTS.geminiModel;

/** The price of the default model; a default with no price is a mistake the tests catch. */
function defaultGeminiPrice(): { inputUsdPerMillionTokens: number; outputUsdPerMillionTokens: number } {
  const price = GEMINI_PRICES[PRICED_GEMINI_MODEL];
  if (!price)
    throw new Error(`no price for the default Gemini model ${PRICED_GEMINI_MODEL} in GEMINI_PRICES`);
  return price;
}

/** Documented prices (USD), as quoted in the project's field notes; check them before quoting. */
export const PRICES = Object.freeze({
  /** BigQuery on-demand analysis, per TiB billed. */
  onDemandUsdPerTiB: 6.25,
  /** BigQuery Storage Write API ingestion, per GiB (the free 2 TiB a month is not counted). */
  storageWriteUsdPerGiB: 0.025,
  /** The default Gemini model ({@link PRICED_GEMINI_MODEL}), per million input tokens. */
  geminiInputUsdPerMillionTokens: defaultGeminiPrice().inputUsdPerMillionTokens,
  /** The default Gemini model, per million output tokens, thinking included. */
  geminiOutputUsdPerMillionTokens: defaultGeminiPrice().outputUsdPerMillionTokens,
});

/**
 * The wall time of one MERGE job, in seconds, uniform between `low` and `high`: the one figure the
 * cost model and the simulators (sim/bigquery-rest.ts, the sweep's warehouse) share. Public reports
 * give 2–4.5 s for single-row DML jobs; not documented, so an assumption.
 */
export const MERGE_LATENCY_SECONDS = Object.freeze({ low: 1, high: 3 });

/** Documented limits. */
export const LIMITS = Object.freeze({
  /** Every query bills at least this much per table referenced (BigQuery's "10 MB" is 10 MiB). */
  minBilledBytesPerTable: MIN_MAXIMUM_BYTES_BILLED,
  /** Mutating DML (UPDATE, DELETE, MERGE) running at once on one table. */
  runningMutatingDmlPerTable: 2,
  /** Mutating DML waiting on one table; beyond that: "Too many DML statements outstanding". */
  queuedMutatingDmlPerTable: 20,
});

/** A typical dedup key, to size the `dedup_key` column (a STRING bills 2 bytes + its UTF-8 bytes). */
export const EXAMPLE_DEDUP_KEY = 'gs://acme-invoices-prod/2026/11/facture-0042.pdf#1764460800123456';

export interface CostParams {
  /** Documents the figures are given for. */
  documents: number;
  /** Logical size of the table (all columns), in bytes. */
  tableBytes: number;
  /** New documents a day: the rows of one key-day partition. */
  documentsPerDay: number;
  /** Average logical bytes of one row (the analysis JSON dominates). */
  rowBytes: number;
  /** Bytes `seen()` and the MERGE read per row: `dedup_key` (STRING) + `key_day` (DATE, 8). */
  lookupBytesPerRow: number;
  /** The worker's `maximumBytesBilled`, checked against the pre-run estimate. */
  maximumBytesBilled: number;
  /** Gemini tokens per invoice (assumed, see {@link COST_DEFAULTS}). */
  promptTokensPerDocument: number;
  outputTokensPerDocument: number;
  /** Assumed wall time of one single-row MERGE, in seconds (a range: best and worst). */
  mergeSecondsLow: number;
  mergeSecondsHigh: number;
}

/** The parameters of the model: a 2 GiB table, 600 documents a day, the worker's defaults. */
export const COST_DEFAULTS: Readonly<CostParams> = Object.freeze({
  documents: 1000,
  tableBytes: 2 * GIB,
  documentsPerDay: 600,
  rowBytes: 1500,
  lookupBytesPerRow: 2 + Buffer.byteLength(EXAMPLE_DEDUP_KEY, 'utf8') + 8,
  maximumBytesBilled: DELIVERY_DEFAULTS.maximumBytesBilled,
  // Re-checked for gemini-3.5-flash-lite on 2026-12-03 (by characters, ~4 a token): the prompt is
  // ~860 tokens and the answer's JSON Schema ~640 (3,442 and 2,549 characters), plus a one-page
  // invoice (a few hundred tokens as text or as a PDF page): ~2,000 input tokens. The answer is a
  // filled-in invoice, ~120 tokens for the test sample and a few hundred with line items; the worker
  // asks for minimal thinking (thinkingLevel MINIMAL, gemini-analyzer.ts), which this model uses by
  // default anyway: ~400 output tokens leaves room for both. Output costs 8× input, so a model
  // left to think freely could cost several times this: the setting is sent, never assumed.
  promptTokensPerDocument: 2000,
  outputTokensPerDocument: 400,
  mergeSecondsLow: MERGE_LATENCY_SECONDS.low,
  mergeSecondsHigh: MERGE_LATENCY_SECONDS.high,
});

/** What one MERGE bills: pruned to its key day or reading the whole table, clustered or not. */
export interface DedupScenario {
  name: string;
  /** Pruned to the key-day partitions of its rows (the layout), or no partition filter. */
  pruned: boolean;
  clustered: boolean;
  /** Rows in the partitions the statements scan. */
  scannedRows: number;
  /** The pre-run estimate of one statement, bytes (what `maximumBytesBilled` is checked against). */
  estimateBytesPerQuery: number;
  /** Bytes billed by one statement: the lower and upper bound (equal unless clustering may prune). */
  billedBytesPerQueryLow: number;
  billedBytesPerQueryHigh: number;
  /** Whether the worker's cap refuses the statement before it runs (a configuration fault). */
  refusedByCap: boolean;
  /**
   * One MERGE for every document (its lookup is skipped: the memo of paid analyses, on in front of
   * Gemini, holds nothing for a new key), bytes billed for {@link CostParams.documents}.
   */
  billedBytesLow: number;
  billedBytesHigh: number;
  usdLow: number;
  usdHigh: number;
}

export interface CostModel {
  params: CostParams;
  tableRows: number;
  /** The MERGE, one per document: pruned to its key day or not × clustered or not. */
  merge: DedupScenario[];
  /** The plain sample (no dedup): Storage Write ingestion only. */
  noDedup: { ingestedBytes: number; usd: number };
  /** A redelivery that seen() catches costs one lookup (≤ 1.25 days of keys). */
  redelivery: { billedBytes: number; usd: number };
  /** Gemini's part: `model` is the model priced (absent in figures stored before it was recorded). */
  gemini: { model?: string; promptTokens: number; outputTokens: number; usd: number };
  dml: {
    /** Sustained single-row MERGEs per second on one table (running limit / MERGE duration). */
    documentsPerSecondLow: number;
    documentsPerSecondHigh: number;
    documentsPerDayLow: number;
    /** Headroom over {@link CostParams.documentsPerDay} at the slow end. */
    headroomLow: number;
    /** Seconds until the queue is full when documents arrive at twice the sustained rate (slow end). */
    queueFullSecondsAtDoubleRate: number;
  };
  /** The stated assumptions, one sentence each, for the report. */
  assumptions: string[];
}

/** Dollars for bytes billed on demand. */
export function onDemandUsd(billedBytes: number): number {
  return (billedBytes / TIB) * PRICES.onDemandUsdPerTiB;
}

/** Bytes billed by one statement that scans `bytes` of referenced columns in one table. */
export function billedBytes(bytes: number): number {
  return Math.max(LIMITS.minBilledBytesPerTable, bytes);
}

/** Computes the model; every figure is derived from `params`, {@link PRICES} and {@link LIMITS}. */
export function costModel(overrides: Partial<CostParams> = {}): CostModel {
  const params: CostParams = { ...COST_DEFAULTS, ...overrides };
  const { documents } = params;
  const tableRows = params.tableBytes / params.rowBytes;
  const volume = {
    documentsPerDay: params.documentsPerDay,
    bytesPerKeyRow: params.lookupBytesPerRow,
    tableRows,
  };
  // The MERGE: a new document's seen() is skipped when the memo holds no analysis of it (core/handle.ts).
  const queriesPerDocument = 1;

  const scenario = (pruned: boolean, clustered: boolean): DedupScenario => {
    const scannedRows = pruned ? statementRows('merge', volume) : tableRows;
    const estimate = pruned ? statementEstimateBytes('merge', volume) : tableRows * params.lookupBytesPerRow;
    const high = billedBytes(estimate);
    // Clustering on dedup_key may prune every block but one: never below the per-table minimum.
    const low = clustered ? LIMITS.minBilledBytesPerTable : high;
    return {
      name: `${pruned ? "its key day's partition" : 'no partition filter'}, ${clustered ? 'clustered' : 'not clustered'}`,
      pruned,
      clustered,
      scannedRows,
      estimateBytesPerQuery: estimate,
      billedBytesPerQueryLow: low,
      billedBytesPerQueryHigh: high,
      refusedByCap: estimate > params.maximumBytesBilled,
      billedBytesLow: low * queriesPerDocument * documents,
      billedBytesHigh: high * queriesPerDocument * documents,
      usdLow: onDemandUsd(low * queriesPerDocument * documents),
      usdHigh: onDemandUsd(high * queriesPerDocument * documents),
    };
  };
  const merge = [scenario(true, true), scenario(true, false), scenario(false, true), scenario(false, false)];

  const lookup = billedBytes(statementEstimateBytes('lookup', volume));
  const ingestedBytes = params.rowBytes * documents;
  const ingestionUsd = (ingestedBytes / GIB) * PRICES.storageWriteUsdPerGiB;
  const promptTokens = params.promptTokensPerDocument * documents;
  const outputTokens = params.outputTokensPerDocument * documents;

  const perSecondLow = LIMITS.runningMutatingDmlPerTable / params.mergeSecondsHigh;
  const perSecondHigh = LIMITS.runningMutatingDmlPerTable / params.mergeSecondsLow;
  const mib = (bytes: number) => `${(bytes / MIB).toFixed(1)} MiB`;

  return {
    params,
    tableRows,
    merge,
    noDedup: { ingestedBytes, usd: ingestionUsd },
    redelivery: { billedBytes: lookup, usd: onDemandUsd(lookup) },
    gemini: {
      model: PRICED_GEMINI_MODEL,
      promptTokens,
      outputTokens,
      usd:
        (promptTokens / 1e6) * PRICES.geminiInputUsdPerMillionTokens +
        (outputTokens / 1e6) * PRICES.geminiOutputUsdPerMillionTokens,
    },
    dml: {
      documentsPerSecondLow: perSecondLow,
      documentsPerSecondHigh: perSecondHigh,
      documentsPerDayLow: perSecondLow * 86_400,
      headroomLow: (perSecondLow * 86_400) / params.documentsPerDay,
      // Arriving at twice the sustained rate, the queue grows by the sustained rate each second.
      queueFullSecondsAtDoubleRate: LIMITS.queuedMutatingDmlPerTable / perSecondLow,
    },
    assumptions: [
      `Table: ${(params.tableBytes / GIB).toFixed(1)} GiB logical, ${params.rowBytes} bytes a row → ${Math.round(tableRows).toLocaleString('en-US')} rows; ${params.documentsPerDay} new documents a day, partitioned by the key's day (key_day), clustered by dedup_key.`,
      `seen() and the MERGE read dedup_key + key_day only: ${params.lookupBytesPerRow} bytes a row (key like ${EXAMPLE_DEDUP_KEY}); a MERGE of today's keys reads today's partition, seen() at most 1.25 days of keys.`,
      `Minimum ${mib(LIMITS.minBilledBytesPerTable)} billed per statement (one table each); on-demand $${PRICES.onDemandUsdPerTiB}/TiB; free tiers not counted.`,
      `Clustered: billed between the minimum (perfect block pruning) and the estimate; the cap (maximumBytesBilled = ${(params.maximumBytesBilled / 1e6).toFixed(0)} MB) is checked against the estimate.`,
      `Storage Write API $${PRICES.storageWriteUsdPerGiB}/GiB of rows; Gemini ${PRICED_GEMINI_MODEL} $${PRICES.geminiInputUsdPerMillionTokens}/1M in, $${PRICES.geminiOutputUsdPerMillionTokens}/1M out, ~${params.promptTokensPerDocument} in + ~${params.outputTokensPerDocument} out tokens per invoice (assumed).`,
      `DML: ${LIMITS.runningMutatingDmlPerTable} mutating statements running + ${LIMITS.queuedMutatingDmlPerTable} queued per table; one single-row MERGE assumed to take ${params.mergeSecondsLow}–${params.mergeSecondsHigh} s.`,
    ],
  };
}

/**
 * How far the key-day layout's statements reach (contract/row.ts, adapters/stores/bigquery-store.ts): a
 * lookup reads the key days of the last `lookupHorizonMs` (today's partition, and yesterday's during
 * the first hours of a UTC day); a MERGE reads the key days of the rows it carries, at most
 * `maxKeyDaysPerStatement` of them (a batch with more is split).
 */
export const KEY_DAY_LAYOUT = Object.freeze({
  lookupHorizonMs: 6 * 60 * 60 * 1000,
  maxKeyDaysPerStatement: 2,
});

/** What a statement's estimate is computed from: the table's volume and the bytes of a key row. */
export interface StatementVolume {
  /** New documents a day: the rows of one key-day partition. */
  documentsPerDay: number;
  /** Bytes of `dedup_key` (STRING: 2 + its UTF-8 bytes) + `key_day` (DATE, 8) of one row. */
  bytesPerKeyRow: number;
  /** Rows in the whole table: no statement reads more. */
  tableRows: number;
}

/**
 * The rows a statement of the key-day layout reads: a MERGE of today's keys its key day's
 * partition (a whole day of rows by the day's end), `seen()` the key days of the last
 * {@link KEY_DAY_LAYOUT}.lookupHorizonMs (up to 1.25 days of keys); never more than the table.
 */
export function statementRows(statement: 'lookup' | 'merge', volume: StatementVolume): number {
  const days = statement === 'merge' ? 1 : 1 + KEY_DAY_LAYOUT.lookupHorizonMs / 86_400_000;
  return Math.min(volume.tableRows, volume.documentsPerDay * days);
}

/**
 * The pre-run estimate of one statement of the key-day layout, pruned to its key days: the bytes of
 * `dedup_key` + `key_day` in the rows it reads ({@link statementRows}). The post-deploy pruning
 * check (`npm run check-pruning`) holds the live table's dry runs to it.
 */
export function statementEstimateBytes(statement: 'lookup' | 'merge', volume: StatementVolume): number {
  return statementRows(statement, volume) * volume.bytesPerKeyRow;
}

/**
 * The largest pre-run estimate any statement of the key-day layout can have at `documentsPerDay`:
 * the most days of keys it may read ({@link KEY_DAY_LAYOUT}) × the bytes of `dedup_key` + `key_day`
 * of a day's rows. It depends on the volume, never on the table's age.
 */
export function maximumEstimateBytes(
  documentsPerDay: number,
  bytesPerKeyRow: number = COST_DEFAULTS.lookupBytesPerRow,
): number {
  const days = Math.max(
    KEY_DAY_LAYOUT.maxKeyDaysPerStatement,
    1 + KEY_DAY_LAYOUT.lookupHorizonMs / 86_400_000,
  );
  return Math.ceil(days * documentsPerDay * bytesPerKeyRow);
}

/**
 * The busiest day the cap is planned for, in average days: the stack sizes its instances for the
 * same peak (infra/config.ts, `VOLUME.peakFactor`). A partition holds one key day's rows, so a busy
 * day's partition holds this many times the average, and so does every late-day statement over it.
 */
export const BUSIEST_DAY_FACTOR = 3;

/**
 * The longest dedup key the cap is planned for, in bytes: `gs://` + a 63-character bucket name (the
 * longest without dots) + `/` + an object name of up to 150 bytes + `#` + a 19-digit generation.
 * Keys run longer only with longer object names (up to 1,024 bytes): planning for those would let a
 * statement with no partition filter through on a young table, which the cap exists to refuse.
 */
export const PLANNED_KEY_BYTES = 5 + 63 + 1 + 150 + 1 + 19;

/** Bytes of `dedup_key` + `key_day` of one row with the longest planned key. */
export const PLANNED_BYTES_PER_KEY_ROW = 2 + PLANNED_KEY_BYTES + 8;

/**
 * The smallest `maximumBytesBilled` that no statement is refused by at `documentsPerDay`, derived
 * from the worst case the cap is planned for, not from the average: the most key days a statement
 * reads, each a {@link BUSIEST_DAY_FACTOR} day, every key of {@link PLANNED_KEY_BYTES}. (A margin of
 * 1.5 over the average refused late-day statements on a 3× day, or with 3× longer keys.)
 */
export function requiredMaximumBytesBilled(documentsPerDay: number): number {
  return Math.max(
    MIN_MAXIMUM_BYTES_BILLED,
    maximumEstimateBytes(documentsPerDay * BUSIEST_DAY_FACTOR, PLANNED_BYTES_PER_KEY_ROW),
  );
}

/** The cap a stack takes when none is set: the default, or what its volume requires if more. */
export function derivedMaximumBytesBilled(documentsPerDay: number): number {
  return Math.max(DELIVERY_DEFAULTS.maximumBytesBilled, requiredMaximumBytesBilled(documentsPerDay));
}

/** Gemini's price of one document's analysis, with the model's token assumptions. */
export function geminiUsdPerDocument(params: Partial<CostParams> = {}): number {
  const p = { ...COST_DEFAULTS, ...params };
  return (
    (p.promptTokensPerDocument / 1e6) * PRICES.geminiInputUsdPerMillionTokens +
    (p.outputTokensPerDocument / 1e6) * PRICES.geminiOutputUsdPerMillionTokens
  );
}
