import { SettingReader } from './contract/config-values';
import { dataDirLayout } from './contract/data-dir';
import {
  afterAnswerMs,
  DEFAULT_DATA_LOCATION,
  DELIVERY_DEFAULTS,
  type DedupKeyMode,
  defaultGeminiLocation,
  minRedeliveryWindowDays,
  redeliveryWindowTooShort,
  storePace,
} from './contract/settings';
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
  /**
   * Admission to the paid work, the quota gate: `maxInFlight` documents of the largest size bound
   * memory (`maxBytesInFlight` = maxInFlight × maxObjectBytes), and where the learnt limit starts;
   * smaller documents let it grow. `maxWaitMs`: the longest wait for a turn.
   */
  admission: { maxInFlight: number; maxBytesInFlight: number; maxWaitMs: number };
  /** Group commit of lookups and writes: every delivery's statements go through it. */
  groupCommit: { maxRows: number; maxWaitMs: number; minIntervalMs: number };
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

/** Variables that were settings once, with why they are refused rather than ignored. */
const RETIRED_VARIABLES: Readonly<Record<string, string>> = {
  GROUP_COMMIT:
    'every write goes through group commit (one statement per delivery broke the exactly-once invariants under the fault simulator, docs/testing.md)',
};

/** Reads and validates the worker configuration from an environment. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Readonly<WorkerConfig> {
  const values = new SettingReader((name) => env[name]?.trim() || undefined, 'env');
  const { problems } = values;
  const read = values.setting.bind(values);
  for (const [name, why] of Object.entries(RETIRED_VARIABLES))
    if (env[name] !== undefined) problems.push(`${name} is no longer a setting: ${why}. Remove it.`);

  const { root: dataDir, ...data } = dataDirLayout(read('dataDir'));
  // Read in the order a listing of problems gives them.
  const port = read('port');
  const dedupKeyMode = read('dedupKeyMode');
  const maxObjectBytes = read('maxObjectBytes');
  const pushBodyLimitBytes = read('pushBodyLimitBytes');
  const allowedContentTypes = read('allowedContentTypes').map((type) => type.toLowerCase());
  const requestTimeoutSeconds = read('workerTimeoutSeconds');
  const logLevel = read('logLevel');
  const projectId = read('googleCloudProject');

  let store: StoreConfig;
  // A table set, even a wrong one, means BigQuery: its settings are checked too.
  if (values.given('bigqueryTable')) {
    const redeliveryWindowDays = read('redeliveryWindowDays');
    if (redeliveryWindowTooShort({ ...DELIVERY_DEFAULTS, redeliveryWindowDays })) {
      problems.push(
        `REDELIVERY_WINDOW_DAYS (${redeliveryWindowDays}) must be at least ${minRedeliveryWindowDays(DELIVERY_DEFAULTS)}: the push ` +
          "subscription's message retention plus the dead-letter retention (by default), or late redeliveries and " +
          'replayed dead letters are not seen.',
      );
    }
    store = {
      kind: 'bigquery',
      table: read('bigqueryTable') ?? '',
      location: read('bigqueryLocation'),
      redeliveryWindowDays,
      maximumBytesBilled: read('maximumBytesBilled'),
    };
  } else {
    store = { kind: 'sqlite', path: data.sqlite };
  }

  const reader: ReaderConfig =
    read('reader') === 'gcs'
      ? { kind: 'gcs', timeoutMs: read('readTimeoutMs') }
      : { kind: 'local', root: data.bucket };

  const apiKey = read('geminiApiKey');
  let analyzer: AnalyzerConfig = { kind: 'offline' };
  if (read('analyzer', apiKey ? 'gemini' : 'offline') === 'gemini') {
    if (!apiKey && !projectId) {
      problems.push('DOCLINE_ANALYZER=gemini needs GEMINI_API_KEY, or GOOGLE_CLOUD_PROJECT for Vertex AI.');
    }
    analyzer = {
      kind: 'gemini',
      apiKey,
      project: projectId,
      // Next to the data unless told otherwise (the stack passes the same default explicitly).
      location:
        read('geminiLocation') ?? defaultGeminiLocation(read('bigqueryLocation') ?? DEFAULT_DATA_LOCATION),
      model: read('geminiModel'),
      timeoutMs: read('analyzerTimeoutMs'),
      afterAnswerMs: 0,
      baseUrl: read('geminiBaseUrl'),
    };
  }

  const maxInFlight = read('analyzerMaxInFlight');
  const admission = {
    maxInFlight,
    maxBytesInFlight: maxInFlight * maxObjectBytes,
    maxWaitMs: read('analyzerQuotaWaitMs'),
  };

  // The pace belongs to the store: BigQuery's per-table DML budget sets a gathering wait and an
  // interval between MERGEs; SQLite has no such budget, so its batches form only while a commit runs.
  const pace = storePace(store.kind);
  const groupCommit = {
    maxRows: read('batchMaxRows'),
    maxWaitMs: read('batchMaxWaitMs', pace.batchMaxWaitMs),
    minIntervalMs: read('mergeMinIntervalMs', pace.mergeMinIntervalMs),
  };
  if (analyzer.kind === 'gemini')
    analyzer.afterAnswerMs = afterAnswerMs({
      batchMaxWaitMs: groupCommit.maxWaitMs,
      mergeMinIntervalMs: groupCommit.minIntervalMs,
    });

  const ttlMs =
    (store.kind === 'bigquery' ? store.redeliveryWindowDays : DELIVERY_DEFAULTS.redeliveryWindowDays) *
    86_400_000;
  const memoBucket = read('memoBucket');
  let memo: MemoConfig | null = null;
  // The memo keeps *paid* analyses. The offline analyzer is free: keeping its answers costs more
  // file I/O than working them out again (measured: it more than doubled the worker's CPU per
  // message), so it is on by default only in front of a paid analyzer.
  if (read('memo', analyzer.kind === 'offline' ? 'off' : 'on') === 'on') {
    memo = memoBucket ? { kind: 'gcs', bucket: memoBucket, ttlMs } : { kind: 'file', root: data.memo, ttlMs };
  }

  const audience = read('pushAuthAudience');
  const serviceAccount = read('pushAuthServiceAccount');
  if (Boolean(audience) !== Boolean(serviceAccount)) {
    problems.push(
      'PUSH_AUTH_AUDIENCE and PUSH_AUTH_SERVICE_ACCOUNT go together: set both to verify push tokens, or neither.',
    );
  }

  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({
    port,
    dataDir,
    workerVersion: read('workerVersion') ?? read('revision') ?? 'dev',
    eInvoiceValidator: read('eInvoiceValidator'),
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
