import { createHash } from 'node:crypto';
import { GeminiAnalyzer } from '../../worker/src/adapters/analyzers/gemini-analyzer';
import { En16931Reader } from '../../worker/src/adapters/e-invoice/en16931-reader';
import { BigQueryStore } from '../../worker/src/adapters/stores/bigquery-store';
import { loadConfig, type WorkerConfig } from '../../worker/src/config';
import {
  ANSWER_MARGIN_MS,
  DELIVERY_DEFAULTS,
  deliveryBudgetMs,
  retryHorizonSeconds,
  SHUTDOWN_GRACE_MS,
} from '../../worker/src/contract/settings';
import { RejectionError } from '../../worker/src/core/errors';
import { objectUri } from '../../worker/src/core/event';
import { AnalysisMemo } from '../../worker/src/core/memo';
import type { Analyzer, BatchStore, MemoStore, ObjectRef, Reader, Store } from '../../worker/src/core/ports';
import { type ProbeName, probeCounts, resetProbes } from '../../worker/src/core/probes';
import { serve, withGroupCommit } from '../../worker/src/main';
import {
  finalizeAttributes,
  type ObjectResource,
  reconcileNotification,
} from '../../worker/src/reconcile/notification';
import { silentLogger } from '../logger';
import { DOCUMENT_MARKER, type GeminiCall, GeminiClientModel } from '../models/gemini';
import { type StatementRecord, Warehouse } from '../models/warehouse';
import { PushSubscription } from '../pubsub';
import { seededRandom } from '../random';
import { eInvoiceSamples, pdfInvoices, textInvoices } from '../samples';
import { BigQueryClients } from './bigquery-client';
import { CloudRunModel, type RequestRecord } from './cloud-run';
import type { DatedCause } from './invariants';
import { MemoBucket } from './memo';
import type { Mutant, MutantContext } from './mutants';
import {
  DOCUMENT_FORMATS,
  type DocumentFormat,
  type DocumentKind,
  type DocumentPlan,
  FAULT_RATES,
  type FaultKind,
  FaultLog,
  type FaultSchedule,
  RUN_START_MS,
} from './schedule';
import { VirtualTime } from './virtual-time';

/**
 * One run of the fault simulator: the seed's documents uploaded within 20 simulated seconds (some
 * announced twice), pushed by the Pub/Sub model through the Cloud Run model to instances of the
 * real worker (its composition root's `serve()`, group commit, memo, quota gate, the real
 * GeminiAnalyzer), with the schedule's faults, until every message is acked or dead-lettered. It
 * returns the observable record: answers given, the raw table, what the view returned, Gemini's
 * bill, each request's handler activity, and the faults injected (kept apart for the trace).
 */

export const SIM_BUCKET = 'docline-sim-uploads';
const SIM_TABLE = 'docline-sim.docline.documents';

/** The documents the runs upload, read once per process (a soak runs hundreds of seeds in one). */
const SAMPLES = eInvoiceSamples().then((eInvoices) => ({
  text: textInvoices(),
  pdf: pdfInvoices(),
  ...eInvoices,
}));
/** Cloud Run's grace period between SIGTERM and SIGKILL. */
export const SIGTERM_GRACE_MS = 10_000;
const COLD_START_MS = 2_000;
/**
 * A run stops here (simulated) if messages are still pending: past the longest a message can live
 * (every delivery attempt at the request timeout, and the backoffs between them), plus the longest
 * outage a seed draws, so a message still pending then is stuck.
 */
function runBoundMs(settings: typeof DELIVERY_DEFAULTS, poisonMessages = 0): number {
  const attemptsMs = settings.maxDeliveryAttempts * settings.workerTimeoutSeconds * 1000;
  return (
    retryHorizonSeconds(settings) * 1000 +
    attemptsMs +
    FAULT_RATES.outageMs.max +
    poisonMessages * settings.maxDeliveryAttempts * POISON_PUSH_MS
  );
}

/**
 * What one more push of a poison message may cost the whole subscription once nothing else is left
 * to ack: its refusal (about a second) and the push backoff every nack brings (up to 60 s,
 * sim/pubsub.ts). Many poison messages (a fleet's, announced again by a reconcile) then go to the
 * dead letter one push a minute: the run's bound leaves them that time.
 */
const POISON_PUSH_MS = 61_000;

export interface SimDocument {
  name: string;
  key: string;
  kind: DocumentKind;
  /** How it was uploaded (unset: a text invoice). */
  format?: DocumentFormat;
  /** An e-invoice's number, as its XML states it: its row's, never one Gemini gave. */
  statedNumber?: string;
  messageIds: string[];
  /** When its generation was deleted or overwritten (it may then end `rejected` `object_gone`). */
  goneAtMs?: number;
}

/** Everything the invariants read: the simulated world's ground truth, never a claim of the worker. */
export interface RunRecord {
  seed: number;
  documents: SimDocument[];
  /** Every answer Pub/Sub got for each message, with when (0: none within the ack deadline, or connection lost). */
  answers: Record<string, Array<{ status: number; atMs: number }>>;
  /** What became of each message. */
  messageStates: Record<string, string>;
  /** The raw table at the end: one entry per row, with its identity and what it says. */
  rawRows: Array<{
    id: number;
    key: string;
    messageId: string;
    status: string;
    reason: string | null;
    /** The invoice number of the analysis it carries (each Gemini answer has its own). */
    invoiceNumber: string | null;
    processedAt: string;
    committedAtMs: number;
    statement: number;
  }>;
  /** Each distinct row (its identity) the `documents` view returned per key, in order of first sight. */
  viewReads: Record<string, number[]>;
  /** The view's row per key at the end (its identity). */
  viewAtEnd: Record<string, number>;
  /** Per document, the invoice numbers of the analyses Gemini answered for it. */
  geminiAnswers: Record<string, string[]>;
  /**
   * Paid analyses per document, from Gemini's bill (sim/models/gemini.ts: a paid call is a new
   * analysis unless it is the second attempt after an answer outside the schema), and the paid calls.
   */
  paidAnalysesByDocument: Record<string, number>;
  paidCallsByDocument: Record<string, number>;
  /**
   * Per document, each fault that lost a paid answer for the worker, in words: a paid call whose
   * answer reached no live process, an answer reaching an instance told to stop, a memo call that
   * failed to keep or give back the analysis or to show its holder, an instance killed before it
   * kept the analysis, each dated from when it began. Each allows one more paid analysis of that
   * document begun after it, and nothing else does.
   */
  answerLosses: Record<string, DatedCause[]>;
  /**
   * Per dedup key, when the memo bucket first held the key's kept analysis or its first lease (a
   * delivery that finds either asks the store before paying); absent: never.
   */
  memoWorkedOnSinceMs: Record<string, number>;
  /** Per dedup key, when the memo bucket first held its kept analysis (absent: never). */
  keptAtMs: Record<string, number>;
  /** Every Gemini call: which document and request, when, paid or not, and what became of its answer. */
  geminiCalls: GeminiCall[];
  requests: RequestRecord[];
  statements: StatementRecord[];
  /** Per key, the memo's lease calls that failed from the worker's view (when each began, and its kind). */
  leaseFailures: Record<string, DatedCause[]>;
  /**
   * The worker's own deadline, as configured: a delivery's budget from its request's arrival, and
   * the time left to work once its instance is told to stop (SIGTERM).
   */
  budget: { deliveryMs: number; drainMs: number; answerMarginMs?: number };
  /** How the run ended: drained, or stopped at the bound with messages pending. */
  end: string;
  simulatedMs: number;
}

export interface RunResult {
  record: RunRecord;
  faults: { counts: Record<FaultKind, number>; entries: FaultLog['entries'] };
  /** A digest of the whole record and fault log: two runs of one seed that agree have the same one. */
  traceHash: string;
  /** The worker's coverage probes this run reached (worker/src/core/probes.ts); not in the trace. */
  probes: Record<ProbeName, number>;
}

/** The environment the simulated instances are configured from (the real config parser reads it). */
export const SIM_ENV: Readonly<Record<string, string>> = Object.freeze({
  PORT: '0',
  BIGQUERY_TABLE: SIM_TABLE,
  MEMO_BUCKET: 'docline-sim-memo',
  DOCLINE_ANALYZER: 'gemini',
  GEMINI_API_KEY: 'simulated',
  DOCLINE_READER: 'gcs',
  LOG_LEVEL: 'ERROR',
  WORKER_VERSION: 'fault-sim',
});

/** One upload: its plan, its document and the object resource its notification carries. */
interface Upload {
  plan: DocumentPlan;
  doc: SimDocument;
  resource: ObjectResource;
}

/** The world of one run: its documents, the platform models around the real worker, what it records. */
interface World {
  schedule: FaultSchedule;
  mutant: Mutant | undefined;
  time: VirtualTime;
  faults: FaultLog;
  settings: typeof DELIVERY_DEFAULTS;
  config: WorkerConfig;
  configOf: (index: number) => WorkerConfig;
  model: string;
  documents: SimDocument[];
  objects: Map<string, Buffer>;
  resources: Upload[];
  overwrites: Array<Upload & { change: NonNullable<FaultSchedule['storage']>[number] }>;
  keyOfMessage: Map<string, string>;
  memoKeys: { get: (memoKey: string) => string | undefined };
  gemini: GeminiClientModel;
  warehouse: Warehouse;
  bucket: MemoBucket;
  bigqueryClients: BigQueryClients;
  cloudRun: CloudRunModel;
  viewReads: Map<string, number[]>;
  answers: RunRecord['answers'];
  subscription?: PushSubscription;
}

/** Runs one schedule. Only one run at a time per process (it takes the global timers and clock). */
export async function runSchedule(
  schedule: FaultSchedule,
  options: { mutant?: Mutant } = {},
): Promise<RunResult> {
  resetProbes();
  const w = await buildWorld(schedule, options.mutant);
  const realRandom = Math.random;
  Math.random = seededRandom(schedule.seed ^ 0x5eed);
  w.time.install();
  try {
    await startInstances(w);
    triggerFaults(w);
    const end = await deliver(w);
    return resultOf(w, end);
  } finally {
    w.subscription?.close();
    w.time.uninstall();
    Math.random = realRandom;
    for (const s of w.cloudRun.states()) w.cloudRun.instance(s.index).worker.server.close();
  }
}

/** The documents uploaded, and the platform models the instances will run on. */
async function buildWorld(schedule: FaultSchedule, mutant: Mutant | undefined): Promise<World> {
  const time = new VirtualTime(schedule.startsAtMs ?? RUN_START_MS);
  const faults = new FaultLog(() => time.nowMs());
  if (schedule.startsAtMs !== undefined)
    faults.injected(
      'clock.acrossMidnight',
      [],
      `the run starts at ${new Date(schedule.startsAtMs).toISOString()}: uploads and writes on both sides of midnight`,
    );
  const settings = DELIVERY_DEFAULTS;
  const config = loadConfig({ ...SIM_ENV, ...schedule.env });

  // The documents: sample invoices, each marked with its name so Gemini's model knows which it reads.
  const samples = await SAMPLES;
  const epochMs = time.epochNowMs();
  const objects = new Map<string, Buffer>();
  const documents: SimDocument[] = [];
  const keyOfName = new Map<string, string>();
  const kinds = new Map<string, { kind: DocumentKind; analysisMs: number; analysisBytes?: number }>();
  /**
   * One upload: the object's generation stored, and its document. `label` names the document (its
   * marker line, for Gemini's model): the object name, or the name with `#2` for a second upload of it.
   */
  const upload = (plan: DocumentPlan, label: string, generationNumber: number) => {
    const format = plan.format ?? 'text';
    const marker = `\n${DOCUMENT_MARKER}${label}\n`;
    const sample =
      format === 'text' || format === 'pdf'
        ? samples[format][plan.index % samples[format].length]!
        : samples[format];
    // After an XML's root, the marker is a comment (anything else there is not XML).
    const bytes = Buffer.concat([
      sample.bytes,
      Buffer.from(format === 'cii' || format === 'ubl' ? `<!--${marker}-->\n` : marker),
    ]);
    const generation = String(generationNumber);
    const created = new Date(epochMs + plan.publishAtMs).toISOString();
    const key = objectUri(SIM_BUCKET, plan.name, generation);
    objects.set(key, bytes);
    keyOfName.set(label, key);
    kinds.set(label, {
      kind: plan.kind,
      analysisMs: plan.analysisMs,
      ...(plan.analysisBytes ? { analysisBytes: plan.analysisBytes } : {}),
    });
    const doc: SimDocument = {
      name: label,
      key,
      kind: plan.kind,
      messageIds: [],
      ...(plan.format ? { format: plan.format } : {}),
      ...('invoiceNumber' in sample ? { statedNumber: sample.invoiceNumber } : {}),
    };
    documents.push(doc);
    return {
      plan,
      doc,
      resource: {
        kind: 'storage#object',
        name: plan.name,
        bucket: SIM_BUCKET,
        generation,
        metageneration: '1',
        contentType: DOCUMENT_FORMATS[format].contentType,
        size: String(bytes.length),
        timeCreated: created,
        updated: created,
      },
    };
  };
  const generationOf = (plan: DocumentPlan) => 1764489600000000 + schedule.seed * 1_000 + plan.index;
  const resources = schedule.documents.map((plan) => upload(plan, plan.name, generationOf(plan)));
  // A generation overwritten: the second upload (another generation, same name) is announced too.
  const overwrites = (schedule.storage ?? [])
    .filter((c) => c.change === 'overwritten')
    .map((c) => {
      const plan = schedule.documents.find((d) => d.index === c.document)!;
      const second: DocumentPlan = { ...plan, kind: 'invoice', notifications: 1, publishAtMs: c.atMs };
      return { change: c, ...upload(second, `${plan.name}#2`, generationOf(plan) + 500) };
    });
  // The message ids of each key.
  const keyOfMessage = new Map<string, string>();

  let cloudRunRef: CloudRunModel | undefined;
  const gemini = new GeminiClientModel(
    time,
    schedule.gemini,
    kinds,
    faults,
    (name) => keyOfName.get(name) ?? name,
    () => cloudRunRef?.current()?.id,
  );
  const model = config.analyzer.kind === 'gemini' ? config.analyzer.model : DELIVERY_DEFAULTS.geminiModel;
  // During a rollout, the spares run the new revision: another model, whose analyses share the memo.
  const rolloutConfig = schedule.rollout
    ? loadConfig({ ...SIM_ENV, ...schedule.env, GEMINI_MODEL: schedule.rollout.model })
    : undefined;
  const configOf = (index: number) => (rolloutConfig && index >= schedule.instances ? rolloutConfig : config);
  // A memo object is named after a hash of its dedup key (whatever its namespace): that hash ties
  // it to its document.
  const byHash = new Map(documents.map((d) => [createHash('sha256').update(d.key).digest('hex'), d.key]));
  const memoKeys = { get: (memoKey: string) => byHash.get(/[0-9a-f]{64}/.exec(memoKey)?.[0] ?? '') };
  const poison = new Set(documents.filter((d) => d.kind === 'poison').map((d) => d.key));
  const warehouse = new Warehouse(time, {
    table: 'docline-sim:docline.documents',
    faults: { schedule: schedule.bigquery, poisonKeys: poison, log: faults },
  });
  const bucket = new MemoBucket(
    time,
    schedule.memo,
    faults,
    (memoKey) => memoKeys.get(memoKey),
    (dedupKey) => warehouse.has(dedupKey),
    schedule.seed,
  );
  const bigqueryClients = new BigQueryClients(time, warehouse, SIM_TABLE, schedule.bigquery.inserts, faults);
  const cloudRun = new CloudRunModel(time, {
    // Cloud Run's request timeout is the one the worker is configured with (the stack sets both from one value).
    requestTimeoutMs: config.requestTimeoutSeconds * 1000,
    graceMs: SIGTERM_GRACE_MS,
    coldStartMs: COLD_START_MS,
    schedule: schedule.cloudRun,
    faults,
    keyOf: (id) => keyOfMessage.get(id) ?? id,
    ...(mutant?.answer ? { answerOf: mutant.answer } : {}),
  });
  cloudRunRef = cloudRun;

  const viewReads = new Map<string, number[]>();
  warehouse.onCommit = () => {
    for (const [key, row] of warehouse.view()) {
      const seen = viewReads.get(key) ?? [];
      if (!seen.includes(row.id)) seen.push(row.id);
      viewReads.set(key, seen);
    }
  };

  const answers: RunRecord['answers'] = {};
  return {
    schedule,
    mutant,
    time,
    faults,
    settings,
    config,
    configOf,
    model,
    documents,
    objects,
    resources,
    overwrites,
    keyOfMessage,
    memoKeys,
    gemini,
    warehouse,
    bucket,
    bigqueryClients,
    cloudRun,
    viewReads,
    answers,
  };
}

/** Each instance: the real worker on ports that the models answer, through the mutant when there is one. */
async function startInstances(w: World): Promise<void> {
  const reading = async (ref: ObjectRef): Promise<Buffer> => {
    await w.time.sleep(80);
    const bytes = w.objects.get(objectUri(ref.bucket, ref.name, ref.generation));
    if (!bytes) throw new RejectionError('object_gone', `no generation ${ref.generation} of ${ref.name}`);
    return bytes;
  };
  const context: MutantContext = {
    time: w.time,
    liveGeneration: (bucket, name) => {
      const prefix = objectUri(bucket, name, '');
      let live: string | undefined;
      for (const key of w.objects.keys())
        if (key.startsWith(prefix)) {
          const g = key.slice(prefix.length);
          if (live === undefined || BigInt(g) > BigInt(live)) live = g;
        }
      return live;
    },
    dedupKeyOf: (memoKey) => w.memoKeys.get(memoKey),
  };
  await w.cloudRun.start(
    async (index, ports) => {
      const alive = () => index >= w.cloudRun.states().length || w.cloudRun.instance(index).alive;
      const config = w.configOf(index);
      const below: BatchStore =
        w.schedule.bigquery.via === 'client'
          ? new BigQueryStore({
              bigquery: w.bigqueryClients.client(index, alive),
              table: SIM_TABLE,
              logger: silentLogger,
            })
          : w.warehouse.store(index, alive);
      const batching =
        w.mutant?.groupCommit && config.groupCommit
          ? { groupCommit: w.mutant.groupCommit(config.groupCommit) }
          : config;
      const grouped = mutate(w.mutant?.store, await withGroupCommit(below, batching, silentLogger), context);
      const store: Store = {
        seen: (...args: Parameters<Store['seen']>) => ports.track('store', () => grouped.seen(...args)),
        record: (...args: Parameters<Store['record']>) => ports.track('store', () => grouped.record(...args)),
        ping: () => grouped.ping(),
        close: () => grouped.close?.() ?? Promise.resolve(),
      };
      copyExtras(grouped, store);
      const reader = mutate(
        w.mutant?.reader,
        {
          read: (...args: Parameters<Reader['read']>) => ports.track('read', () => reading(args[0])),
        },
        context,
      );
      const adapter = new GeminiAnalyzer({
        client: w.gemini.client({ index, alive }),
        model: config.analyzer.kind === 'gemini' ? config.analyzer.model : undefined,
        timeoutMs: config.analyzer.kind === 'gemini' ? config.analyzer.timeoutMs : undefined,
        afterAnswerMs: config.analyzer.kind === 'gemini' ? config.analyzer.afterAnswerMs : undefined,
        logger: silentLogger,
      });
      const tracked: Analyzer = {
        analyze: (...args: Parameters<Analyzer['analyze']>) =>
          ports.track('analyze', () => adapter.analyze(...args)),
      };
      copyExtras(adapter, tracked);
      const analyzer = mutate(w.mutant?.analyzer, tracked, context);
      const memoStore = mutate(w.mutant?.memo, w.bucket.store(index), context);
      const memo: MemoStore = {
        get: (...args: Parameters<MemoStore['get']>) => ports.track('memo', () => memoStore.get(...args)),
        create: (...args: Parameters<MemoStore['create']>) => {
          const dedupKey = w.memoKeys.get(args[0]);
          // A killed process keeps nothing: the analysis it paid for is lost.
          if (!alive() && dedupKey)
            w.bucket.lost(dedupKey, `instance ${index} killed before it kept the analysis`);
          return ports.track('memo', () => memoStore.create(...args));
        },
        lease: (...args: Parameters<MemoStore['lease']>) =>
          ports.track('lease', () => memoStore.lease(...args)),
        renew: (...args: Parameters<MemoStore['renew']>) =>
          ports.track('lease', () => memoStore.renew(...args)),
      };
      // An optional call of the port the store may have (whether a key was ever leased): kept.
      const hasLease = (memoStore as { hasLease?: (key: string) => Promise<boolean> }).hasLease;
      if (hasLease)
        Object.assign(memo, {
          hasLease: (key: string) => ports.track('lease', () => hasLease.call(memoStore, key)),
        });
      // E-invoices are read by the worker's real EN 16931 reader (no validator: Saxon is not run here).
      const eInvoices = new En16931Reader();
      return serve(config, { store, reader, analyzer, memo, eInvoices }, silentLogger);
    },
    w.schedule.instances,
    w.schedule.cloudRun.signals.length + (w.schedule.rollout ? w.schedule.instances : 0),
  );
}

/** The faults that come at a time of their own: clock skew, a rollout, generations deleted or overwritten. */
function triggerFaults(w: World): void {
  const { schedule, time, faults, model, documents, objects, cloudRun } = w;
  // Clock skew: the worker's clock, in any code of an instance (a request, its SIGTERM handler,
  // the timers it set, its start-up), is off by its instance's skew.
  const skews = schedule.cloudRun.skewMs;
  if (skews) {
    time.bindTimer = (callback) => cloudRun.bindToCurrentInstance(callback);
    time.skewMs = () => {
      const instance = cloudRun.currentInstance();
      return instance === undefined ? 0 : (skews[instance] ?? 0);
    };
    for (const [i, ms] of Object.entries(skews))
      if (ms !== 0 && Number(i) < cloudRun.states().length)
        faults.injected('cloudRun.clockSkew', [], `instance ${i}: clock off by ${ms} ms`);
  }
  // A rollout: each old instance told to stop in turn; a spare of the new revision takes its slot.
  for (const atMs of schedule.rollout?.stopsAtMs ?? []) {
    time.after(atMs, () => {
      const old = cloudRun.states().find((x) => x.index < schedule.instances && x.serving && x.alive);
      if (!old) return;
      faults.injected(
        'rollout.analyzerVersion',
        [],
        `instance ${old.index} (model ${model}) replaced by the new revision (${schedule.rollout!.model})`,
      );
      cloudRun.signal(old.index, 'SIGTERM');
    });
  }
  // A generation deleted, or overwritten by a new upload, before (or after) it is read.
  for (const c of schedule.storage ?? []) {
    const plan = schedule.documents.find((d) => d.index === c.document);
    const doc = plan && documents.find((d) => d.name === plan.name);
    if (!doc) continue;
    time.after(c.atMs, () => {
      objects.delete(doc.key);
      doc.goneAtMs = time.nowMs();
      faults.injected(
        c.change === 'gone' ? 'storage.generationGone' : 'storage.generationOverwritten',
        [doc.key],
        c.change === 'gone' ? 'the generation was deleted' : 'a new upload replaced the generation',
      );
    });
  }
}

/**
 * The uploads announced through the push subscription, an operator's reconcile and replay, and the
 * run until it settles; how it ended.
 */
async function deliver(w: World): Promise<string> {
  let pushes = 0;
  let acks = 0;
  const sub = new PushSubscription({
    time: w.time,
    settings: w.settings,
    subscription: 'projects/docline-sim/subscriptions/docline-push',
    ...(w.schedule.pubsub.initialWindow ? { initialWindow: w.schedule.pubsub.initialWindow } : {}),
    onAnswer: (id, status) => {
      w.answers[id] = [...(w.answers[id] ?? []), { status, atMs: w.time.nowMs() }];
      if (![102, 200, 201, 202, 204].includes(status)) return;
      const ack = acks++;
      for (const a of (w.schedule.pubsub.afterAck ?? []).filter((x) => x.ack === ack)) {
        w.time.after(a.afterMs, () => {
          if (sub.redeliverAcked(id))
            w.faults.injected(
              'pubsub.redeliveryAfterAck',
              [w.keyOfMessage.get(id) ?? id],
              `message ${id} pushed again ${a.afterMs} ms after its ack`,
            );
        });
      }
    },
    endpoint: (body) => {
      const id = (JSON.parse(body) as { message: { messageId: string } }).message.messageId;
      const push = pushes++;
      for (const r of w.schedule.pubsub.redeliveries.filter((x) => x.push === push)) {
        w.time.after(r.afterMs, () => {
          if (sub.redeliver(id))
            w.faults.injected(
              'pubsub.redeliveryWhileRunning',
              [w.keyOfMessage.get(id) ?? id],
              `push ${push} pushed again while running`,
            );
        });
      }
      return w.cloudRun.push(body, id);
    },
  });
  w.subscription = sub;
  let published = 0;
  for (const { plan, doc, resource } of [...w.resources, ...w.overwrites]) {
    w.time.after(plan.publishAtMs, () => {
      if (plan.notifications === 2)
        w.faults.injected('pubsub.doubledNotification', [doc.key], 'two notification configs');
      for (let c = 1; c <= plan.notifications; c++) {
        const id = sub.publish(
          JSON.stringify(resource),
          finalizeAttributes(resource, {
            notificationConfig: `projects/_/buckets/${SIM_BUCKET}/notificationConfigs/${c}`,
          }),
        );
        w.keyOfMessage.set(id, doc.key);
        doc.messageIds.push(id);
      }
      published++;
    });
  }
  // A message published by an operator belongs to the document of its object's key.
  const announced = (id: string, key: string) => {
    w.keyOfMessage.set(id, key);
    w.documents.find((d) => d.key === key)?.messageIds.push(id);
  };
  // `npm run reconcile -- --apply`: every object in the bucket older than the cutoff whose key has
  // no row yet is announced again (the reconcile notification), whatever is still at work on it.
  const reconciles = w.schedule.operator?.reconcileAtMs ?? [];
  let reconciled = 0;
  for (const atMs of reconciles)
    w.time.after(atMs, () => {
      reconciled++;
      const cutoffMs = w.time.nowMs() - (w.schedule.operator?.olderThanMs ?? 0);
      const written = new Set(w.warehouse.raw.map((r) => r.row.dedup_key));
      const missing = [...w.resources, ...w.overwrites].filter(
        ({ plan, doc }) => plan.publishAtMs <= cutoffMs && w.objects.has(doc.key) && !written.has(doc.key),
      );
      if (missing.length === 0) return;
      w.faults.injected(
        'operator.reconcileApply',
        missing.map((m) => m.doc.key),
        `reconcile --apply announced ${missing.length} object(s) with no row again`,
      );
      const runAt = w.time.clock.now();
      for (const { doc, resource } of missing) {
        const message = reconcileNotification(resource, runAt);
        announced(sub.publish(message.data.toString(), message.attributes), doc.key);
      }
    });
  const settledAll = () =>
    published === w.resources.length + w.overwrites.length && reconciled === reconciles.length && sub.idle;
  // Every poison upload's notifications, and a reconcile's announcement of each.
  const poisonMessages = [...w.resources, ...w.overwrites]
    .filter(({ plan }) => plan.kind === 'poison')
    .reduce((n, { plan }) => n + plan.notifications + reconciles.length, 0);
  let ended = await w.time.run(settledAll, runBoundMs(w.settings, poisonMessages));
  // In the aftermath: `npm run dlq -- replay` publishes every dead letter again (its data and
  // attributes, less the dead-letter ones), and the run goes on until those settle too.
  const letters = ended === 'done' && w.schedule.operator?.replayDeadLetters ? sub.takeDeadLetters() : [];
  if (letters.length > 0) {
    w.faults.injected(
      'operator.deadLetterReplay',
      [...new Set(letters.map((l) => w.keyOfMessage.get(l.id) ?? l.id))],
      `${letters.length} dead letter(s) replayed to the topic`,
    );
    for (const l of letters) {
      const attributes = Object.fromEntries(
        Object.entries(l.attributes).filter(([k]) => !k.startsWith('CloudPubSubDeadLetter')),
      );
      announced(sub.publish(l.data, attributes), w.keyOfMessage.get(l.id) ?? l.id);
    }
    ended = await w.time.run(settledAll, w.time.nowMs() + runBoundMs(w.settings, letters.length));
  }
  // Late work (handlers past their request, slow statements) may still change the table: let it
  // end. A request that arrived late in that window (a push of an acked message again) is given
  // its whole deadline, so that the record never ends on a handler cut short by the run's end.
  const lateMs = 2 * w.config.requestTimeoutSeconds * 1000;
  let settled = await w.time.run(() => false, w.time.nowMs() + lateMs);
  for (let extensions = 0; settled !== 'stalled' && extensions < 5; extensions++) {
    const open = w.cloudRun.requests.filter(
      (r) => r.endMs === undefined && r.killedAtMs === undefined && r.deadlineMs >= w.time.nowMs(),
    );
    if (open.length === 0) break;
    settled = await w.time.run(() => false, Math.max(...open.map((r) => r.deadlineMs)) + lateMs);
  }
  return ended === 'done'
    ? `drained (${settled === 'stalled' ? 'then quiet' : 'late work still pending'})`
    : ended;
}

/** What the run recorded, and its digest. */
function resultOf(w: World, end: string): RunResult {
  const record: RunRecord = {
    seed: w.schedule.seed,
    documents: w.documents,
    answers: w.answers,
    messageStates: Object.fromEntries(w.subscription!.states()),
    rawRows: w.warehouse.raw.map((r) => ({
      id: r.id,
      key: r.row.dedup_key,
      messageId: r.row.message_id,
      status: r.row.status,
      reason: r.row.reason,
      invoiceNumber: invoiceNumberOf(r.row.analysis),
      processedAt: r.row.processed_at,
      committedAtMs: r.committedAtMs,
      statement: r.statement,
    })),
    viewReads: Object.fromEntries(w.viewReads),
    viewAtEnd: Object.fromEntries([...w.warehouse.view()].map(([k, r]) => [k, r.id])),
    geminiAnswers: Object.fromEntries(
      w.documents.map((d) => [d.name, w.gemini.record.answersByDocument.get(d.name) ?? []]),
    ),
    paidAnalysesByDocument: Object.fromEntries(
      w.documents.map((d) => [d.name, w.gemini.record.analysesByDocument.get(d.name) ?? 0]),
    ),
    paidCallsByDocument: Object.fromEntries(
      w.documents.map((d) => [d.name, w.gemini.record.paidByDocument.get(d.name) ?? 0]),
    ),
    answerLosses: Object.fromEntries(
      w.documents.map((d) => [d.name, answerLosses(d, w.gemini.record.calls, w.cloudRun, w.bucket)]),
    ),
    keptAtMs: Object.fromEntries([...w.bucket.kept].reverse().map((k) => [k.dedupKey, k.atMs] as const)),
    memoWorkedOnSinceMs: Object.fromEntries(
      w.documents.flatMap((d) => {
        const since = w.bucket.workedOnSince({
          analysis: AnalysisMemo.key(d.key),
          lease: AnalysisMemo.leaseKey(d.key),
        });
        return since === undefined ? [] : [[d.key, since]];
      }),
    ),
    geminiCalls: w.gemini.record.calls,
    requests: w.cloudRun.requests,
    statements: w.warehouse.statements,
    leaseFailures: Object.fromEntries(w.bucket.leaseFailures),
    budget: {
      deliveryMs: deliveryBudgetMs({ workerTimeoutSeconds: w.config.requestTimeoutSeconds }),
      drainMs: Math.max(0, SHUTDOWN_GRACE_MS - ANSWER_MARGIN_MS),
      // Cloud Run's own deadline is the worker's plus this (its request timeout; SIGTERM + grace).
      answerMarginMs: ANSWER_MARGIN_MS,
    },
    end,
    simulatedMs: w.time.nowMs(),
  };
  const result = { record, faults: { counts: w.faults.counts, entries: w.faults.entries } };
  return {
    ...result,
    traceHash: createHash('sha256').update(JSON.stringify(result)).digest('hex').slice(0, 16),
    probes: probeCounts(),
  };
}

/**
 * The faults that lost a paid answer of document `d` for the worker (see RunRecord.answerLosses),
 * from Gemini's bill, the instances' lives and the memo bucket.
 */
function answerLosses(
  d: SimDocument,
  calls: readonly GeminiCall[],
  cloudRun: CloudRunModel,
  bucket: MemoBucket,
): DatedCause[] {
  const losses: DatedCause[] = [];
  for (const c of calls.filter((x) => x.document === d.name && x.paid)) {
    const life = cloudRun.lifecycle.get(c.instance) ?? {};
    if (c.outcome === 'lost') {
      // Its process went while the call ran: dated from the call's start, the earliest it can be.
      losses.push({
        atMs: c.startMs,
        what: `Gemini call ${c.index} was paid and its answer reached no live process`,
      });
      continue;
    }
    const end = c.endMs ?? Number.POSITIVE_INFINITY;
    if (life.sigtermAtMs !== undefined && life.sigtermAtMs >= c.startMs && life.sigtermAtMs <= end) {
      losses.push({
        atMs: life.sigtermAtMs,
        what: `instance ${c.instance} was told to stop while Gemini call ${c.index} ran`,
      });
      continue;
    }
    const killedAt = life.killedAtMs;
    if (
      killedAt !== undefined &&
      !bucket.kept.some((k) => k.dedupKey === d.key && k.instance === c.instance && k.atMs <= killedAt)
    )
      losses.push({
        atMs: killedAt,
        what: `instance ${c.instance} was killed before it kept the answer of Gemini call ${c.index}`,
      });
  }
  return [...losses, ...(bucket.losses.get(d.key) ?? [])];
}

function invoiceNumberOf(analysis: unknown): string | null {
  const n = (analysis as { invoice_number?: unknown } | null)?.invoice_number;
  return typeof n === 'string' ? n : null;
}

/** A port as the mutant (if any) changes it. */
function mutate<T>(
  change: ((port: T, context: MutantContext) => T) | undefined,
  port: T,
  context: MutantContext,
): T {
  return change ? change(port, context) : port;
}

/** Keeps any extra method a wrapped adapter has (e.g. a drain the composition root calls). */
function copyExtras(from: object, to: object): void {
  let proto = Object.getPrototypeOf(from) as object | null;
  while (proto && proto !== Object.prototype) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name === 'constructor' || name in to) continue;
      const value = (from as Record<string, unknown>)[name];
      if (typeof value === 'function') (to as Record<string, unknown>)[name] = value.bind(from);
    }
    proto = Object.getPrototypeOf(proto) as object | null;
  }
}
