import { ConfigValues, oneOf as oneOfSchema, wholeNumber } from './contract/config-values';
import { dataDirLayout } from './contract/data-dir';
import {
  afterAnswerMs,
  DEDUP_KEY_MODES,
  DEFAULT_CONTENT_TYPES,
  DEFAULT_DATA_LOCATION,
  DELIVERY_DEFAULTS,
  type DedupKeyMode,
  defaultGeminiLocation,
  LOG_LEVELS,
  MIN_MAXIMUM_BYTES_BILLED,
  minRedeliveryWindowDays,
  redeliveryWindowTooShort,
  storePace,
} from './contract/settings';
import { BUCKET_NAME } from './contract/storage';
import { ConfigError } from './core/errors';
import type { Severity } from './log';

/**
 * The worker's configuration, read from the environment once at start-up. Unset cloud settings
 * mean the embedded defaults (SQLite, the local bucket, the offline analyzer). Every problem is
 * listed in one error. No other module reads `process.env`.
 */

export type StoreConfig =
  | { kind: 'sqlite'; path: string }
  | {
      kind: 'bigquery';
      /** `project.dataset.table` */
      table: string;
      location: string | undefined;
      redeliveryWindowDays: number;
      maximumBytesBilled: number;
    };

export type ReaderConfig = { kind: 'local'; root: string } | { kind: 'gcs'; timeoutMs: number };

export type AnalyzerConfig =
  | { kind: 'offline' }
  | {
      kind: 'gemini';
      apiKey: string | undefined;
      project: string | undefined;
      location: string;
      model: string;
      timeoutMs: number;
      /** What a delivery needs after the answer (memo, write): a call is awaited until its deadline less this. */
      afterAnswerMs: number;
      baseUrl: string | undefined;
    };

export type MemoConfig =
  | { kind: 'file'; root: string; ttlMs: number }
  | { kind: 'gcs'; bucket: string; ttlMs: number };

export interface WorkerConfig {
  port: number;
  dataDir: string;
  workerVersion: string;
  logLevel: Severity;
  /** Google Cloud project, for log trace fields. */
  projectId: string | undefined;
  dedupKeyMode: DedupKeyMode;
  maxObjectBytes: number;
  allowedContentTypes: readonly string[];
  pushBodyLimitBytes: number;
  /** Cloud Run's request timeout of the worker: every delivery's deadline is derived from it. */
  requestTimeoutSeconds: number;
  store: StoreConfig;
  reader: ReaderConfig;
  analyzer: AnalyzerConfig;
  /** Admission to the paid work: analyses running at once here, and the longest wait for a turn. */
  /**
   * The quota gate: `maxInFlight` documents of the largest size bound memory (`maxBytesInFlight` =
   * maxInFlight × maxObjectBytes), and where the learnt limit starts; smaller documents let it grow.
   */
  admission: { maxInFlight: number; maxBytesInFlight: number; maxWaitMs: number };
  /** Group commit of lookups and writes; null when off (one statement per delivery). */
  groupCommit: { maxRows: number; maxWaitMs: number; minIntervalMs: number } | null;
  /** The memo of paid analyses; null when off. */
  memo: MemoConfig | null;
  /** In-app verification of the push OIDC token; null when off (Cloud Run IAM checks it instead). */
  pushAuth: { audience: string; serviceAccount: string } | null;
  /**
   * The e-invoice validator's folder (scripts/install-en16931.sh); undefined: the repository's
   * `.tools/en16931`; `off`: no validation.
   */
  eInvoiceValidator: string | undefined;
}

const TABLE_ID = /^[a-z][a-z0-9-]{4,61}[a-z0-9]\.[A-Za-z0-9_]{1,1024}\.[A-Za-z0-9_-]{1,1024}$/;

/** Reads and validates the worker configuration from an environment. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Readonly<WorkerConfig> {
  const text = (name: string): string | undefined => {
    const value = env[name]?.trim();
    return value ? value : undefined;
  };
  const values = new ConfigValues(text);
  const problems = values.problems;
  const integer = (name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number =>
    values.read(
      name,
      wholeNumber(min, max),
      fallback,
      (raw) => `${name} must be a whole number from ${min} to ${max} (got "${raw}").`,
    );
  const oneOf = <T extends string>(name: string, allowed: readonly T[], fallback: T): T =>
    values.read(
      name,
      oneOfSchema(allowed),
      fallback,
      (raw) => `${name} must be one of ${allowed.join(', ')} (got "${raw}").`,
    );

  const { root: dataDir, ...data } = dataDirLayout(text('DOCLINE_DATA_DIR'));
  const port = integer('PORT', 8080, 0, 65535);
  const dedupKeyMode = oneOf('DEDUP_KEY', DEDUP_KEY_MODES, DELIVERY_DEFAULTS.dedupKeyMode);
  const maxObjectBytes = integer('MAX_OBJECT_BYTES', DELIVERY_DEFAULTS.maxObjectBytes, 1);
  const pushBodyLimitBytes = integer(
    'PUSH_BODY_LIMIT_BYTES',
    DELIVERY_DEFAULTS.pushBodyLimitBytes,
    1024,
    16 * 1024 * 1024,
  );
  const allowedContentTypes = (text('ALLOWED_CONTENT_TYPES')?.split(',') ?? [...DEFAULT_CONTENT_TYPES])
    .map((t) => t.trim().toLowerCase())
    .filter(Boolean);
  for (const t of allowedContentTypes) {
    if (!/^[a-z0-9.+-]+\/[a-z0-9.+-]+$/.test(t))
      problems.push(`ALLOWED_CONTENT_TYPES has an invalid MIME type "${t}".`);
  }
  const requestTimeoutSeconds = integer(
    'REQUEST_TIMEOUT_SECONDS',
    DELIVERY_DEFAULTS.workerTimeoutSeconds,
    3,
    3600,
  );
  const logLevel = oneOf('LOG_LEVEL', LOG_LEVELS, 'INFO');
  const projectId = text('GOOGLE_CLOUD_PROJECT');

  let store: StoreConfig;
  const table = text('BIGQUERY_TABLE');
  if (table) {
    if (!TABLE_ID.test(table))
      problems.push(`BIGQUERY_TABLE must be project.dataset.table (got "${table}").`);
    const redeliveryWindowDays = integer(
      'REDELIVERY_WINDOW_DAYS',
      DELIVERY_DEFAULTS.redeliveryWindowDays,
      1,
      3650,
    );
    if (
      redeliveryWindowTooShort({ ...DELIVERY_DEFAULTS, redeliveryWindowDays }) &&
      text('REDELIVERY_WINDOW_DAYS')
    ) {
      problems.push(
        `REDELIVERY_WINDOW_DAYS (${redeliveryWindowDays}) must be at least ${minRedeliveryWindowDays(DELIVERY_DEFAULTS)}: the push ` +
          "subscription's message retention plus the dead-letter retention (by default), or late redeliveries and " +
          'replayed dead letters are not seen.',
      );
    }
    store = {
      kind: 'bigquery',
      table,
      location: text('BIGQUERY_LOCATION'),
      redeliveryWindowDays,
      maximumBytesBilled: integer(
        'MAXIMUM_BYTES_BILLED',
        DELIVERY_DEFAULTS.maximumBytesBilled,
        MIN_MAXIMUM_BYTES_BILLED,
      ),
    };
  } else {
    store = { kind: 'sqlite', path: data.sqlite };
  }

  const readerKind = oneOf('DOCLINE_READER', ['local', 'gcs'] as const, 'local');
  const reader: ReaderConfig =
    readerKind === 'gcs'
      ? { kind: 'gcs', timeoutMs: integer('READ_TIMEOUT_MS', DELIVERY_DEFAULTS.readTimeoutMs, 100) }
      : { kind: 'local', root: data.bucket };

  const apiKey = text('GEMINI_API_KEY');
  const analyzerKind = oneOf(
    'DOCLINE_ANALYZER',
    ['offline', 'gemini'] as const,
    apiKey ? 'gemini' : 'offline',
  );
  let analyzer: AnalyzerConfig = { kind: 'offline' };
  if (analyzerKind === 'gemini') {
    if (!apiKey && !projectId) {
      problems.push('DOCLINE_ANALYZER=gemini needs GEMINI_API_KEY, or GOOGLE_CLOUD_PROJECT for Vertex AI.');
    }
    analyzer = {
      kind: 'gemini',
      apiKey,
      project: projectId,
      // Next to the data unless told otherwise (the stack passes the same default explicitly).
      location:
        text('GOOGLE_CLOUD_LOCATION') ??
        defaultGeminiLocation(text('BIGQUERY_LOCATION') ?? DEFAULT_DATA_LOCATION),
      model: text('GEMINI_MODEL') ?? DELIVERY_DEFAULTS.geminiModel,
      timeoutMs: integer('ANALYZER_TIMEOUT_MS', DELIVERY_DEFAULTS.analyzerTimeoutMs, 100),
      afterAnswerMs: 0,
      baseUrl: text('GEMINI_BASE_URL'),
    };
  }

  const maxInFlight = integer('ANALYZER_MAX_IN_FLIGHT', DELIVERY_DEFAULTS.analyzerMaxInFlight, 1, 1_000);
  const admission = {
    maxInFlight,
    maxBytesInFlight: maxInFlight * maxObjectBytes,
    maxWaitMs: integer('ANALYZER_QUOTA_WAIT_MS', DELIVERY_DEFAULTS.analyzerQuotaWaitMs, 0, 3_600_000),
  };

  // The pace belongs to the store: BigQuery's per-table DML budget sets a gathering wait and an
  // interval between MERGEs; SQLite has no such budget, so its batches form only while a commit runs.
  const pace = storePace(store.kind);
  const groupCommit =
    oneOf('GROUP_COMMIT', ['on', 'off'] as const, 'on') === 'on'
      ? {
          maxRows: integer('BATCH_MAX_ROWS', DELIVERY_DEFAULTS.batchMaxRows, 1, 2_000),
          maxWaitMs: integer('BATCH_MAX_WAIT_MS', pace.batchMaxWaitMs, 0, 10_000),
          minIntervalMs: integer('MERGE_MIN_INTERVAL_MS', pace.mergeMinIntervalMs, 0, 600_000),
        }
      : null;
  if (analyzer.kind === 'gemini')
    analyzer.afterAnswerMs = afterAnswerMs({
      batchMaxWaitMs: groupCommit?.maxWaitMs ?? 0,
      mergeMinIntervalMs: groupCommit?.minIntervalMs ?? 0,
    });

  const ttlMs =
    (store.kind === 'bigquery' ? store.redeliveryWindowDays : DELIVERY_DEFAULTS.redeliveryWindowDays) *
    86_400_000;
  const memoBucket = text('MEMO_BUCKET');
  let memo: MemoConfig | null = null;
  // The memo keeps *paid* analyses. The offline analyzer is free: keeping its answers costs more
  // file I/O than working them out again (measured: it more than doubled the worker's CPU per
  // message), so it is on by default only in front of a paid analyzer.
  if (memoBucket && !BUCKET_NAME.test(memoBucket))
    problems.push(`MEMO_BUCKET must be a Cloud Storage bucket name (got "${memoBucket}").`);
  if (oneOf('MEMO', ['on', 'off'] as const, analyzer.kind === 'offline' ? 'off' : 'on') === 'on') {
    memo = memoBucket ? { kind: 'gcs', bucket: memoBucket, ttlMs } : { kind: 'file', root: data.memo, ttlMs };
  }

  const audience = text('PUSH_AUTH_AUDIENCE');
  const serviceAccount = text('PUSH_AUTH_SERVICE_ACCOUNT');
  if (Boolean(audience) !== Boolean(serviceAccount)) {
    problems.push(
      'PUSH_AUTH_AUDIENCE and PUSH_AUTH_SERVICE_ACCOUNT go together: set both to verify push tokens, or neither.',
    );
  }

  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({
    port,
    dataDir,
    workerVersion: text('WORKER_VERSION') ?? text('K_REVISION') ?? 'dev',
    eInvoiceValidator: text('EN16931_VALIDATOR'),
    logLevel,
    projectId,
    dedupKeyMode,
    maxObjectBytes,
    allowedContentTypes: Object.freeze(allowedContentTypes),
    pushBodyLimitBytes,
    requestTimeoutSeconds,
    store,
    reader,
    analyzer,
    admission,
    groupCommit,
    memo,
    pushAuth: audience && serviceAccount ? { audience, serviceAccount } : null,
  });
}
