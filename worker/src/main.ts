import type { Server } from 'node:http';
import type { PdfJsParser } from './adapters/pdf/pdfjs-parser';
import { QuotaGate } from './adapters/quota-gate';
import { createApp, type Readiness } from './app';
import { loadConfig, type WorkerConfig } from './config';
import { ANSWER_MARGIN_MS, deliveryBudgetMs, SHUTDOWN_GRACE_MS } from './contract/settings';
import { Deadlines } from './core/deadline';
import type { HandlerDeps } from './core/handle';
import { AnalysisMemo } from './core/memo';
import { OutageBreaker } from './core/outage';
import {
  type Analyzer,
  type BatchStore,
  type EInvoiceReader,
  type Logger,
  type MemoStore,
  type Reader,
  type Store,
  systemClock,
} from './core/ports';
import { JsonLogger } from './log';

/**
 * The composition root: configuration → adapters → app → listen. The only module that reads the
 * environment, builds clients and picks adapters. Adapters and client libraries are loaded only
 * when configured (`require`/`import()` inside the builders), so a local run never loads the
 * Google client libraries and stays small.
 */

export interface Adapters {
  store: Store;
  reader: Reader;
  analyzer: Analyzer;
  /** Where paid analyses are kept; absent when the memo is off. */
  memo?: MemoStore;
  /** Reads e-invoices (Factur-X, CII, UBL) from their structure; absent, every document is analysed. */
  eInvoices?: EInvoiceReader;
  authenticate?: (authorization: string | undefined) => Promise<void>;
}

/** Group commit over a store that takes batches: every delivery's lookup and write go through it. */
export async function withGroupCommit(
  store: BatchStore,
  config: Pick<WorkerConfig, 'groupCommit'>,
  logger: Logger,
): Promise<Store> {
  const { GroupCommitStore } = await import('./adapters/stores/group-commit-store.js');
  return new GroupCommitStore(store, { ...config.groupCommit, logger });
}

/** The store the configuration names, before group commit goes around it. */
export async function buildBaseStore(config: WorkerConfig, logger: Logger): Promise<BatchStore> {
  const store = config.store;
  if (store.kind === 'sqlite') {
    const { SqliteStore } = await import('./adapters/stores/sqlite-store.js');
    return new SqliteStore({ path: store.path });
  }
  const { BigQueryStore, createBigQueryClient } = await import('./adapters/stores/bigquery-store.js');
  const [project] = store.table.split('.');
  // The client's own retries are off: Pub/Sub retries the whole delivery instead.
  const bigquery = createBigQueryClient({ projectId: project, location: store.location });
  return new BigQueryStore({
    bigquery,
    table: store.table,
    location: store.location,
    maximumBytesBilled: store.maximumBytesBilled,
    // BigQueryStore adds `app: docline`.
    labels: {
      worker_version: config.workerVersion
        .toLowerCase()
        .replace(/[^a-z0-9_-]/g, '_')
        .slice(0, 63),
    },
    logger,
  });
}

async function buildReader(config: WorkerConfig): Promise<Reader> {
  const reader = config.reader;
  if (reader.kind === 'local') {
    const { LocalBucketReader } = await import('./adapters/readers/local-bucket.js');
    return new LocalBucketReader(reader.root);
  }
  const { GcsReader, createStorageClient } = await import('./adapters/readers/gcs-reader.js');
  return new GcsReader({
    storage: createStorageClient({ timeoutMs: reader.timeoutMs }),
    timeoutMs: reader.timeoutMs,
  });
}

async function buildAnalyzer(config: WorkerConfig, logger: Logger, pdf?: PdfJsParser): Promise<Analyzer> {
  const analyzer = config.analyzer;
  if (analyzer.kind === 'offline') {
    const { OfflineAnalyzer } = await import('./adapters/analyzers/offline-analyzer.js');
    const { TesseractOcr } = await import('./adapters/analyzers/offline/ocr/tesseract-ocr.js');
    return new OfflineAnalyzer({ pdf, ocr: new TesseractOcr() });
  }
  const { GeminiAnalyzer, createGeminiClient } = await import('./adapters/analyzers/gemini-analyzer.js');
  const client = createGeminiClient({
    apiKey: analyzer.apiKey,
    project: analyzer.project,
    location: analyzer.location,
    baseUrl: analyzer.baseUrl,
  });
  return new GeminiAnalyzer({
    client,
    model: analyzer.model,
    timeoutMs: analyzer.timeoutMs,
    afterAnswerMs: analyzer.afterAnswerMs,
    logger,
  });
}

const MEMO_PRUNE_INTERVAL_MS = 60 * 60 * 1000;

async function buildMemo(config: WorkerConfig, logger: Logger): Promise<MemoStore | undefined> {
  const memo = config.memo;
  if (!memo) return undefined;
  if (memo.kind === 'gcs') {
    const { GcsMemoStore } = await import('./adapters/memo-stores/gcs-memo-store.js');
    const { createStorageClient } = await import('./adapters/readers/gcs-reader.js');
    // Expiry in the cloud is the bucket's lifecycle rule.
    return new GcsMemoStore({ storage: createStorageClient({}), bucket: memo.bucket });
  }
  const { FileMemoStore } = await import('./adapters/memo-stores/file-memo-store.js');
  const store = new FileMemoStore(memo.root);
  // Locally the worker prunes its own folder: at start, then hourly.
  const prune = () =>
    store.prune(new Date(Date.now() - memo.ttlMs)).catch((error: unknown) => {
      logger.warn('pruning the memo folder failed', { error: String(error) });
      return 0;
    });
  void prune();
  setInterval(prune, MEMO_PRUNE_INTERVAL_MS).unref();
  return store;
}

async function buildEInvoiceReader(
  config: WorkerConfig,
  logger: Logger,
  analyzer: Analyzer,
  pdf?: PdfJsParser,
): Promise<EInvoiceReader> {
  const { En16931Reader } = await import('./adapters/e-invoice/en16931-reader.js');
  return new En16931Reader(pdf, await buildEInvoiceValidator(config, logger, analyzer));
}

/**
 * The validation of e-invoices on receipt: Saxon-HE and the official artefacts when
 * scripts/install-en16931.sh installed them (EN16931_VALIDATOR names another folder; `off` turns
 * validation off), else every e-invoice's verdict is `unchecked`. A hybrid PDF's picture is
 * compared with its XML by the offline analyzer only: Gemini would be paid for it.
 */
async function buildEInvoiceValidator(config: WorkerConfig, logger: Logger, analyzer: Analyzer) {
  if (config.eInvoiceValidator === 'off') return undefined;
  const { EInvoiceValidator } = await import('./adapters/e-invoice/validation/validation.js');
  const { SaxonRunner, findValidator } = await import('./adapters/e-invoice/validation/saxon-runner.js');
  const picture = config.analyzer.kind === 'offline' ? { picture: analyzer } : {};
  const found = findValidator(config.eInvoiceValidator);
  if (!found)
    return new EInvoiceValidator({
      unavailable: 'no validator installed (scripts/install-en16931.sh)',
      ...picture,
    });
  const runner = new SaxonRunner({
    ...found,
    onStderr: (line) => logger.warn('e-invoice validator', { stderr: line }),
  });
  return new EInvoiceValidator({ runner, ...picture });
}

/** Offline, the e-invoice reader and the analyzer share one PDF parser: a PDF is parsed once. */
async function buildSharedPdfParser(config: WorkerConfig): Promise<PdfJsParser | undefined> {
  if (config.analyzer.kind !== 'offline') return undefined;
  const { PdfJsParser } = await import('./adapters/pdf/pdfjs-parser.js');
  return new PdfJsParser();
}

async function buildAuthenticator(config: WorkerConfig): Promise<Adapters['authenticate']> {
  if (!config.pushAuth) return undefined;
  const { createPushVerifier } = await import('./adapters/push-auth.js');
  return createPushVerifier(config.pushAuth);
}

/**
 * Builds the adapters the configuration names; `base`, when given, is the store group commit goes
 * around instead of the configured one (a test composition's fault switches).
 */
export async function buildAdapters(
  config: WorkerConfig,
  logger: Logger,
  base?: BatchStore,
): Promise<Adapters> {
  const pdf = await buildSharedPdfParser(config);
  const analyzer = await buildAnalyzer(config, logger, pdf);
  return {
    store: await withGroupCommit(base ?? (await buildBaseStore(config, logger)), config, logger),
    reader: await buildReader(config),
    analyzer,
    memo: await buildMemo(config, logger),
    eInvoices: await buildEInvoiceReader(config, logger, analyzer, pdf),
    authenticate: await buildAuthenticator(config),
  };
}

export interface RunningWorker {
  server: Server;
  port: number;
  /** The line of deliveries waiting for a turn at the analyzer (for logs and tests). */
  admission: QuotaGate;
  /** Settles when the start-up checks have ended (whatever they found); `/healthz` says what. */
  checked: Promise<void>;
  /**
   * Scale-in, within `graceMs` (Cloud Run's 10 s by default): new pushes are answered 503, the
   * deliveries waiting for a turn or for a concurrent delivery's lease are answered 503 at once,
   * the rows waiting in a batch are written now, the work under way keeps until the end of the
   * grace period (less a margin to answer), then the store closes.
   */
  stop(graceMs?: number): Promise<void>;
}

/** Serves the worker with the given adapters; the test composition wraps adapters and calls this. */
export async function serve(
  config: WorkerConfig,
  adapters: Adapters,
  logger: Logger,
): Promise<RunningWorker> {
  const admission = new QuotaGate(config.admission);
  const deadlines = new Deadlines(
    deliveryBudgetMs({ workerTimeoutSeconds: config.requestTimeoutSeconds }),
    systemClock,
  );
  // Watches the store's and the analyzer's calls: while either is out, deliveries are answered 503
  // at no cost, and an ERROR line says so (the stack's outage alert).
  const outage = new OutageBreaker({ logger });
  const deps: HandlerDeps = {
    store: outage.store(adapters.store),
    reader: adapters.reader,
    analyzer: outage.analyzer(adapters.analyzer),
    outage,
    clock: systemClock,
    dedupKeyMode: config.dedupKeyMode,
    limits: { maxObjectBytes: config.maxObjectBytes, allowedContentTypes: config.allowedContentTypes },
    workerVersion: config.workerVersion,
    // A spent quota is waited out in line, inside the request (bounded), rather than nacked into
    // Pub/Sub's backoff; the line also bounds the documents held in memory at once.
    admission,
    ...(adapters.eInvoices ? { eInvoices: adapters.eInvoices } : {}),
    ...(adapters.memo && config.memo
      ? {
          memo: new AnalysisMemo(adapters.memo, {
            ttlMs: config.memo.ttlMs,
            logger,
            // A BigQuery job commits even after its instance died: the write's lease must outlive it.
            writesOutliveInstance: config.store.kind === 'bigquery',
          }),
        }
      : {}),
  };
  const { readiness, checked } = startupChecks(adapters.analyzer, logger);
  const app = createApp({
    ...deps,
    readiness,
    logger,
    pushBodyLimitBytes: config.pushBodyLimitBytes,
    projectId: config.projectId,
    authenticate: adapters.authenticate,
    deadlines,
  });
  const server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(config.port, (error?: Error) => (error ? reject(error) : resolve(s)));
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  logger.info(`docline worker listening on port ${port}`, {
    port,
    store: config.store.kind,
    reader: config.reader.kind,
    analyzer: config.analyzer.kind,
    dedupKeyMode: config.dedupKeyMode,
    workerVersion: config.workerVersion,
    memo: config.memo?.kind ?? 'off',
  });
  let stopping: Promise<void> | undefined;
  const stop = (graceMs = SHUTDOWN_GRACE_MS) => {
    stopping ??= (async () => {
      const workMs = Math.max(0, graceMs - ANSWER_MARGIN_MS);
      logger.info('shutting down: answering waiting deliveries, writing batched rows', {
        inFlight: deadlines.inFlight,
        graceMs,
      });
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      deadlines.drain(workMs);
      adapters.store.drain?.();
      server.closeIdleConnections();
      // Every delivery in flight is answered by its drained deadline; the timer is a backstop.
      let backstop: NodeJS.Timeout | undefined;
      await Promise.race([
        deadlines.idle(),
        new Promise<void>((resolve) => {
          backstop = setTimeout(resolve, workMs + ANSWER_MARGIN_MS / 2);
        }),
      ]);
      clearTimeout(backstop);
      server.closeAllConnections();
      await closed;
      await adapters.store.close?.();
      // The offline analyzer's OCR runs in a worker thread of its own.
      await (adapters.analyzer as Partial<{ close(): Promise<void> }>).close?.();
    })();
    return stopping;
  };
  return { server, port, admission, checked, stop };
}

/**
 * The checks made once at start-up, not per request: the analyzer's `ready()` (Gemini's asks for
 * the configured model, at no cost). A failure is a configuration fault: logged once at ERROR with
 * error `configuration` (the stack's dependency alert matches it) and the settings to change, and
 * `/healthz` answers 503 from then on, so Cloud Run never routes traffic to the revision.
 */
function startupChecks(
  analyzer: Analyzer,
  logger: Logger,
): { readiness: () => Readiness; checked: Promise<void> } {
  const ready = (analyzer as Partial<{ ready(): Promise<void> }>).ready;
  let state: Readiness = ready ? 'checking' : 'ready';
  const checked = ready
    ? ready.call(analyzer).then(
        () => {
          state = 'ready';
        },
        (error: unknown) => {
          state = error instanceof Error ? error : new Error(String(error));
          logger.error(`configuration fault: the worker is not ready: ${state.message}`, {
            error: 'configuration',
            code: (error as { code?: unknown }).code,
            settings: ['GEMINI_MODEL', 'docline:geminiModel'],
            cause: error,
          });
        },
      )
    : Promise.resolve();
  return { readiness: () => state, checked };
}

/** Starts the worker from the environment and stops it cleanly on SIGTERM/SIGINT. */
export async function main(env: NodeJS.ProcessEnv = process.env): Promise<RunningWorker> {
  const config = loadConfig(env);
  const logger = new JsonLogger({ level: config.logLevel });
  const starting = buildAdapters(config, logger).then((adapters) => serve(config, adapters, logger));
  // Installed before listening, so that a SIGTERM right after start-up still finishes cleanly.
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      logger.info(`${signal} received: finishing in-flight requests`);
      starting
        .then((worker) => worker.stop())
        .then(
          () => process.exit(0),
          (error: unknown) => {
            logger.error('shutdown failed', { error });
            process.exit(1);
          },
        );
    });
  }
  return starting;
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
