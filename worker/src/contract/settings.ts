import { DEFAULT_GEMINI_MODEL } from './models';

/**
 * Delivery settings and their defaults: the one definition that the Pulumi stack's config
 * defaults, the local emulator setup and the worker all read. Units are in the names.
 */

export type DedupKeyMode = 'object' | 'message';
export const DEDUP_KEY_MODES: readonly DedupKeyMode[] = ['object', 'message'];

/** Cloud Logging severity names, lowest first: the worker's LOG_LEVEL and the stack's logLevel take them. */
export const LOG_LEVELS = ['DEBUG', 'INFO', 'WARNING', 'ERROR'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface DeliverySettings {
  /** Push subscription ack deadline; for push it is also the request timeout (10–600). */
  ackDeadlineSeconds: number;
  /** Retry policy of the push subscription. */
  minRetryBackoffSeconds: number;
  maxRetryBackoffSeconds: number;
  /** Dead-letter policy: deliveries before a message moves to the dead-letter topic (5–100). */
  maxDeliveryAttempts: number;
  /** How long an unacknowledged message is kept by the push subscription. */
  messageRetentionSeconds: number;
  /** How long the dead-letter topic and subscription keep a dead letter for replay (at least 7 days). */
  deadLetterRetentionSeconds: number;
  /** Cloud Run request timeout of the worker; must stay below the ack deadline minus the margin. */
  workerTimeoutSeconds: number;
  /** The gap the ack deadline keeps above the worker timeout, so a slow request ends before Pub/Sub gives up on it. */
  ackDeadlineMarginSeconds: number;
  /** Timeout of one analyzer call, well below the worker timeout. */
  analyzerTimeoutMs: number;
  /**
   * How long a delivery waits, all waits together, for its turn at the analyzer (the line of
   * deliveries past `analyzerMaxInFlight`, and a spent quota's 429s); past it, 503.
   */
  analyzerQuotaWaitMs: number;
  /**
   * The ceiling of reads + analyses one instance runs at once (the quota gate learns the number under
   * it). Each holds its document in memory, so this bounds
   * memory; deliveries past it wait in line holding only their push body.
   */
  analyzerMaxInFlight: number;
  /** Timeout of one object read. */
  readTimeoutMs: number;
  /**
   * Days a delivery of a message can still arrive: the memo keeps a paid analysis that long, and the
   * duplicate check reads that many days of the table. Above the message retention plus the dead-letter
   * retention: a dead letter replayed on its last day must still find its analysis. (`seen()` and
   * `record()` look a key up in its own day, whatever its age.)
   */
  redeliveryWindowDays: number;
  /** `maximumBytesBilled` on every BigQuery query (BigQuery refuses caps under 10 MiB). */
  maximumBytesBilled: number;
  /** Objects above this size are rejected as `too_large` before any byte is downloaded. */
  maxObjectBytes: number;
  /** Push bodies above this size are answered 413 (a notification is a few KiB). */
  pushBodyLimitBytes: number;
  /** How the lookup key is built. */
  dedupKeyMode: DedupKeyMode;
  /** The Gemini model: one of contract/models.ts's known ids (the stack's preview checks it). */
  geminiModel: string;
  /** Group commit: a batch of rows closes at this many rows (one MERGE over `UNNEST(@rows)`). */
  batchMaxRows: number;
  /**
   * Group commit: … or this long after its first row arrived. 0 by default: the pace gathers (the
   * rows that arrive while a statement runs, or while `mergeMinIntervalMs` runs, form the next one),
   * and an idle instance sends a row at once instead of holding it for rows that rarely come.
   */
  batchMaxWaitMs: number;
  /**
   * Group commit: an instance's share of the per-table DML budget when all `maxInstances` write. The
   * pace until a MERGE answered; then the latency-led pace stays between one writer's share and
   * twice this ({@link mergeIntervalForLatencyMs}).
   */
  mergeMinIntervalMs: number;
}

const DAY_SECONDS = 24 * 60 * 60;

/**
 * BigQuery's published per-table limits on mutating DML (an insert-only MERGE included): 2 running
 * and 20 queued statements, and 25 statements per 10 seconds. The whole deployment shares them.
 */
export const BIGQUERY_DML_LIMITS = Object.freeze({
  running: 2,
  queued: 20,
  statementsPerWindow: 25,
  windowSeconds: 10,
});

/**
 * The share of BigQuery's per-table DML budget the workers' steady MERGEs may use. The rest is left
 * for the statements that come on top of the pace: isolating a refused row (one MERGE per half) and
 * an operator's own DML. Using all 25 statements per 10 s leaves no room for either.
 */
export const STEADY_DML_SHARE = 0.8;

/** Cloud Run instances of the worker unless the stack says otherwise. */
export const DEFAULT_MAX_INSTANCES = 10;

export const DELIVERY_DEFAULTS: Readonly<DeliverySettings> = Object.freeze({
  ackDeadlineSeconds: 510,
  minRetryBackoffSeconds: 10,
  maxRetryBackoffSeconds: 600,
  // Pub/Sub's most: its retry horizon covers a dependency outage of DEPENDENCY_OUTAGE_SECONDS
  // (retryHorizonSeconds: 15.7 h with the backoffs above; 10 attempts covered 40 minutes).
  maxDeliveryAttempts: 100,
  messageRetentionSeconds: 7 * DAY_SECONDS,
  deadLetterRetentionSeconds: 7 * DAY_SECONDS,
  workerTimeoutSeconds: 500,
  ackDeadlineMarginSeconds: 10,
  analyzerTimeoutMs: 60_000,
  analyzerQuotaWaitMs: 300_000,
  analyzerMaxInFlight: 40,
  readTimeoutMs: 20_000,
  // 7 days of message retention + 7 days of dead-letter retention + 1 day of margin.
  redeliveryWindowDays: 15,
  maximumBytesBilled: 100 * 1000 * 1000,
  maxObjectBytes: 20 * 1024 * 1024,
  pushBodyLimitBytes: 256 * 1024,
  dedupKeyMode: 'object',
  // Served until at least 2027-07-21 (contract/models.ts, read from Google's lifecycle page).
  geminiModel: DEFAULT_GEMINI_MODEL,
  batchMaxRows: 500,
  // Chosen on the sweep's tuning cells (docs/sweep.md): 1 s of gathering cost a window-bound
  // deployment ~15 % of its drain time (1.85 → 1.57 × the oracle) for ~3 % fewer bytes billed.
  batchMaxWaitMs: 0,
  mergeMinIntervalMs: mergeMinIntervalMsFor(DEFAULT_MAX_INSTANCES),
});

/**
 * The least time between two MERGEs of one instance so that `maxInstances` instances together stay
 * within {@link STEADY_DML_SHARE} of the table's budget: derived, never a constant fitted to one
 * deployment. 10 instances → 5 s; 20 → 10 s.
 */
export function mergeMinIntervalMsFor(maxInstances: number): number {
  const { statementsPerWindow, windowSeconds } = BIGQUERY_DML_LIMITS;
  return Math.ceil(
    (maxInstances * windowSeconds * 1000) / Math.floor(statementsPerWindow * STEADY_DML_SHARE),
  );
}

/**
 * How far a write's pace stretches past `mergeMinIntervalMs` when its MERGEs take long or many
 * instances write: at most this many times (see {@link mergeIntervalForLatencyMs}); 3, so that the
 * default ten writers spaced by {@link FLEET_SPACING_SHARES} shares (15 s) fit under it (15 s),
 * as do the prod stack's twenty at a 10 s pace (30 s). The
 * delivery budget counts a write at this stretch ({@link afterAnswerMs}): 4 would not fit the
 * default path in `workerTimeoutSeconds`.
 */
export const MERGE_PACE_STRETCH = 3;

/**
 * The spacing the deployment keeps between its MERGEs once several instances write, in one writer's
 * shares of the DML budget (`mergeMinIntervalMs` / the instances it was derived for: 500 ms): each
 * instance waits at least (instances writing) × this × that share between two of its own, so the
 * fleet uses about a third of its steady DML budget (1.5 s between MERGEs with the defaults)
 * whatever its size. A pace that follows only the latency one instance observes keeps BigQuery's DML
 * queue full once more than a few instances write (below capacity the queue is empty and each paces
 * like a lone writer), so ten of them sent ~0.8–0.95 MERGEs a second and billed 2.2–2.6 × the best
 * bytes. Chosen on the sweep's tuning cells (docs/sweep.md): 4 shares (2 s) left
 * `shared-1000rpm-slow-everyAck-1000` at 1.23 × the oracle (1.09 without), 3 (1.5 s) at 1.11.
 */
export const FLEET_SPACING_SHARES = 3;

/**
 * The interval between two MERGEs of one instance, in MERGE latencies it observes: 1, so an
 * instance's next MERGE starts when its previous one has answered (or, after a slow one, once the
 * average latency has passed), and the rows that arrived meanwhile are its batch. Chosen on the
 * sweep's tuning cells (docs/sweep.md): 1.5 held every row of a window-bound deployment
 * half a MERGE longer (`tiers-1000rpm-fast-fastAcksOnly-1000`: 1.16 × the oracle, 1.12 at 1) and
 * bought bytes no goal needed (at 1, `shared-1000rpm-slow-everyAck-1000` bills 1.78 × its best,
 * within the 2×); where the whole fleet writes, BigQuery's 2 running slots set the statements per
 * second whatever the factor (`tiers-1000rpm-fast-everyAck-10000`: 2.4 × the best at 1 and at 1.5).
 */
export const MERGE_PACE_PER_LATENCY = 1;

/**
 * The interval between two MERGEs of one instance, from the MERGE latency it observes (`mergeMs`,
 * BigQuery's queue included): {@link MERGE_PACE_PER_LATENCY} × mergeMs. So the pace follows the
 * writers actually running, not the most that could (`maxInstances`, which Cloud Run's autoscaler
 * rarely starts): a few instances write every few seconds; when more write than BigQuery's 2
 * running slots per table can take at once, each MERGE waits in its queue, `mergeMs` grows, and
 * every instance slows down with it. One MERGE per instance is in flight at a time, so the
 * deployment never has more than `maxInstances` statements outstanding (under the 2 running + 20
 * queued), and it completes at most 2 per MERGE duration (under the 25 per 10 s while a MERGE takes
 * 0.8 s or more: the cost model assumes 1–3 s). Never under the share of one writer
 * (`minIntervalMs` / the instances it was derived for: {@link mergeMinIntervalMsFor}), never over
 * {@link MERGE_PACE_STRETCH} × `minIntervalMs`; `minIntervalMs` until a MERGE has answered. With
 * `writers` instances writing (the store's count over the last minute, `BatchStore.writers`),
 * never under `writers` × {@link FLEET_SPACING_SHARES} × one writer's share.
 */
export function mergeIntervalForLatencyMs(minIntervalMs: number, mergeMs: number, writers = 1): number {
  if (!(minIntervalMs > 0) || !(mergeMs > 0)) return Math.max(0, minIntervalMs);
  const { statementsPerWindow, windowSeconds } = BIGQUERY_DML_LIMITS;
  const instances =
    (minIntervalMs * Math.floor(statementsPerWindow * STEADY_DML_SHARE)) / (windowSeconds * 1000);
  const oneWriterMs = minIntervalMs / Math.max(1, instances);
  const fleetMs = writers > 1 ? writers * FLEET_SPACING_SHARES * oneWriterMs : 0;
  return Math.min(
    MERGE_PACE_STRETCH * minIntervalMs,
    Math.max(oneWriterMs, MERGE_PACE_PER_LATENCY * mergeMs, fleetMs),
  );
}

/** The group-commit pace each store takes by default (the stack passes BigQuery's derived one). */
export function storePace(store: 'sqlite' | 'bigquery'): {
  batchMaxWaitMs: number;
  mergeMinIntervalMs: number;
} {
  return store === 'bigquery'
    ? {
        batchMaxWaitMs: DELIVERY_DEFAULTS.batchMaxWaitMs,
        mergeMinIntervalMs: DELIVERY_DEFAULTS.mergeMinIntervalMs,
      }
    : { batchMaxWaitMs: 0, mergeMinIntervalMs: 0 };
}

/**
 * Checks that `maxInstances` workers, each with at most one MERGE in flight and at least
 * `mergeMinIntervalMs` between two, stay inside the per-table DML budget. Every problem names the
 * knob to turn.
 */
export function dmlBudgetProblems(s: { maxInstances: number; mergeMinIntervalMs: number }): string[] {
  const problems: string[] = [];
  const { running, queued, statementsPerWindow, windowSeconds } = BIGQUERY_DML_LIMITS;
  const perWindow = (s.maxInstances * windowSeconds * 1000) / s.mergeMinIntervalMs;
  if (!(s.mergeMinIntervalMs > 0) || perWindow > statementsPerWindow) {
    const least = Math.ceil((s.maxInstances * windowSeconds * 1000) / statementsPerWindow);
    problems.push(
      `maxInstances (${s.maxInstances}) × one MERGE every mergeMinIntervalMs (${s.mergeMinIntervalMs} ms) can reach ` +
        `${Number.isFinite(perWindow) ? perWindow.toFixed(1) : 'unbounded'} DML statements per ${windowSeconds} s, over BigQuery's ${statementsPerWindow} per table: ` +
        `raise mergeMinIntervalMs to at least ${least}, or lower maxInstances.`,
    );
  }
  if (s.maxInstances > running + queued) {
    problems.push(
      `maxInstances (${s.maxInstances}) is over ${running + queued}: with one MERGE in flight per instance, BigQuery's ` +
        `${running} running + ${queued} queued DML statements per table would overflow. Lower maxInstances.`,
    );
  }
  return problems;
}

/**
 * The longest outage of a dependency (Gemini, BigQuery, the memo's bucket) the pipeline rides out
 * without dead-lettering a good document: Pub/Sub keeps retrying its message for at least this long
 * ({@link retryHorizonSeconds}), and the worker answers it 503 at no cost meanwhile (core/outage.ts).
 */
export const DEPENDENCY_OUTAGE_SECONDS = 6 * 60 * 60;

/**
 * The growth factor assumed for Pub/Sub's exponential retry backoff: the documentation says only
 * "exponential" between the minimum and the maximum, and best effort. Doubling is the usual
 * reading; the horizon of the defaults still covers {@link DEPENDENCY_OUTAGE_SECONDS} with a factor
 * as low as 1.1 (11 h), so the promise does not hang on the exact factor.
 */
export const PUBSUB_BACKOFF_FACTOR = 2;

/**
 * How long Pub/Sub keeps retrying a message that is nacked at once on every delivery, before it is
 * dead-lettered: the sum of the backoffs between its `maxDeliveryAttempts` deliveries, growing by
 * `factor` from `minRetryBackoffSeconds` (at least 1 s) up to `maxRetryBackoffSeconds`. With the
 * defaults (10 s to 600 s, 100 attempts): 10 + 20 + 40 + 80 + 160 + 320 = 630 s of ramp, then 93 ×
 * 600 s = 55,800 s: 56,430 s, 15.7 h. With 10 attempts it was 2,430 s (40 minutes). Push backoff
 * and the window's shrinking under nacks only slow deliveries down, which lengthens it.
 */
export function retryHorizonSeconds(
  s: Pick<DeliverySettings, 'minRetryBackoffSeconds' | 'maxRetryBackoffSeconds' | 'maxDeliveryAttempts'>,
  factor = PUBSUB_BACKOFF_FACTOR,
): number {
  let backoff = Math.max(1, s.minRetryBackoffSeconds);
  let total = 0;
  for (let gap = 1; gap < s.maxDeliveryAttempts; gap++) {
    total += Math.min(backoff, s.maxRetryBackoffSeconds);
    backoff *= factor;
  }
  return total;
}

/** Cloud Run's grace period between SIGTERM and SIGKILL at scale-in. */
export const SHUTDOWN_GRACE_MS = 10_000;

/** Time kept at the end of a request, and of the grace period, to answer and close. */
export const ANSWER_MARGIN_MS = 2_000;

/** The least time a store statement is started with: a delivery with less left is answered 503. */
export const MIN_STATEMENT_MS = 2_000;

/** The longest one call to the memo of paid analyses (read, lease, keep) may take. */
export const MEMO_CALL_TIMEOUT_MS = 5_000;

/**
 * Memo calls on one delivery's path: a read, a read again after a wait in line, a lease, a keep, the
 * write's lease when the analysis ran without one, and the renewal that moves it past a BigQuery
 * statement's bound.
 */
export const MEMO_CALLS_PER_DELIVERY = 6;

/**
 * Of those, the calls after the analysis has answered: the keep, the write's lease, and the renewal
 * that moves it past a BigQuery statement's bound.
 */
export const MEMO_CALLS_AFTER_ANSWER = 3;

/** Analyzer calls one analysis may make: a second when the first answer misses the schema. */
export const ANALYZER_CALLS_PER_ANALYSIS = 2;

/**
 * The time one delivery may take: the request timeout less the margin to answer in. Every call of
 * the delivery is bounded by a deadline this far from its arrival (core/deadline.ts).
 */
export function deliveryBudgetMs(s: Pick<DeliverySettings, 'workerTimeoutSeconds'>): number {
  return s.workerTimeoutSeconds * 1000 - ANSWER_MARGIN_MS;
}

/**
 * The longest path of a delivery that ends in a row, part by part: each part is bounded by its own
 * timeout or wait. Waits that end with a 503 by design are not in it: a delivery waiting for a
 * concurrent delivery's lease stops at its deadline (the holder's analysis is then in the memo for
 * the retry), and the search for a refused row stops at the deadlines of the rows it holds.
 */
export function deliveryPathMs(
  s: Pick<
    DeliverySettings,
    'batchMaxWaitMs' | 'mergeMinIntervalMs' | 'analyzerQuotaWaitMs' | 'readTimeoutMs' | 'analyzerTimeoutMs'
  >,
): Record<'lookup' | 'memo' | 'quotaWait' | 'read' | 'analysis' | 'write', number> {
  const batchMs = s.batchMaxWaitMs + s.mergeMinIntervalMs + MIN_STATEMENT_MS;
  return {
    lookup: batchMs,
    memo: MEMO_CALLS_PER_DELIVERY * MEMO_CALL_TIMEOUT_MS,
    quotaWait: s.analyzerQuotaWaitMs,
    read: s.readTimeoutMs,
    analysis: ANALYZER_CALLS_PER_ANALYSIS * s.analyzerTimeoutMs,
    write: writePartMs(s),
  };
}

/**
 * The write's part of a delivery: the gathering wait, the interval between MERGEs at its longest (a
 * write's pace stretches with slow MERGEs: mergeIntervalForLatencyMs), and one statement.
 */
function writePartMs(s: Pick<DeliverySettings, 'batchMaxWaitMs' | 'mergeMinIntervalMs'>): number {
  return s.batchMaxWaitMs + MERGE_PACE_STRETCH * s.mergeMinIntervalMs + MIN_STATEMENT_MS;
}

/**
 * What a delivery still needs once its analysis has answered: the memo calls that follow the answer
 * ({@link MEMO_CALLS_AFTER_ANSWER}) and the write, counted as {@link deliveryPathMs} counts them so
 * that the two cannot drift apart. A paid analyzer call is awaited until the delivery's deadline
 * less this.
 */
export function afterAnswerMs(s: Pick<DeliverySettings, 'batchMaxWaitMs' | 'mergeMinIntervalMs'>): number {
  return MEMO_CALLS_AFTER_ANSWER * MEMO_CALL_TIMEOUT_MS + writePartMs(s);
}

/** The smallest `maximumBytesBilled` BigQuery accepts: any query bills at least 10 MiB. */
export const MIN_MAXIMUM_BYTES_BILLED = 10 * 1024 * 1024;

/** Content types the worker analyses by default. */
export const DEFAULT_CONTENT_TYPES: readonly string[] = [
  'application/pdf',
  'image/png',
  'image/jpeg',
  'image/webp',
  'text/plain',
  // EN 16931 e-invoices (CII, UBL): read from their structure, never analysed.
  'application/xml',
  'text/xml',
];

/** The shortest redelivery window that still covers a dead letter replayed on its last day. */
export function minRedeliveryWindowDays(s: {
  messageRetentionSeconds: number;
  deadLetterRetentionSeconds: number;
}): number {
  return Math.floor((s.messageRetentionSeconds + s.deadLetterRetentionSeconds) / DAY_SECONDS) + 1;
}

/**
 * Whether the redelivery window is too short to cover a dead letter replayed on its last day:
 * a message is dead-lettered at the latest when its retention ends and can be replayed until the
 * dead-letter retention ends.
 */
export function redeliveryWindowTooShort(
  s: Pick<
    DeliverySettings,
    'redeliveryWindowDays' | 'messageRetentionSeconds' | 'deadLetterRetentionSeconds'
  >,
): boolean {
  return s.redeliveryWindowDays * DAY_SECONDS <= s.messageRetentionSeconds + s.deadLetterRetentionSeconds;
}

/** Where the bucket and the dataset live unless a stack says otherwise. */
export const DEFAULT_DATA_LOCATION = 'EU';

/**
 * The Vertex AI location Gemini is called in when none is set, chosen from where the data lives so
 * that documents stay in the same jurisdiction: a multi-region maps to a region inside it, a region
 * to itself. `global` is never a default: it may serve a request from any region.
 */
export function defaultGeminiLocation(dataLocation: string): string {
  const location = dataLocation.trim();
  switch (location.toUpperCase()) {
    case 'EU':
      return 'europe-west1';
    case 'US':
      return 'us-central1';
    default:
      return location.toLowerCase();
  }
}

/** Pub/Sub's duration format: `"600s"`. */
export function durationString(seconds: number): string {
  return `${seconds}s`;
}

/**
 * The dead-letter subscription, as the stack and the local emulator setup create it: a pull
 * subscription that keeps a dead letter as long as the dead-letter topic does, acknowledged or not,
 * so that `gcloud pubsub subscriptions seek` can replay it. Neither of them lets it expire.
 */
export function deadLetterSubscriptionSettings(s: Pick<DeliverySettings, 'deadLetterRetentionSeconds'>): {
  ackDeadlineSeconds: number;
  messageRetentionDuration: string;
  retainAckedMessages: boolean;
} {
  return {
    ackDeadlineSeconds: 60,
    messageRetentionDuration: durationString(s.deadLetterRetentionSeconds),
    retainAckedMessages: true,
  };
}

/**
 * Checks a combination of settings and returns every problem, each naming the setting and the fix.
 * The Pulumi config module and the worker's config both use it.
 */
export function settingsProblems(s: DeliverySettings): string[] {
  const problems: string[] = [];
  if (!Number.isInteger(s.ackDeadlineSeconds) || s.ackDeadlineSeconds < 10 || s.ackDeadlineSeconds > 600) {
    problems.push(`ackDeadlineSeconds must be a whole number from 10 to 600 (got ${s.ackDeadlineSeconds}).`);
  }
  if (s.ackDeadlineSeconds < s.workerTimeoutSeconds + s.ackDeadlineMarginSeconds) {
    problems.push(
      `ackDeadlineSeconds (${s.ackDeadlineSeconds}) must be at least workerTimeoutSeconds (${s.workerTimeoutSeconds}) + ` +
        `${s.ackDeadlineMarginSeconds}s margin: raise ackDeadlineSeconds or lower workerTimeoutSeconds, ` +
        'otherwise Pub/Sub redelivers messages that are still being processed.',
    );
  }
  if (!Number.isInteger(s.maxDeliveryAttempts) || s.maxDeliveryAttempts < 5 || s.maxDeliveryAttempts > 100) {
    problems.push(`maxDeliveryAttempts must be a whole number from 5 to 100 (got ${s.maxDeliveryAttempts}).`);
  }
  if (s.minRetryBackoffSeconds < 0 || s.minRetryBackoffSeconds > 600) {
    problems.push(`minRetryBackoffSeconds must be from 0 to 600 (got ${s.minRetryBackoffSeconds}).`);
  }
  if (s.maxRetryBackoffSeconds < s.minRetryBackoffSeconds || s.maxRetryBackoffSeconds > 600) {
    problems.push(
      `maxRetryBackoffSeconds must be from minRetryBackoffSeconds (${s.minRetryBackoffSeconds}) to 600 (got ${s.maxRetryBackoffSeconds}).`,
    );
  }
  if (s.messageRetentionSeconds < 600 || s.messageRetentionSeconds > 31 * DAY_SECONDS) {
    problems.push(`messageRetentionSeconds must be from 600 (10 minutes) to ${31 * DAY_SECONDS} (31 days).`);
  }
  if (s.deadLetterRetentionSeconds < 7 * DAY_SECONDS || s.deadLetterRetentionSeconds > 31 * DAY_SECONDS) {
    problems.push(
      `deadLetterRetentionSeconds must be from ${7 * DAY_SECONDS} (7 days) to ${31 * DAY_SECONDS} (31 days) (got ${s.deadLetterRetentionSeconds}): ` +
        'shorter leaves an operator too little time to replay a dead letter.',
    );
  }
  if (redeliveryWindowTooShort(s)) {
    problems.push(
      `redeliveryWindowDays (${s.redeliveryWindowDays}) must cover more than messageRetentionSeconds (${s.messageRetentionSeconds}s) + ` +
        `deadLetterRetentionSeconds (${s.deadLetterRetentionSeconds}s), i.e. at least ${minRedeliveryWindowDays(s)} days: a message is ` +
        'dead-lettered at the latest when its retention ends and can be replayed until the dead-letter retention ends, ' +
        'and its paid analysis must still be kept then. Raise redeliveryWindowDays or shorten a retention.',
    );
  }
  if (s.maximumBytesBilled < MIN_MAXIMUM_BYTES_BILLED) {
    problems.push(
      `maximumBytesBilled must be at least ${MIN_MAXIMUM_BYTES_BILLED} (10 MiB): BigQuery bills every query at least that much, so a lower cap fails every query.`,
    );
  }
  if (!DEDUP_KEY_MODES.includes(s.dedupKeyMode)) {
    problems.push(`dedupKeyMode must be one of ${DEDUP_KEY_MODES.join(', ')} (got ${s.dedupKeyMode}).`);
  }
  if (!Number.isInteger(s.batchMaxRows) || s.batchMaxRows < 1 || s.batchMaxRows > 2_000) {
    problems.push(
      `batchMaxRows must be a whole number from 1 to 2000 (got ${s.batchMaxRows}): a MERGE request must stay under BigQuery's 10 MB.`,
    );
  }
  if (!Number.isInteger(s.batchMaxWaitMs) || s.batchMaxWaitMs < 0 || s.batchMaxWaitMs > 10_000) {
    problems.push(`batchMaxWaitMs must be a whole number from 0 to 10000 (got ${s.batchMaxWaitMs}).`);
  }
  if (
    !Number.isInteger(s.analyzerMaxInFlight) ||
    s.analyzerMaxInFlight < 1 ||
    s.analyzerMaxInFlight > 1_000
  ) {
    problems.push(
      `analyzerMaxInFlight must be a whole number from 1 to 1000 (got ${s.analyzerMaxInFlight}).`,
    );
  }
  if (!Number.isInteger(s.analyzerQuotaWaitMs) || s.analyzerQuotaWaitMs < 0) {
    problems.push(
      `analyzerQuotaWaitMs must be a whole number of milliseconds ≥ 0 (got ${s.analyzerQuotaWaitMs}).`,
    );
  }
  const path = deliveryPathMs(s);
  const pathMs = Object.values(path).reduce((a, b) => a + b, 0);
  if (pathMs > deliveryBudgetMs(s)) {
    problems.push(
      `A delivery's longest path takes ${pathMs} ms: its lookup batch (batchMaxWaitMs ${s.batchMaxWaitMs} + mergeMinIntervalMs ` +
        `${s.mergeMinIntervalMs} + a ${MIN_STATEMENT_MS} ms statement), ${MEMO_CALLS_PER_DELIVERY} memo calls of ${MEMO_CALL_TIMEOUT_MS} ms, ` +
        `its wait in line (analyzerQuotaWaitMs ${s.analyzerQuotaWaitMs}), a read (readTimeoutMs ${s.readTimeoutMs}), ` +
        `${ANALYZER_CALLS_PER_ANALYSIS} analyzer calls (analyzerTimeoutMs ${s.analyzerTimeoutMs}) and its write batch (its interval up to ${MERGE_PACE_STRETCH}× with slow MERGEs or many writers); it must fit in ` +
        `workerTimeoutSeconds (${s.workerTimeoutSeconds}s) less ${ANSWER_MARGIN_MS} ms to answer (${deliveryBudgetMs(s)} ms), ` +
        'or deliveries run out of time and are answered 503. Lower analyzerQuotaWaitMs first, or raise workerTimeoutSeconds ' +
        '(and ackDeadlineSeconds with it).',
    );
  }
  if (s.analyzerTimeoutMs >= s.workerTimeoutSeconds * 1000) {
    problems.push(
      `analyzerTimeoutMs (${s.analyzerTimeoutMs}) must be below workerTimeoutSeconds (${s.workerTimeoutSeconds}s).`,
    );
  }
  return problems;
}
