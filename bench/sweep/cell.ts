import { CloudRunModel } from '../../sim/faults/cloud-run';
import { SIM_ENV } from '../../sim/faults/run';
import { FaultLog } from '../../sim/faults/schedule';
import { VirtualTime } from '../../sim/faults/virtual-time';
import { silentLogger } from '../../sim/logger';
import { SimBucketStore } from '../../sim/models/cloud-storage';
import {
  GeminiPortModel,
  geminiCallUsd,
  type QuotaModel,
  SharedCapacity,
  SpendWindow,
  sweepLatencies,
  type TierLimits,
  TierQuota,
  tokensOf,
} from '../../sim/models/gemini';
import { GEMINI_LATENCIES, latencyFrom, mergeLatency, uniformLatency } from '../../sim/models/latency';
import { PUSH_WINDOW_MODELS } from '../../sim/models/push-window';
import { Warehouse } from '../../sim/models/warehouse';
import { PushSubscription } from '../../sim/pubsub';
import { seededRandom } from '../../sim/random';
import { textInvoices } from '../../sim/samples';
import type { SimClock } from '../../sim/time';
import { GcsMemoStore } from '../../worker/src/adapters/memo-stores/gcs-memo-store';
import { loadConfig } from '../../worker/src/config';
import { onDemandUsd } from '../../worker/src/contract/cost-model';
import { GEMINI_API_TIERS } from '../../worker/src/contract/gemini-tiers';
import { DELIVERY_DEFAULTS, SETTINGS } from '../../worker/src/contract/settings';
import { RejectionError } from '../../worker/src/core/errors';
import { objectUri } from '../../worker/src/core/event';
import type { BatchStore, ObjectRef, Store } from '../../worker/src/core/ports';
import { serve, withGroupCommit } from '../../worker/src/main';
import { finalizeAttributes, type ObjectResource } from '../../worker/src/reconcile/notification';
import {
  announceMissing,
  type ComparisonQuery,
  comparisonLeastBytes,
  findMissing,
  type LineIndex,
  type ObjectLister,
} from '../../worker/src/reconcile/reconcile';

/**
 * One cell of the sweep: a backlog of documents, published either as uploads (Cloud Storage
 * notifications, 5 % announced twice) or by reconcile `--apply` (its real `findMissing` and
 * `announceMissing` on a simulated bucket listing, table and topic), pushed by the Pub/Sub model
 * under one window model, to one consumer:
 *
 * - `docline`: the real worker as its composition root serves it (`serve()`, group commit, the
 *   quota gate, the memo through the real `GcsMemoStore`), on instances that Cloud Run's autoscaler
 *   adds and removes (`CloudRunModel` with `autoscale`: from `minInstances` up to `maxInstances`,
 *   an instance per 60 % of `concurrency` open requests, a 2 s cold start, idle instances shut down
 *   after 15 minutes, requests routed to fill instances; a request waits at most 10 s for a slot,
 *   then 429), on the sweep's warehouse (pre-filled table, DML limits, bytes billed) and Gemini
 *   model;
 * - `oracle`: the ideal consumer in the same simulator, with the same schedule, window model and
 *   Gemini model: it knows the quota exactly (it calls Gemini only when the call will be accepted),
 *   analyses each document once, and never holds a push longer than the quota makes it wait nor
 *   refuses one. Its drain time is the bound docline's is compared with.
 *
 * Everything runs in virtual time (sim/faults/virtual-time.ts): simulated time advances only when
 * nothing can run, so a cell of many simulated hours takes seconds, and a seed replays exactly.
 */

export type AnalyzerModelName = 'tiers' | 'shared';
export type LatencyName = keyof typeof GEMINI_LATENCIES;
export type WindowName = keyof typeof PUSH_WINDOW_MODELS;
export type BacklogKind = 'upload' | 'backfill';

export interface CellSpec {
  analyzer: AnalyzerModelName;
  /** Requests per minute: the tier's RPM, or the shared capacity's average share. */
  quota: number;
  latency: LatencyName;
  window: WindowName;
  documents: number;
  backlog: BacklogKind;
  seed: number;
  /** A steady flow instead of a backlog (the growth stage): uploads at a rate into an aged table. */
  flow?: SteadyFlow;
  /** A MERGE's wall time, uniform, for docline and the oracle alike (default: the cost model's). */
  mergeSeconds?: { low: number; high: number };
  /** The tier model counts refused calls against its windows (Google does not say a 429 is free). */
  refusedCount?: boolean;
  /**
   * The Gemini API tier (worker/src/contract/gemini-tiers.ts, by name) whose spend-based rate limit,
   * USD per rolling 10 minutes, stands in front of the tier's windows (sim/models/gemini.ts, `SpendWindow`).
   */
  spendTier?: string;
}

/**
 * A steady flow of uploads (the growth stage): `documentsPerDay` evenly spaced for `durationMs`,
 * into a table pre-filled to `tableAgeDays` at the same rate, with the settings the stack derives
 * for that volume and, optionally, a Gemini tier with a daily limit.
 */
export interface SteadyFlow {
  documentsPerDay: number;
  tableAgeDays: number;
  durationMs: number;
  /** What the stack derives for the volume (infra/config.ts: parseStackConfig with documentsPerDay). */
  stack: {
    maximumBytesBilled: number;
    mergeMinIntervalMs: number;
    maxInstances: number;
    concurrency: number;
  };
  tier?: TierLimits;
  /** The simulated wall-clock time the flow starts at, epoch ms (default: the simulator's 08:00 UTC). */
  startAtMs?: number;
}

export function cellName(c: Omit<CellSpec, 'seed'>): string {
  return (
    `${c.analyzer}-${c.quota}rpm-${c.latency}-${c.window}-${c.documents}${c.backlog === 'backfill' ? '-backfill' : ''}` +
    `${c.mergeSeconds ? `-merge${c.mergeSeconds.low}to${c.mergeSeconds.high}s` : ''}${c.refusedCount ? '-refusedCount' : ''}` +
    `${c.spendTier ? `-${c.spendTier.replace(/\s+/g, '').toLowerCase()}spend` : ''}`
  );
}

export interface ConsumerFigures {
  /** Simulated ms from the first publish until every message is acked or dead-lettered (or the bound). */
  drainMs: number;
  /** The same, from the last publish. */
  drainFromLastMs: number;
  drained: boolean;
  paidAnalyses: number;
  /** Gemini's price of the paid analyses (their input tokens, 400 output tokens each). */
  geminiUsd: number;
  refused429: number;
  deadLetters: number;
  lost: number;
  viewRows: number;
  extraRawRows: number;
  billedBytes: number;
  /** Lookups and MERGEs that ran (refused statements not counted). */
  lookups: number;
  merges: number;
  pushes: number;
  nacks: number;
  maxOutstanding: number;
  memoClassA: number;
  memoClassB: number;
  memoRefusedObjectRate: number;
  refusedBytesBilled: number;
  maxEstimateBytes: number;
  refusedDml: number;
  cloudRunNoSlot429: number;
  /** Instances that ever served (cold starts included), and the most serving at once. */
  instancesStarted: number;
  maxInstancesServing: number;
  wallSeconds: number;
  /** Seconds from each document's first publish to its row (documents published by the run). */
  secondsToRow: number[];
}

export interface ReconcileFigures {
  listed: number;
  missing: number;
  listCalls: number;
  listSeconds: number;
  queryBytesBilled: number;
  queryUsd: number;
  publishCalls: number;
  publishSeconds: number;
}

const BUCKET = 'acme-invoices-sweep';
/** Objects per listing page (the JSON API's maximum). */
const LIST_PAGE = 1_000;
/** A docline instance's cold start in the sweep (simulated). */
const COLD_START_MS = 2_000;
/** Cloud Run keeps an idle instance at most this long (its documented 15 minutes). */
const IDLE_MS = 15 * 60_000;
/** Cloud Run's default utilization target for concurrency (and CPU). */
const TARGET_UTILIZATION = 0.6;
/** A run stops here (simulated) if messages are still pending: Pub/Sub's default retention, 7 days. */
export const CELL_BOUND_MS = 7 * 86_400_000;

interface Document {
  key: string;
  resource: ObjectResource & Record<string, unknown>;
  bytes: Buffer;
  copies: number;
}

function documentsOf(spec: CellSpec, epochMs: number): Document[] {
  const samples = textInvoices();
  const docs: Document[] = [];
  for (let i = 0; i < spec.documents; i++) {
    const sample = samples[i % samples.length]!;
    const name = `sweep/${String(i).padStart(6, '0')}-${sample.name}`;
    const generation = String(1764489600000000 + i);
    // A backfill's objects are old (days): reconcile's --older-than leaves them to it.
    // A steady flow's objects are created when they are uploaded (their event time, hence key day).
    const createdMs = spec.flow
      ? epochMs + i * flowGapMs(spec.flow)
      : epochMs - (spec.backlog === 'backfill' ? 2 * 86_400_000 - i : 0);
    const created = new Date(createdMs).toISOString();
    docs.push({
      key: objectUri(BUCKET, name, generation),
      bytes: sample.bytes,
      copies: spec.backlog === 'upload' && i % 20 === 0 ? 2 : 1,
      resource: {
        kind: 'storage#object',
        name,
        bucket: BUCKET,
        generation,
        metageneration: '1',
        contentType: 'text/plain',
        size: String(sample.bytes.length),
        timeCreated: created,
        updated: created,
      },
    });
  }
  return docs;
}

/** Simulated ms between two uploads of a steady flow. */
export function flowGapMs(flow: SteadyFlow): number {
  return 86_400_000 / flow.documentsPerDay;
}

function quotaModel(spec: CellSpec, time: SimClock): QuotaModel {
  if (spec.flow?.tier) return new TierQuota(time, spec.flow.tier);
  const windows = windowsModel(spec, time);
  if (spec.spendTier === undefined) return windows;
  const tier = GEMINI_API_TIERS.find((t) => t.name === spec.spendTier);
  if (!tier || spec.analyzer !== 'tiers')
    throw new Error(`no Gemini API tier named ${spec.spendTier} for a ${spec.analyzer} cell`);
  return new SpendWindow(time, windows, tier.spendUsdPer10Minutes);
}

function windowsModel(spec: CellSpec, time: SimClock): QuotaModel {
  return spec.analyzer === 'tiers'
    ? // The tier's input-token limit sits just under RPM × the mean document: it binds now and then.
      new TierQuota(time, {
        requestsPerMinute: spec.quota,
        tokensPerMinute: spec.quota * 1_700,
        countsRefused: spec.refusedCount ?? false,
      })
    : new SharedCapacity(time, {
        requestsPerMinute: spec.quota,
        seed: spec.seed * 7 + 3,
        horizonMs: CELL_BOUND_MS,
      });
}

/**
 * Publishes the backlog: uploads evenly within 60 s, or a reconcile `--apply` run (listing, the
 * table query, then batches of 100 published). Returns reconcile's figures for a backfill.
 */
async function publishBacklog(
  spec: CellSpec,
  time: VirtualTime,
  docs: Document[],
  subscription: PushSubscription,
  warehouse: Warehouse,
  onPublished: () => void,
  publishedAtMs: Map<string, number> = new Map(),
): Promise<ReconcileFigures | undefined> {
  if (spec.backlog === 'upload') {
    let published = 0;
    for (let i = 0; i < docs.length; i++) {
      const d = docs[i]!;
      const atMs = spec.flow ? i * flowGapMs(spec.flow) : (i * 60_000) / docs.length;
      time.after(atMs, () => {
        publishedAtMs.set(d.key, time.nowMs());
        for (let c = 1; c <= d.copies; c++) {
          subscription.publish(
            JSON.stringify(d.resource),
            finalizeAttributes(d.resource, {
              notificationConfig: `projects/_/buckets/${BUCKET}/notificationConfigs/${c}`,
            }),
          );
        }
        if (++published === docs.length) onPublished();
      });
    }
    return undefined;
  }
  const callLatency = (name: string, medianMs: number, seed: number) =>
    latencyFrom({ name, medianMs, sigma: 0.3, tailShare: 0, tailFactor: 3 }, seed);
  const listLatency = callLatency('list', 150, spec.seed + 11);
  const publishLatency = callLatency('publish', 40, spec.seed + 12);
  const figures: ReconcileFigures = {
    listed: 0,
    missing: 0,
    listCalls: 0,
    listSeconds: 0,
    queryBytesBilled: 0,
    queryUsd: 0,
    publishCalls: 0,
    publishSeconds: 0,
  };
  const lister: ObjectLister = {
    bucket: BUCKET,
    async *pages() {
      for (let i = 0; i < docs.length; i += LIST_PAGE) {
        const started = time.nowMs();
        await time.sleep(listLatency());
        figures.listCalls++;
        figures.listSeconds += (time.nowMs() - started) / 1000;
        yield docs.slice(i, i + LIST_PAGE).map((d) => d.resource);
      }
    },
  };
  const bytesPerRow = comparisonLeastBytes(docs.slice(0, 1).map((d) => d.resource));
  const index: LineIndex = {
    async objectUris(query) {
      const bytes = comparisonBilledBytes(warehouse, query, bytesPerRow);
      figures.queryBytesBilled += bytes;
      figures.queryUsd += onDemandUsd(bytes);
      await time.sleep(2_000);
      return new Set(docs.filter((d) => warehouse.has(d.key)).map((d) => d.key));
    },
  };
  const report = await findMissing(
    { prefix: '', olderThanMs: 60 * 60 * 1000 },
    { lister, index, clock: time.clock },
  );
  figures.listed = report.listed;
  figures.missing = report.missing;
  const started = time.nowMs();
  await announceMissing(report, {
    clock: time.clock,
    publisher: {
      async publish(messages) {
        await time.sleep(publishLatency());
        figures.publishCalls++;
        return messages.map((m) => subscription.publish(m.data.toString('utf8'), m.attributes));
      },
    },
  });
  figures.publishSeconds = (time.nowMs() - started) / 1000;
  onPublished();
  return figures;
}

/**
 * What one statement of reconcile's comparison bills in the sweep's warehouse: every row of its key
 * days, from its `since`'s (the oldest object's creation, for the first) to before `until`'s, at the
 * bytes of its columns (`bytesPerRow`: object_uri, bucket, object_name, key_day), at least 10 MiB.
 * Not a lookup's last 6 hours: a backfill's objects may go back months.
 */
export function comparisonBilledBytes(
  warehouse: Pick<Warehouse, 'rowsBetween'>,
  query: ComparisonQuery,
  bytesPerRow: number,
): number {
  const day = (d: Date) => d.toISOString().slice(0, 10);
  const rows = warehouse.rowsBetween(day(query.since), query.until && day(query.until));
  return Math.max(10 * 1024 * 1024, rows * bytesPerRow);
}

/** The oracle's write latency draws from its own seed, so docline's warehouse draws stay the same. */
const ORACLE_WRITE_SEED = 17;

/**
 * The oracle's way to the quota: calls wait in arrival order, and each starts exactly when the model
 * will accept it (`nextAcceptMs`). One timer for the queue's head, where a timer per waiting call
 * would wake them all at each opening (quadratic in a backlog of thousands).
 */
class QuotaQueue {
  private readonly waiting: Array<{ name: string; start: (accepted: Promise<boolean>) => void }> = [];
  private pumping = false;

  constructor(
    private readonly time: SimClock,
    private readonly gemini: GeminiPortModel,
  ) {}

  /** Resolves true once analysed, false after a refusal the model could not foresee. */
  call(name: string): Promise<boolean> {
    return new Promise<Promise<boolean>>((start) => {
      this.waiting.push({ name, start });
      if (!this.pumping) void this.pump();
    }).then((accepted) => accepted);
  }

  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      for (let head = this.waiting[0]; head; head = this.waiting[0]) {
        const at = this.gemini.quota.nextAcceptMs(tokensOf(head.name));
        if (at > this.time.nowMs()) {
          await this.time.sleep(at - this.time.nowMs());
          continue;
        }
        this.waiting.shift();
        // The call takes its quota synchronously, before the next head asks when it may start.
        head.start(this.gemini.call(head.name));
      }
    } finally {
      this.pumping = false;
    }
  }
}

/**
 * Who consumes a cell: docline as it is served; `perDelivery`, the seed's design that the burst
 * stage measures docline against (the same worker, but each delivery's lookup and MERGE a statement
 * of its own, sent at once, and no memo); or the ideal `oracle`.
 */
export type ConsumerName = 'docline' | 'perDelivery' | 'oracle';

/** The seed's write path: the store's batched statements, each carrying one key or one row. */
export function statementPerDelivery(store: BatchStore): Store {
  return {
    seen: async (key, deadline) => (await store.seenMany([key], deadline)).has(key),
    record: async (row, deadline) => (await store.recordMany([row], deadline)).has(row.dedup_key),
    ping: () => store.ping(),
  };
}

/** Runs one consumer on one cell. Only one run at a time per process (it takes the global timers). */
export async function runConsumer(
  spec: CellSpec,
  consumer: ConsumerName,
): Promise<{ figures: ConsumerFigures; reconcile?: ReconcileFigures }> {
  const wallStart = process.hrtime.bigint();
  const time = new VirtualTime(spec.flow?.startAtMs);
  const docs = documentsOf(spec, time.epochNowMs());
  const byKey = new Map(docs.map((d) => [d.key, d]));
  const gemini = new GeminiPortModel(
    time,
    quotaModel(spec, time),
    sweepLatencies(GEMINI_LATENCIES[spec.latency], spec.seed),
  );
  const settings = DELIVERY_DEFAULTS;
  const { flow, mergeSeconds } = spec;
  const warehouse = new Warehouse(time, {
    table: 'docline-sweep:docline.documents',
    published: {
      seed: spec.seed + 5,
      redeliveryWindowDays: settings.redeliveryWindowDays,
      maximumBytesBilled: flow?.stack.maximumBytesBilled ?? settings.maximumBytesBilled,
      ...(flow
        ? {
            documentsPerDay: flow.documentsPerDay,
            prefilledDays: flow.tableAgeDays,
          }
        : {}),
      ...(mergeSeconds
        ? { mergeLatency: uniformLatency(mergeSeconds.low * 1000, mergeSeconds.high * 1000, spec.seed + 5) }
        : {}),
    },
  });
  const flowEnv: Record<string, string> = flow
    ? {
        MAXIMUM_BYTES_BILLED: String(flow.stack.maximumBytesBilled),
        MERGE_MIN_INTERVAL_MS: String(flow.stack.mergeMinIntervalMs),
      }
    : {};
  const publishedAtMs = new Map<string, number>();
  const memoBucket = new SimBucketStore(time, spec.seed + 9);
  const readLatency = latencyFrom(
    { name: 'read', medianMs: 50, sigma: 0.3, tailShare: 0.01, tailFactor: 10 },
    spec.seed + 13,
  );
  const realRandom = Math.random;
  Math.random = seededRandom(spec.seed ^ 0x5eed);
  time.install();
  let subscription: PushSubscription | undefined;
  const closers: Array<() => void> = [];
  try {
    let endpoint: (body: string, id: string) => Promise<number>;
    const oracleDone = new Set<string>();
    let cloudRunModel: CloudRunModel | undefined;
    if (consumer !== 'oracle') {
      const config = loadConfig({ ...SIM_ENV, WORKER_VERSION: 'sweep', ...flowEnv });
      const cloudRun = new CloudRunModel(time, {
        requestTimeoutMs: config.requestTimeoutSeconds * 1000,
        graceMs: 10_000,
        coldStartMs: COLD_START_MS,
        schedule: { stalls: [], signals: [] },
        faults: new FaultLog(() => time.nowMs()),
        keyOf: (id) => id,
        autoscale: {
          minInstances: SETTINGS.minInstances.default,
          maxInstances: flow?.stack.maxInstances ?? SETTINGS.maxInstances.default,
          concurrency: flow?.stack.concurrency ?? SETTINGS.concurrency.default,
          targetUtilization: TARGET_UTILIZATION,
          idleMs: IDLE_MS,
        },
      });
      cloudRunModel = cloudRun;
      const memoStore = new GcsMemoStore({ storage: memoBucket.storage(), bucket: 'docline-sweep-memo' });
      const seedDesign = consumer === 'perDelivery';
      const factory = async () =>
        serve(
          config,
          {
            store: seedDesign
              ? statementPerDelivery(warehouse.store())
              : await withGroupCommit(warehouse.store(), config, silentLogger),
            reader: {
              read: async (ref: ObjectRef) => {
                await time.sleep(readLatency());
                const doc = byKey.get(objectUri(ref.bucket, ref.name, ref.generation));
                if (!doc)
                  throw new RejectionError('object_gone', `no generation ${ref.generation} of ${ref.name}`);
                return doc.bytes;
              },
            },
            analyzer: gemini.analyzer(),
            ...(seedDesign ? {} : { memo: memoStore }),
          },
          silentLogger,
        );
      closers.push(() => {
        for (const s of cloudRun.states()) cloudRun.instance(s.index).worker.server.close();
      });
      await cloudRun.startAutoscaled(factory);
      endpoint = (body, id) => cloudRun.push(body, id);
    } else {
      // The ideal consumer: one analysis per document, called exactly when the quota accepts it,
      // and its line written before the ack (the contract every consumer keeps).
      const running = new Map<string, Promise<void>>();
      const admitted = new QuotaQueue(time, gemini);
      const writeLine = mergeSeconds
        ? uniformLatency(mergeSeconds.low * 1000, mergeSeconds.high * 1000, spec.seed + ORACLE_WRITE_SEED)
        : mergeLatency(spec.seed + ORACLE_WRITE_SEED);
      endpoint = async (body) => {
        const data = (JSON.parse(body) as { message: { data: string } }).message.data;
        const resource = JSON.parse(Buffer.from(data, 'base64').toString('utf8')) as ObjectResource;
        const key = objectUri(resource.bucket, resource.name, resource.generation);
        if (oracleDone.has(key)) return 204;
        const already = running.get(key);
        if (already) {
          await already;
          return 204;
        }
        const work = (async () => {
          await time.sleep(readLatency());
          while (!(await admitted.call(resource.name))) {
            // Only the shared capacity's bursts refuse a call its share accepts: try again.
          }
          // One MERGE's latency, never queued, paced nor refused: no real writer does better.
          await time.sleep(writeLine());
          oracleDone.add(key);
        })();
        running.set(key, work);
        await work;
        running.delete(key);
        return 204;
      };
    }
    const sub = new PushSubscription({
      time,
      settings,
      windowModel: PUSH_WINDOW_MODELS[spec.window],
      endpoint: (body) =>
        endpoint(body, (JSON.parse(body) as { message: { messageId: string } }).message.messageId),
    });
    subscription = sub;
    let allPublished = false;
    let firstPublishMs = -1;
    const publishing = publishBacklog(
      spec,
      time,
      docs,
      sub,
      warehouse,
      () => {
        allPublished = true;
      },
      publishedAtMs,
    );
    // The drain is timed from the first publish (a backfill lists and queries first).
    let lastPublishMs = -1;
    let publishedSeen = 0;
    const ended = await time.run(() => {
      if (firstPublishMs < 0 && sub.stats.published > 0) firstPublishMs = time.nowMs();
      if (sub.stats.published > publishedSeen) {
        publishedSeen = sub.stats.published;
        lastPublishMs = time.nowMs();
      }
      return allPublished && sub.idle;
    }, CELL_BOUND_MS);
    const reconcile = allPublished ? await publishing : undefined;
    const drainMs = time.nowMs() - Math.max(0, firstPublishMs);
    // From the last upload too: a backlog published over a minute flatters a drain timed from the first.
    const drainFromLastMs = time.nowMs() - Math.max(0, lastPublishMs);
    // Late work (a batch still committing) may still add rows: let it end before counting.
    const worker = consumer !== 'oracle';
    if (worker) await time.run(() => false, time.nowMs() + 2 * settings.workerTimeoutSeconds * 1000);
    const isDone = (k: string) => (worker ? warehouse.has(k) : oracleDone.has(k));
    const lost = docs.filter((d) => !isDone(d.key)).length;
    const viewRows = worker ? warehouse.viewRows : oracleDone.size;
    const figures: ConsumerFigures = {
      drainMs,
      drainFromLastMs,
      drained: ended === 'done',
      paidAnalyses: gemini.paid,
      geminiUsd: [...gemini.paidByObject].reduce((sum, [name, n]) => sum + n * analysisUsd(name), 0),
      refused429: gemini.refused,
      deadLetters: sub.stats.deadLetters,
      lost,
      viewRows,
      extraRawRows: worker ? warehouse.raw.length - warehouse.viewRows : 0,
      billedBytes: warehouse.stats.billedBytes,
      lookups: warehouse.stats.lookups,
      merges: warehouse.stats.merges,
      pushes: sub.stats.pushes,
      nacks: sub.stats.nacks,
      maxOutstanding: sub.stats.maxOutstanding,
      memoClassA: memoBucket.classA,
      memoClassB: memoBucket.classB,
      memoRefusedObjectRate: memoBucket.refusedObjectRate,
      refusedBytesBilled: warehouse.stats.refusedBytesBilled,
      maxEstimateBytes: warehouse.stats.maxEstimateBytes,
      refusedDml: warehouse.stats.refusedQueueFull + warehouse.stats.refusedRate,
      cloudRunNoSlot429: cloudRunModel?.noInstance429 ?? 0,
      instancesStarted: cloudRunModel?.instancesStarted ?? 0,
      maxInstancesServing: cloudRunModel?.maxServing ?? 0,
      wallSeconds: Number(process.hrtime.bigint() - wallStart) / 1e9,
      secondsToRow: docs
        .map((d) => {
          const at = warehouse.firstRowAtMs.get(d.key);
          const from = publishedAtMs.get(d.key);
          return at === undefined || from === undefined ? Number.NaN : (at - from) / 1000;
        })
        .filter((x) => Number.isFinite(x)),
    };
    return { figures, ...(reconcile ? { reconcile } : {}) };
  } finally {
    subscription?.close();
    time.uninstall();
    Math.random = realRandom;
    for (const close of closers) close();
  }
}

/** Gemini's price of one paid analysis of a document (its input tokens, 400 output tokens). */
export function analysisUsd(name: string): number {
  return geminiCallUsd(tokensOf(name));
}
