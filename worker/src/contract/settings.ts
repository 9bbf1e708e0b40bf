import { DEFAULT_GEMINI_MODEL } from './models';
import { BUCKET_NAME } from './storage';

/**
 * Every setting of docline, declared once in {@link SETTINGS}: its name in the worker's environment
 * and as a stack key, its default, bounds and meaning. The worker's config, the stack's config, the
 * environment the stack gives the worker, Pulumi.yaml's config block and docs/configuration.md all
 * follow from it. Units are in the names. Knobs nobody should turn are constants, not settings.
 */

export type DedupKeyMode = 'object' | 'message';
export const DEDUP_KEY_MODES: readonly DedupKeyMode[] = ['object', 'message'];

/** Cloud Logging severity names, lowest first: the worker's LOG_LEVEL and the stack's logLevel take them. */
export const LOG_LEVELS = ['DEBUG', 'INFO', 'WARNING', 'ERROR'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** What the daily reconcile job does: report missing documents, announce them again, or nothing. */
export const RECONCILE_MODES = ['report', 'apply', 'off'] as const;
export type ReconcileMode = (typeof RECONCILE_MODES)[number];

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

/** Where the bucket and the dataset live unless a stack says otherwise. */
export const DEFAULT_DATA_LOCATION = 'EU';

/** One setting. */
export interface SettingDeclaration {
  /** The worker's environment variable. */
  readonly env?: string;
  /**
   * `key`: a `docline:*` stack key, whose value the stack also passes to the worker (`env`);
   * `derived`: no key, the stack works the value out and passes it. Unset: the worker's alone.
   */
  readonly stack?: 'key' | 'derived';
  /** How the text is read; a list of texts is "one of these". */
  readonly kind: 'integer' | 'string' | 'boolean' | 'list' | readonly string[];
  /** Unset (or a string's ''): no value, or what `defaultDoc` says. */
  readonly default?: number | string | boolean | readonly string[];
  readonly min?: number;
  readonly max?: number;
  /** An integer stack key whose 0 (its declared default) means "derived", as `doc` says. */
  readonly zeroDerives?: boolean;
  /** What a string, or each item of a list, must match, and how a problem says it. */
  readonly pattern?: { readonly test: RegExp; readonly says: string };
  /** The default in words, where it depends on other settings. */
  readonly defaultDoc?: string;
  /** A stack key a deployed stack must not change in place, and why (infra/stack-guards.ts). */
  readonly fixedAtDeploy?: string;
  readonly doc: string;
}

const WHOLE_DAYS = (days: number): number => days * DAY_SECONDS;

/**
 * The settings. Adding one: a row here, and the code that reads it (`readSetting` on the worker's
 * side in worker/src/config.ts, `StackConfig.settings` on the stack's); Pulumi.yaml's config block
 * and the tables of docs/configuration.md are written from this (`npm run settings`), and tests
 * check both files against it.
 */
export const SETTINGS = {
  // --- The worker's process and its adapters ---
  port: {
    env: 'PORT',
    kind: 'integer',
    default: 8080,
    min: 0,
    max: 65535,
    doc: 'HTTP port (`0`: any free port, logged at start).',
  },
  dataDir: {
    env: 'DOCLINE_DATA_DIR',
    kind: 'string',
    defaultDoc: '`./.docline`',
    doc: 'SQLite file (`docline.sqlite`) and local bucket (`bucket/`).',
  },
  bigqueryTable: {
    env: 'BIGQUERY_TABLE',
    kind: 'string',
    pattern: {
      test: /^[a-z][a-z0-9-]{4,61}[a-z0-9]\.[A-Za-z0-9_]{1,1024}\.[A-Za-z0-9_-]{1,1024}$/,
      says: 'project.dataset.table',
    },
    doc: '`project.dataset.table`; set: the BigQuery store instead of SQLite (the stack passes its table).',
  },
  bigqueryLocation: {
    env: 'BIGQUERY_LOCATION',
    kind: 'string',
    doc: "The dataset's location (e.g. `EU`) for query jobs (the stack passes dataLocation).",
  },
  reader: {
    env: 'DOCLINE_READER',
    kind: ['local', 'gcs'],
    default: 'local',
    doc: '`gcs`: read objects from Cloud Storage at their generation (the stack passes `gcs`).',
  },
  analyzer: {
    env: 'DOCLINE_ANALYZER',
    kind: ['offline', 'gemini'],
    defaultDoc: '`gemini` if `GEMINI_API_KEY` is set, else `offline`',
    doc: 'Which analyzer (the stack passes `gemini`).',
  },
  geminiApiKey: {
    env: 'GEMINI_API_KEY',
    kind: 'string',
    doc: 'Gemini API-key mode; without it Gemini runs in Vertex AI mode.',
  },
  googleCloudProject: {
    env: 'GOOGLE_CLOUD_PROJECT',
    kind: 'string',
    doc: 'Vertex AI project (and the log trace project); the stack passes gcp:project.',
  },
  geminiBaseUrl: {
    env: 'GEMINI_BASE_URL',
    kind: 'string',
    doc: 'Another endpoint for the Gemini API (tests).',
  },
  memo: {
    env: 'MEMO',
    kind: ['on', 'off'],
    defaultDoc: '`on` with Gemini, `off` with the offline analyzer',
    doc: '`off`: no memo of paid analyses (a retry after a failed write pays again). The offline analyzer is free, and keeping its answers costs more than working them out again.',
  },
  memoBucket: {
    env: 'MEMO_BUCKET',
    kind: 'string',
    pattern: { test: BUCKET_NAME, says: 'a Cloud Storage bucket name' },
    doc: 'Cloud Storage bucket of the memo (the stack passes its own); unset: the folder `memo/` in `DOCLINE_DATA_DIR`.',
  },
  pushAuthAudience: {
    env: 'PUSH_AUTH_AUDIENCE',
    kind: 'string',
    doc: "With `PUSH_AUTH_SERVICE_ACCOUNT`: verify the push OIDC token in the app (401/403 otherwise); the stack passes both, on top of Cloud Run's invoker check.",
  },
  pushAuthServiceAccount: {
    env: 'PUSH_AUTH_SERVICE_ACCOUNT',
    kind: 'string',
    doc: 'The account push tokens must be signed for (with `PUSH_AUTH_AUDIENCE`).',
  },
  workerVersion: {
    env: 'WORKER_VERSION',
    kind: 'string',
    defaultDoc: '`K_REVISION`, else `dev`',
    doc: 'Stored in every row; the stack leaves it unset, so rows carry the revision that wrote them.',
  },
  revision: { env: 'K_REVISION', kind: 'string', doc: 'The revision, set by Cloud Run.' },
  eInvoiceValidator: {
    env: 'EN16931_VALIDATOR',
    kind: 'string',
    defaultDoc: '`.tools/en16931` of the repository',
    doc: "The e-invoice validator's folder (Saxon-HE and the official artefacts, `scripts/install-en16931.sh`); `off`: no validation; not installed: every e-invoice's verdict is `unchecked` ([docs/e-invoices.md](e-invoices.md#validation-on-receipt)).",
  },
  // --- What the worker does with a delivery, and how long it may take ---
  dedupKeyMode: {
    env: 'DEDUP_KEY',
    stack: 'key',
    kind: DEDUP_KEY_MODES,
    default: 'object',
    fixedAtDeploy:
      'the old and the new revisions would look rows up by different keys while both run, and a redelivery of a message recorded under the old key would get a second row',
    doc: 'The lookup key: `object` (`gs://bucket/name#generation`, absorbs duplicate notifications) or `message` (the messageId).',
  },
  maxObjectBytes: {
    env: 'MAX_OBJECT_BYTES',
    stack: 'key',
    kind: 'integer',
    default: 20 * 1024 * 1024,
    min: 1,
    doc: 'Objects above this size are rejected `too_large` before any download.',
  },
  allowedContentTypes: {
    env: 'ALLOWED_CONTENT_TYPES',
    stack: 'key',
    kind: 'list',
    default: DEFAULT_CONTENT_TYPES,
    pattern: { test: /^[a-z0-9.+-]+\/[a-z0-9.+-]+$/i, says: 'a MIME type' },
    doc: 'Content types that are work (the variable: comma-separated); others are rejected. XML is read as an EN 16931 e-invoice, never analysed ([docs/e-invoices.md](e-invoices.md)).',
  },
  pushBodyLimitBytes: {
    env: 'PUSH_BODY_LIMIT_BYTES',
    kind: 'integer',
    default: 256 * 1024,
    min: 1024,
    max: 16 * 1024 * 1024,
    doc: 'Larger push bodies are answered 413 (a notification is a few KiB).',
  },
  workerTimeoutSeconds: {
    env: 'REQUEST_TIMEOUT_SECONDS',
    stack: 'key',
    kind: 'integer',
    default: 500,
    min: 3,
    max: 3600,
    doc: "Cloud Run's request timeout of the worker: each delivery's deadline is this less 2 s, and a call that could outlive it is not started (503). The stack derives the push subscription's ack deadline from it (this + 10 s), so as a stack key it is at most 590 (Pub/Sub's ack deadline is at most 600 s).",
  },
  readTimeoutMs: {
    env: 'READ_TIMEOUT_MS',
    kind: 'integer',
    default: 20_000,
    min: 100,
    doc: 'Per-request timeout of Cloud Storage reads.',
  },
  geminiModel: {
    env: 'GEMINI_MODEL',
    stack: 'key',
    kind: 'string',
    // Served until at least 2027-07-21 (contract/models.ts, read from Google's lifecycle page).
    default: DEFAULT_GEMINI_MODEL,
    doc: 'Gemini model (worker/src/contract/models.ts lists the known ids and their retirement dates): preview refuses one already retired and warns 60 days before; the worker checks it at start-up, and one Gemini does not know keeps `/healthz` at 503.',
  },
  geminiLocation: {
    env: 'GOOGLE_CLOUD_LOCATION',
    stack: 'key',
    kind: 'string',
    default: '',
    defaultDoc: 'a region inside the data location (EU: `europe-west1`, US: `us-central1`, a region: itself)',
    doc: 'Vertex AI location Gemini is called in; `global` may process documents anywhere.',
  },
  analyzerTimeoutMs: {
    env: 'ANALYZER_TIMEOUT_MS',
    kind: 'integer',
    default: 60_000,
    min: 100,
    doc: "The least time a Gemini call is started with (less left: 503); once started, a call is awaited until the delivery's deadline less the memo calls and the write that follow it, since it is paid whether or not its answer is awaited.",
  },
  analyzerQuotaWaitMs: {
    env: 'ANALYZER_QUOTA_WAIT_MS',
    kind: 'integer',
    default: 300_000,
    min: 0,
    max: 3_600_000,
    doc: "The longest a delivery waits inside the request for its turn at the analyzer (the line past analyzerMaxInFlight, and Gemini's 429s when the quota is spent) before answering 503, instead of a 503 that Pub/Sub would back off on.",
  },
  analyzerMaxInFlight: {
    env: 'ANALYZER_MAX_IN_FLIGHT',
    stack: 'key',
    kind: 'integer',
    default: 40,
    min: 1,
    max: 1000,
    doc: "The ceiling of reads + analyses one instance runs at once: this many documents of maxObjectBytes are the memory they may hold (the other deliveries wait in line holding only their push body). Under it the number is learnt from Gemini's answers: it grows on successes, halves on a 429 of a limit of the project's own (at once when it names its wait, else once most answers are 429s; never for Vertex AI's shared pool), shrinks when latency inflates, never under an eighth of this (docs/architecture.md).",
  },
  redeliveryWindowDays: {
    env: 'REDELIVERY_WINDOW_DAYS',
    stack: 'derived',
    kind: 'integer',
    // 7 days of message retention + 7 days of dead-letter retention + 1 day of margin.
    default: 15,
    min: 1,
    max: 3650,
    defaultDoc: '`15`; the stack passes messageRetentionSeconds + deadLetterRetentionSeconds + 1 day',
    doc: 'Days a delivery of a message can still arrive: the memo keeps a paid analysis that long, so a replayed dead letter still finds its analysis (BigQuery deduplicates by key day, without a window). Must exceed the message retention plus the dead-letter retention.',
  },
  maximumBytesBilled: {
    env: 'MAXIMUM_BYTES_BILLED',
    stack: 'key',
    kind: 'integer',
    default: 100 * 1000 * 1000,
    min: MIN_MAXIMUM_BYTES_BILLED,
    zeroDerives: true,
    doc: "Byte cap on every BigQuery query (at least 10 MiB). As a stack key, 0 (its default) derives it from documentsPerDay (at least 100000000), and preview refuses a cap below what the table's statements are estimated at for that volume.",
  },
  batchMaxRows: {
    env: 'BATCH_MAX_ROWS',
    kind: 'integer',
    default: 500,
    min: 1,
    max: 2000,
    doc: "A write batch closes at this many rows (a MERGE request must stay under BigQuery's 10 MB).",
  },
  batchMaxWaitMs: {
    env: 'BATCH_MAX_WAIT_MS',
    kind: 'integer',
    // Chosen on the sweep's tuning cells (docs/sweep.md): 1 s of gathering cost a window-bound
    // deployment ~15 % of its drain time (1.85 → 1.57 × the oracle) for ~3 % fewer bytes billed.
    default: 0,
    min: 0,
    max: 10_000,
    doc: '… or this long after its first row; at 0 the pace gathers: rows arriving while a statement or `MERGE_MIN_INTERVAL_MS` runs form the next batch, and an idle instance sends a row at once (docs/sweep.md).',
  },
  mergeMinIntervalMs: {
    env: 'MERGE_MIN_INTERVAL_MS',
    stack: 'derived',
    kind: 'integer',
    min: 0,
    max: 600_000,
    defaultDoc: '`5000` on BigQuery (the stack passes maxInstances × 500 ms), `0` on SQLite',
    doc: "An instance's share of the table's 25 DML statements per 10 s when all maxInstances write (the instances together use 20): the pace until a MERGE answered, then the MERGE latency observed, between this / the instances it was derived for and three times this, and at least 1.5 s × the instances that wrote in the last minute (docs/architecture.md). SQLite has no DML budget, so it takes no pacing.",
  },
  logLevel: {
    env: 'LOG_LEVEL',
    stack: 'key',
    kind: LOG_LEVELS,
    default: 'INFO',
    doc: 'The least severity logged.',
  },
  // --- The stack: where it runs, how it delivers and keeps data ---
  image: {
    stack: 'key',
    kind: 'string',
    default: '',
    pattern: {
      test: /^\S+$/,
      says: 'an image reference such as REGION-docker.pkg.dev/PROJECT/REPO/worker:TAG',
    },
    doc: "Worker image reference built elsewhere (e.g. by CI, in a repository outside the stack), used as it is; the stack then creates no repository. Empty: pulumi up builds worker/Dockerfile and pushes it to a repository of the stack's own, tagged with a hash of its sources.",
  },
  region: {
    stack: 'key',
    kind: 'string',
    default: 'europe-west1',
    fixedAtDeploy:
      'the topics keep their messages in this region, and the worker, its repository and its jobs would be created anew elsewhere while the old subscription still holds undelivered uploads',
    doc: 'Region of the Cloud Run worker and the Artifact Registry repository.',
  },
  dataLocation: {
    stack: 'key',
    kind: 'string',
    default: DEFAULT_DATA_LOCATION,
    fixedAtDeploy:
      'the bucket and the dataset cannot move: their replacements would be new, empty resources (or a dataset id that collides with the kept one), and uploads made to the old bucket would never be seen',
    doc: 'Location of the bucket and the BigQuery dataset (multi-region EU/US, or a region).',
  },
  deletionProtection: {
    stack: 'key',
    kind: 'boolean',
    default: true,
    doc: "Keep the data: destroy leaves the documents bucket, the dataset and table, and the log bucket in the project, and the delivery path's topics and subscriptions are protected from replacement (docs/deploy.md, Lifecycle). Set false only for throwaway stacks.",
  },
  messageRetentionSeconds: {
    stack: 'key',
    kind: 'integer',
    default: WHOLE_DAYS(7),
    min: 600,
    max: WHOLE_DAYS(31),
    doc: 'How long the push subscription keeps unacknowledged messages.',
  },
  deadLetterRetentionSeconds: {
    stack: 'key',
    kind: 'integer',
    default: WHOLE_DAYS(7),
    min: WHOLE_DAYS(7),
    max: WHOLE_DAYS(31),
    doc: 'How long dead letters can be replayed (shorter leaves an operator too little time to replay one). The redelivery window the worker is given covers it plus messageRetentionSeconds.',
  },
  documentsPerDay: {
    stack: 'key',
    kind: 'integer',
    // A modest deployment: its derived cap and instances are the defaults (contract/cost-model.ts).
    default: 10_000,
    min: 1,
    doc: "Documents a day the stack is sized for. The byte cap and the instances (hence the MERGE pace) are derived from it when left at 0, and preview refuses a cap below what the table's statements are estimated at for it.",
  },
  minInstances: { stack: 'key', kind: 'integer', default: 0, min: 0, doc: 'Minimum Cloud Run instances.' },
  maxInstances: {
    stack: 'key',
    kind: 'integer',
    default: DEFAULT_MAX_INSTANCES,
    min: 1,
    zeroDerives: true,
    doc: 'Maximum Cloud Run instances (caps BigQuery DML and Gemini concurrency; the MERGE pace is derived from it). 0 (its default): derived from documentsPerDay and concurrency (at least 10).',
  },
  concurrency: {
    stack: 'key',
    kind: 'integer',
    default: 400,
    min: 1,
    max: 1000,
    doc: 'Requests one worker instance serves at once.',
  },
  cpu: {
    stack: 'key',
    kind: 'string',
    default: '1',
    doc: 'CPU limit of the worker container (0.08 to below 1 with concurrency 1, or 1, 2, 4, 6, 8).',
  },
  memory: {
    stack: 'key',
    kind: 'string',
    default: '4Gi',
    doc: "Memory limit of the worker container; at least min(concurrency, analyzerMaxInFlight) x maxObjectBytes x 4 + concurrency x 256 KiB of push body + 256 MiB, and within Cloud Run's range for the cpu.",
  },
  notificationChannels: {
    stack: 'key',
    kind: 'list',
    default: [],
    doc: 'Monitoring notification channels (projects/PROJECT/notificationChannels/ID) every alert notifies.',
  },
  reconcileMode: {
    stack: 'key',
    kind: RECONCILE_MODES,
    default: 'report',
    doc: 'Daily reconcile job: report (log documents without a row, alert), apply (also announce them again) or off (no job).',
  },
  // --- Delivery and data-keeping settings (docs/deploy.md, "Lifecycle") ---
  tableVersion: {
    stack: 'key',
    kind: 'integer',
    default: 1,
    min: 1,
    doc: 'Schema version of the table: 1 is `deliveries_by_key_day`, N is `deliveries_by_key_day_vN`, a new table beside the old one. Raise it only with the migration of docs/deploy.md (a schema change BigQuery cannot apply in place).',
  },
  promotedImage: {
    stack: 'key',
    kind: 'boolean',
    default: false,
    doc: 'Run only the image CI built and promoted: docline:image when set, else the image the stack runs now; never build. A first up without docline:image is refused.',
  },
  allowKnobChange: {
    stack: 'key',
    kind: 'string',
    default: '',
    doc: 'The one guarded change the stack accepts, once: dedupKeyMode after the drain of docs/deploy.md, or a lower messageRetentionSeconds or deadLetterRetentionSeconds once nothing older is held. Empty: dedupKeyMode, region and dataLocation are refused in place, and so is a lower retention.',
  },
  documentRetentionYears: {
    stack: 'key',
    kind: 'integer',
    default: 0,
    min: 0,
    // Cloud Storage takes a retention under 3,155,760,000 s (100 years).
    max: 99,
    doc: 'Years no document in the bucket can be deleted or overwritten (a bucket retention policy, locked only with documentRetentionLocked). 0: none. See docs/deploy.md for the French and EU rules and for locking.',
  },
  documentRetentionLocked: {
    stack: 'key',
    kind: 'boolean',
    default: false,
    doc: "Lock the documents' retention policy: permanent, the period can then only grow. Lock here, never by hand (a hand-made lock makes the provider replace the bucket). Needs documentRetentionYears above 0.",
  },
  budgetBillingAccount: {
    stack: 'key',
    kind: 'string',
    default: '',
    pattern: {
      test: /^[0-9A-F]{6}-[0-9A-F]{6}-[0-9A-F]{6}$/,
      says: 'a billing account id such as 012345-6789AB-CDEF01',
    },
    doc: 'Billing account id (XXXXXX-XXXXXX-XXXXXX) of a monthly budget on the project that notifies the alert channels. Empty: no budget.',
  },
  budgetMonthlyAmount: {
    stack: 'key',
    kind: 'integer',
    default: 0,
    min: 0,
    doc: "Monthly budget in the billing account's currency; required above 0 with budgetBillingAccount.",
  },
} as const satisfies Record<string, SettingDeclaration>;

export type SettingKey = keyof typeof SETTINGS;

/** The value a setting's text is read as. */
export type SettingValue<K extends SettingKey> = ValueOf<(typeof SETTINGS)[K]>;
type ValueOf<D> = D extends { kind: 'integer' }
  ? number
  : D extends { kind: 'boolean' }
    ? boolean
    : D extends { kind: 'list' }
      ? readonly string[]
      : D extends { kind: readonly (infer T extends string)[] }
        ? T
        : D extends { default: infer V extends string }
          ? V extends ''
            ? string | undefined
            : string
          : string | undefined;

/** The settings that are `docline:*` stack keys, in the order Pulumi.yaml declares them. */
export const STACK_KEYS = (Object.keys(SETTINGS) as SettingKey[]).filter(
  (key) => (SETTINGS[key] as SettingDeclaration).stack === 'key',
);
export type StackKey = {
  [K in SettingKey]: (typeof SETTINGS)[K] extends { stack: 'key' } ? K : never;
}[SettingKey];

/** A setting's declaration, without its literal types. */
export function declarationOf(key: SettingKey): SettingDeclaration {
  return SETTINGS[key];
}

/** The default of a setting, as its stack key declares it (0 where 0 derives it). */
export function stackDefault(key: SettingKey): SettingDeclaration['default'] {
  const s = declarationOf(key);
  return s.zeroDerives ? 0 : s.default;
}

/**
 * Pub/Sub's retry and dead-letter policy and the margin the ack deadline keeps above the worker's
 * timeout: constants, not settings. The backoffs span 10 s to Pub/Sub's most (600 s); 100 attempts,
 * Pub/Sub's most, give a retry horizon that covers a dependency outage of DEPENDENCY_OUTAGE_SECONDS
 * (retryHorizonSeconds: 15.7 h). The margin keeps the ack deadline honest: a slow request ends
 * before Pub/Sub gives up on it.
 */
export const DELIVERY_POLICY = Object.freeze({
  ackDeadlineMarginSeconds: 10,
  minRetryBackoffSeconds: 10,
  maxRetryBackoffSeconds: 600,
  maxDeliveryAttempts: 100,
});

/** Pub/Sub's longest ack deadline: for push, also the longest it waits for the worker's answer. */
export const PUBSUB_MAX_ACK_DEADLINE_SECONDS = 600;

/**
 * The push subscription's ack deadline: the worker's timeout plus the margin, at most Pub/Sub's
 * {@link PUBSUB_MAX_ACK_DEADLINE_SECONDS}. Derived, not a setting: any other value either redelivers
 * messages still being processed (shorter) or holds a lost delivery longer than needed (longer).
 * {@link settingsProblems} refuses a timeout whose deadline the cap would cut.
 */
export function ackDeadlineSecondsFor(workerTimeoutSeconds: number): number {
  return Math.min(
    PUBSUB_MAX_ACK_DEADLINE_SECONDS,
    workerTimeoutSeconds + DELIVERY_POLICY.ackDeadlineMarginSeconds,
  );
}

/** The settings that shape a delivery, which the stack, the local pipeline and the worker agree on. */
const DELIVERY_KEYS = [
  'messageRetentionSeconds',
  'deadLetterRetentionSeconds',
  'workerTimeoutSeconds',
  'analyzerTimeoutMs',
  'analyzerQuotaWaitMs',
  'analyzerMaxInFlight',
  'readTimeoutMs',
  'redeliveryWindowDays',
  'maximumBytesBilled',
  'maxObjectBytes',
  'pushBodyLimitBytes',
  'dedupKeyMode',
  'geminiModel',
  'batchMaxRows',
  'batchMaxWaitMs',
  'mergeMinIntervalMs',
] as const satisfies readonly SettingKey[];

/**
 * The delivery settings and the delivery policy, and the push subscription's ack deadline (derived
 * from workerTimeoutSeconds: {@link ackDeadlineSecondsFor}). Units are in the names.
 */
export type DeliverySettings = { [K in (typeof DELIVERY_KEYS)[number]]: NonNullable<SettingValue<K>> } & {
  [K in keyof typeof DELIVERY_POLICY]: number;
} & { ackDeadlineSeconds: number };

export const DELIVERY_DEFAULTS: Readonly<DeliverySettings> = Object.freeze({
  ...DELIVERY_POLICY,
  ...(Object.fromEntries(DELIVERY_KEYS.map((key) => [key, declarationOf(key).default])) as Omit<
    DeliverySettings,
    keyof typeof DELIVERY_POLICY | 'mergeMinIntervalMs' | 'ackDeadlineSeconds'
  >),
  ackDeadlineSeconds: ackDeadlineSecondsFor(SETTINGS.workerTimeoutSeconds.default),
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
 * as do the prod stack's twenty at a 10 s pace (30 s). The delivery budget counts a write at this
 * stretch ({@link afterAnswerMs}): 4 would not fit the default path in `workerTimeoutSeconds`.
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
 * 600 s = 55,800 s: 56,430 s, 15.7 h. Push backoff and the window's shrinking under nacks only slow
 * deliveries down, which lengthens it.
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
 * Each value's own bounds are the table's ({@link SETTINGS}); these are the ones between values.
 */
export function settingsProblems(s: DeliverySettings): string[] {
  const problems: string[] = [];
  const longestTimeout = PUBSUB_MAX_ACK_DEADLINE_SECONDS - s.ackDeadlineMarginSeconds;
  if (s.workerTimeoutSeconds > longestTimeout) {
    problems.push(
      `workerTimeoutSeconds (${s.workerTimeoutSeconds}) must be at most ${longestTimeout}: the push subscription's ack ` +
        `deadline is derived as workerTimeoutSeconds + ${s.ackDeadlineMarginSeconds}s margin, and Pub/Sub allows at most ` +
        `${PUBSUB_MAX_ACK_DEADLINE_SECONDS}s, so Pub/Sub would redeliver messages that are still being processed. ` +
        `Lower workerTimeoutSeconds to ${longestTimeout} or less.`,
    );
  } else if (s.ackDeadlineSeconds < s.workerTimeoutSeconds + s.ackDeadlineMarginSeconds) {
    // The stack derives the deadline; this holds callers that pass their own.
    problems.push(
      `ackDeadlineSeconds (${s.ackDeadlineSeconds}) must be at least workerTimeoutSeconds (${s.workerTimeoutSeconds}) + ` +
        `${s.ackDeadlineMarginSeconds}s margin: raise ackDeadlineSeconds or lower workerTimeoutSeconds, ` +
        'otherwise Pub/Sub redelivers messages that are still being processed.',
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
        'or deliveries run out of time and are answered 503. Raise workerTimeoutSeconds (at most ' +
        `${longestTimeout}; the ack deadline follows it), or lower maxInstances (the MERGE pace follows it).`,
    );
  }
  return problems;
}
