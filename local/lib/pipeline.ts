import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import {
  DELIVERY_DEFAULTS,
  type DeliverySettings,
  deadLetterSubscriptionSettings,
  durationString,
  storePace,
} from '../../worker/src/contract/settings';
import { PUSH_FILTER } from '../../worker/src/contract/storage';
import { Announcer, contentTypeFor } from './announcer';
import { freePort, type PubSubEmulator, startPubSubEmulator } from './emulator';
import { LocalBucket, type ObjectResource } from './local-bucket';
import { PubSubClient, type SubscriptionSpec } from './pubsub';
import { startWorkerProcess, type WorkerLogLine, type WorkerProcess } from './worker-process';

/**
 * The local pipeline: the real Pub/Sub emulator, the worker as a child process on its embedded
 * defaults, and a local bucket that announces uploads as Cloud Storage does. Topics and
 * subscriptions get the same settings the Pulumi stack declares (worker/src/contract/settings.ts).
 */

export const LOCAL_PROJECT = 'docline-local';
export const LOCAL_BUCKET = 'docline-local';

/** Resource names, the same in every local run. */
export const LOCAL_NAMES = {
  topic: 'docline-uploads',
  deadLetterTopic: 'docline-dead-letters',
  pushSubscription: 'docline-push',
  deadLetterSubscription: 'docline-dead-letters-pull',
} as const;

/** What companions (`upload`, `dlq`, `rows`) need to find a running pipeline. */
export interface PipelineState {
  projectId: string;
  emulatorBaseUrl: string;
  bucket: string;
  topic: string;
  deadLetterSubscription: string;
  workerUrl: string;
  dataDir: string;
  /** The worker's DEDUP_KEY: reconcile refuses to re-announce in message mode. */
  dedupKeyMode: DeliverySettings['dedupKeyMode'];
}

/** The push subscription, as the stack declares it (infra/components/delivery.ts reads the same settings). */
export function pushSubscriptionSpec(
  pubsub: PubSubClient,
  settings: DeliverySettings,
  pushEndpoint: string,
): SubscriptionSpec {
  return {
    topic: pubsub.topicPath(LOCAL_NAMES.topic),
    pushConfig: { pushEndpoint },
    ackDeadlineSeconds: settings.ackDeadlineSeconds,
    retryPolicy: {
      minimumBackoff: durationString(settings.minRetryBackoffSeconds),
      maximumBackoff: durationString(settings.maxRetryBackoffSeconds),
    },
    deadLetterPolicy: {
      deadLetterTopic: pubsub.topicPath(LOCAL_NAMES.deadLetterTopic),
      maxDeliveryAttempts: settings.maxDeliveryAttempts,
    },
    messageRetentionDuration: durationString(settings.messageRetentionSeconds),
    // The emulator accepts the filter but does not apply it; the worker rejects other event types anyway.
    filter: PUSH_FILTER,
  };
}

/** Creates the topics and subscriptions of the pipeline (idempotent). */
export async function configureDelivery(
  pubsub: PubSubClient,
  settings: DeliverySettings,
  pushEndpoint: string,
): Promise<void> {
  await pubsub.ensureTopic(LOCAL_NAMES.topic);
  await pubsub.ensureTopic(LOCAL_NAMES.deadLetterTopic);
  // Dead letters are kept for inspection and replay: the stack's dead-letter subscription, which
  // never expires.
  await pubsub.ensureSubscription(LOCAL_NAMES.deadLetterSubscription, {
    topic: pubsub.topicPath(LOCAL_NAMES.deadLetterTopic),
    ...deadLetterSubscriptionSettings(settings),
    expirationPolicy: {},
  });
  await pubsub.ensureSubscription(
    LOCAL_NAMES.pushSubscription,
    pushSubscriptionSpec(pubsub, settings, pushEndpoint),
  );
}

/** The fields of a worker's outcome line that the delivery ledger keeps (docs/month-end.md). */
const LEDGER_FIELDS = [
  'messageId',
  'dedupKey',
  'objectUri',
  'status',
  'reason',
  'duplicateAt',
  'analysed',
  'memo',
  'deliveryAttempt',
  'tokens',
  'error',
  'httpStatus',
] as const;

/** One answer of the worker, as the delivery ledger (`deliveries.jsonl`) keeps it. */
export type LedgerEntry = { at: string } & Partial<Record<(typeof LEDGER_FIELDS)[number], unknown>>;

/** The ledger entry of a worker log line, or undefined when the line is no delivery's answer. */
export function ledgerEntry(line: WorkerLogLine, at: Date): LedgerEntry | undefined {
  if (!line.status || (!line.messageId && line.status !== 'error')) return undefined;
  const entry: LedgerEntry = { at: at.toISOString() };
  for (const field of LEDGER_FIELDS) if (line[field] !== undefined) entry[field] = line[field];
  return entry;
}

/** Appends every answer of `worker` to the ledger, one JSON line each. */
function recordAnswers(worker: WorkerProcess, ledger: WriteStream): void {
  worker.events.on('line', (line: WorkerLogLine) => {
    const entry = ledgerEntry(line, new Date());
    // A line the worker's stdout still gives after the pipeline stopped is not written.
    if (entry && ledger.writable) ledger.write(`${JSON.stringify(entry)}\n`);
  });
}

export interface PipelineOptions {
  /** Holds the SQLite file, the local bucket and pipeline.json; kept across restarts. */
  dataDir: string;
  /** Overrides of the shared delivery settings (the e2e check shortens the retry backoff). */
  settings?: Partial<DeliverySettings>;
  /** `host:port` of a running emulator; one is started when omitted. */
  emulatorHost?: string;
  /** Extra worker environment (DEDUP_KEY, Gemini settings, …). */
  workerEnv?: Record<string, string | undefined>;
  /** A different worker entry module (test compositions). */
  workerEntry?: string;
  /** Announce every upload this many times (2 = "the notification was created twice"). */
  notificationCopies?: number;
}

export interface UploadResult {
  resource: ObjectResource;
  overwroteGeneration: string | null;
  messageIds: string[];
}

export interface Pipeline {
  readonly projectId: string;
  readonly pubsub: PubSubClient;
  readonly emulatorHost: string;
  readonly bucket: LocalBucket;
  readonly bucketName: string;
  readonly announcer: Announcer;
  readonly settings: DeliverySettings;
  readonly state: PipelineState;
  /** The current worker process (replaced by {@link restartWorker}). */
  readonly worker: WorkerProcess;
  /**
   * Stores bytes as a new generation and announces it. `stored` runs between the two, before any
   * delivery of the announcement can exist (to wait for its row without missing a fast one).
   */
  upload(
    name: string,
    bytes: Buffer,
    options?: { contentType?: string; copies?: number; stored?: (resource: ObjectResource) => void },
  ): Promise<UploadResult>;
  /** Stops (SIGTERM) or kills (SIGKILL) the worker and starts it again on the same port. */
  restartWorker(options?: {
    kill?: boolean;
    env?: Record<string, string | undefined>;
  }): Promise<WorkerProcess>;
  stop(): Promise<void>;
}

export async function startPipeline(options: PipelineOptions): Promise<Pipeline> {
  const settings: DeliverySettings = {
    ...DELIVERY_DEFAULTS,
    // The local worker runs on SQLite: its pace, not BigQuery's (see storePace).
    ...storePace('sqlite'),
    ...options.settings,
  };
  const layout = dataDirLayout(options.dataDir);
  const dataDir = layout.root;
  const emulator: PubSubEmulator | undefined = options.emulatorHost ? undefined : await startPubSubEmulator();
  const emulatorHost = options.emulatorHost ?? emulator!.host;
  const pubsub = new PubSubClient(`http://${emulatorHost}`, LOCAL_PROJECT);
  const bucket = new LocalBucket(layout.bucket);
  const announcer = new Announcer(pubsub, LOCAL_NAMES.topic);
  // A fixed port, so that the push endpoint stays valid when the worker restarts.
  const port = await freePort();
  const workerEnv = (extra?: Record<string, string | undefined>) => ({
    DOCLINE_DATA_DIR: dataDir,
    PORT: String(port),
    DEDUP_KEY: settings.dedupKeyMode,
    MAX_OBJECT_BYTES: String(settings.maxObjectBytes),
    PUSH_BODY_LIMIT_BYTES: String(settings.pushBodyLimitBytes),
    // Group commit's pace comes with the delivery settings: a pipeline with a short ack deadline
    // (the test suites') needs short batches, or deliveries outlast it and come back while open.
    BATCH_MAX_ROWS: String(settings.batchMaxRows),
    BATCH_MAX_WAIT_MS: String(settings.batchMaxWaitMs),
    MERGE_MIN_INTERVAL_MS: String(settings.mergeMinIntervalMs),
    // The pipeline prints outcomes from the worker's INFO lines: DEBUG stays DEBUG, anything else is INFO.
    LOG_LEVEL: process.env.LOG_LEVEL?.toUpperCase() === 'DEBUG' ? 'DEBUG' : 'INFO',
    ...options.workerEnv,
    ...extra,
  });
  let worker: WorkerProcess;
  mkdirSync(dataDir, { recursive: true });
  const ledger = createWriteStream(layout.deliveries, { flags: 'a' });
  try {
    worker = await startWorkerProcess({ env: workerEnv(), entry: options.workerEntry });
    recordAnswers(worker, ledger);
    await configureDelivery(pubsub, settings, `${worker.url}/push`);
  } catch (error) {
    ledger.end();
    await pubsub.close();
    await emulator?.stop();
    throw error;
  }
  const state: PipelineState = {
    projectId: LOCAL_PROJECT,
    emulatorBaseUrl: `http://${emulatorHost}`,
    bucket: LOCAL_BUCKET,
    topic: LOCAL_NAMES.topic,
    deadLetterSubscription: LOCAL_NAMES.deadLetterSubscription,
    workerUrl: worker.url,
    dataDir,
    dedupKeyMode: settings.dedupKeyMode,
  };
  await writeFile(layout.pipelineState, `${JSON.stringify(state, null, 2)}\n`);

  return {
    projectId: LOCAL_PROJECT,
    pubsub,
    emulatorHost,
    bucket,
    bucketName: LOCAL_BUCKET,
    announcer,
    settings,
    state,
    get worker() {
      return worker;
    },
    async upload(name, bytes, uploadOptions = {}) {
      const contentType = uploadOptions.contentType ?? contentTypeFor(name);
      const { resource, overwroteGeneration } = await bucket.put(LOCAL_BUCKET, name, bytes, contentType);
      const copies = uploadOptions.copies ?? options.notificationCopies ?? 1;
      uploadOptions.stored?.(resource);
      const messageIds = await announcer.announce(resource, overwroteGeneration, copies);
      return { resource, overwroteGeneration, messageIds };
    },
    async restartWorker(restart = {}) {
      if (restart.kill) {
        worker.child.kill('SIGKILL');
        await worker.exited;
      } else await worker.stop();
      worker = await startWorkerProcess({ env: workerEnv(restart.env), entry: options.workerEntry });
      recordAnswers(worker, ledger);
      return worker;
    },
    async stop() {
      await worker.stop();
      await new Promise<void>((resolve) => ledger.end(resolve));
      await pubsub.close();
      await emulator?.stop();
    },
  };
}
