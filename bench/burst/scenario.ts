import { Agent, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BigQuery } from '@google-cloud/bigquery';
import { type BigQueryServer, startBigQueryServer, staticTokenAuth } from '../../sim/bigquery-rest';
import { silentLogger } from '../../sim/logger';
import { GeminiPortModel, TierQuota } from '../../sim/models/gemini';
import { PushSubscription } from '../../sim/pubsub';
import { seededRandom } from '../../sim/random';
import { SimTime } from '../../sim/time';
import { createApp } from '../../worker/src/app';
import { DEFAULT_CONTENT_TYPES, type DeliverySettings } from '../../worker/src/contract/settings';
import { objectUri } from '../../worker/src/core/event';
import type { HandlerDeps } from '../../worker/src/core/handle';
import type { Clock, ObjectRef, Reader, Store } from '../../worker/src/core/ports';
import { finalizeAttributes } from '../../worker/src/reconcile/notification';
import { textInvoices } from '../documents';
import { bigQueryStoreFor, statementPerDelivery } from './wiring';

/**
 * One run of the burst: 10,000 distinct documents uploaded within 60 simulated seconds, 5 % of them
 * announced twice (a second notification, so a second messageId), pushed by the Pub/Sub simulator
 * through a Cloud Run simulator (instances × concurrency slots) to instances of the real worker app
 * (`createApp` + `handle`), each with its own @google-cloud/bigquery client against the BigQuery
 * simulator, and the Gemini simulator as the analyzer.
 */

export const BURST_TABLE = 'docline-bench.docline.documents';
const BUCKET = 'acme-invoices-burst';

/** What a store needs to be built for one worker instance. */
export interface InstanceContext {
  bigquery: BigQuery;
  table: string;
  clock: Clock;
  time: SimTime;
  settings: DeliverySettings;
}

/** How a scenario composes each worker instance: its store and any extra handler dependency (the memo). */
export interface Wiring {
  store(context: InstanceContext): Store;
  /** Extra fields of the handler's dependencies (e.g. `memo`), one call per instance. */
  extraDeps?(context: InstanceContext): Record<string, unknown>;
}

export interface ScenarioOptions {
  name: string;
  wiring: Wiring;
  documents: number;
  /** Share of documents announced twice. */
  duplicateShare: number;
  uploadSeconds: number;
  timeScale: number;
  /** The run stops here (simulated seconds) if messages are still pending. */
  boundSeconds: number;
  /** … or after this many real seconds, whichever comes first. */
  maxWallSeconds: number;
  instances: number;
  /** Cloud Run concurrency: requests one instance takes at once. */
  concurrency: number;
  settings: DeliverySettings;
  geminiRequestsPerMinute: number;
  geminiLatencyMs: number;
  /** Simulated latency of one Cloud Storage read. */
  readLatencyMs: number;
  progress?: (text: string) => void;
}

/** The figures of one run, under the keys bench/results.json's burst section uses. */
export interface BurstFigures {
  simulatedSeconds: number;
  analysesPerDocument: number;
  mergeStatements: number;
  queryCalls: number;
  bytesBilledPerDocument: number;
  http503: number;
  deadLetters: number;
  tableRows: number;
  viewRows: number;
  lost: number;
}

/** What explains the figures (kept outside the figures' objects). */
export interface BurstDetails {
  finished: boolean;
  /** Messages neither acked nor dead-lettered when the run ended. */
  pendingAtEnd: number;
  messages: number;
  pushes: number;
  acks: number;
  nacks: number;
  answers: Record<string, number>;
  ackDeadlineExpired: number;
  cloudRunTimeouts: number;
  cloudRunNoInstance429: number;
  connectionErrors: Record<string, number>;
  maxOutstandingPushes: number;
  pushBackoffs: number;
  longestPushBackoffSeconds: number;
  geminiRefused429: number;
  /** Analyses Gemini accepted in each simulated minute from the first publish (its quota caps each). */
  analysesByMinute: number[];
  selectStatements: number;
  getQueryResultsCalls: number;
  refusedDmlQueueFull: number;
  refusedDmlRate: number;
  refusedApiRate: number;
  maxDmlQueued: number;
  documentsWithTwoRows: number;
  wallSeconds: number;
  /** Real seconds not counted as simulated time (the event loop busy or not scheduled; see SimTime). */
  frozenRealSeconds: number;
}

/** Cloud Storage as the worker reads it: the bytes of each generation, after a simulated latency. */
class SimReader implements Reader {
  constructor(
    private readonly objects: Map<string, Buffer>,
    private readonly time: SimTime,
    private readonly latencyMs: number,
  ) {}

  async read(ref: ObjectRef): Promise<Buffer> {
    await this.time.sleep(this.latencyMs);
    const bytes = this.objects.get(objectUri(ref.bucket, ref.name, ref.generation));
    if (!bytes) throw new Error(`bench: no object ${ref.name}#${ref.generation}`);
    return bytes;
  }
}

/**
 * Cloud Run in front of the instances: a request takes a free slot of the least busy instance, or
 * waits for one; Cloud Run queues a request that no instance can take for up to 10 s (or 3.5 × the
 * average start-up time, whichever is greater), then answers 429 "no available instance". Past the
 * request timeout Cloud Run answers 504 and frees the slot while the instance may still finish.
 */
class CloudRunSim {
  timeouts = 0;
  refusedNoInstance = 0;
  /** Pushes that got no HTTP answer from the instance, by error code. */
  readonly connectionErrors: Record<string, number> = {};
  /** How long a request waits for a slot before Cloud Run answers 429 (10 s, the documented minimum). */
  private readonly pendingLimitMs = 10_000;
  private readonly busy: number[];
  private readonly waiting: Array<() => void> = [];
  private readonly agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });

  constructor(
    private readonly ports: number[],
    private readonly concurrency: number,
    private readonly timeoutMs: number,
    private readonly time: SimTime,
  ) {
    this.busy = ports.map(() => 0);
  }

  async push(body: string): Promise<number> {
    const started = this.time.nowMs();
    let slot = this.freeSlot();
    while (slot < 0) {
      const waitedMs = this.time.nowMs() - started;
      const got = await new Promise<boolean>((resolve) => {
        const wake = () => {
          timer.cancel();
          resolve(true);
        };
        const timer = this.time.after(this.pendingLimitMs - waitedMs, () => {
          const i = this.waiting.indexOf(wake);
          if (i >= 0) this.waiting.splice(i, 1);
          resolve(false);
        });
        this.waiting.push(wake);
      });
      if (!got) {
        // Every instance busy for too long: "no available instance".
        this.refusedNoInstance++;
        return 429;
      }
      slot = this.freeSlot();
    }
    this.busy[slot]!++;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.busy[slot]!--;
      this.waiting.shift()?.();
    };
    const remainingMs = this.timeoutMs - (this.time.nowMs() - started);
    return await new Promise<number>((resolve) => {
      const timer = this.time.after(Math.max(0, remainingMs), () => {
        this.timeouts++;
        release();
        resolve(504);
      });
      const req = request(
        {
          host: '127.0.0.1',
          port: this.ports[slot],
          path: '/push',
          method: 'POST',
          agent: this.agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          res.resume();
          res.on('end', () => {
            timer.cancel();
            release();
            resolve(res.statusCode ?? 0);
          });
        },
      );
      req.on('error', (error: NodeJS.ErrnoException) => {
        const code = error.code ?? error.message;
        this.connectionErrors[code] = (this.connectionErrors[code] ?? 0) + 1;
        timer.cancel();
        release();
        resolve(0);
      });
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }

  private freeSlot(): number {
    let best = -1;
    for (let i = 0; i < this.busy.length; i++) {
      if (this.busy[i]! < this.concurrency && (best < 0 || this.busy[i]! < this.busy[best]!)) best = i;
    }
    return best;
  }
}

interface Announcement {
  at: number;
  data: string;
  attributes: Record<string, string>;
}

/** The documents of the burst and their notifications, in publish order. */
export function burstAnnouncements(
  documents: number,
  duplicateShare: number,
  uploadSeconds: number,
  epochMs: number,
): { objects: Map<string, Buffer>; keys: string[]; announcements: Announcement[] } {
  const samples = textInvoices();
  const objects = new Map<string, Buffer>();
  const keys: string[] = [];
  const announcements: Announcement[] = [];
  const twiceEvery = duplicateShare > 0 ? Math.round(1 / duplicateShare) : 0;
  for (let i = 0; i < documents; i++) {
    const sample = samples[i % samples.length]!;
    const at = (i * uploadSeconds * 1000) / documents;
    const name = `burst/${String(i).padStart(6, '0')}-${sample.name}`;
    const generation = String(1764489600000000 + i);
    const created = new Date(epochMs + at).toISOString();
    const resource = {
      kind: 'storage#object',
      id: `${BUCKET}/${name}/${generation}`,
      name,
      bucket: BUCKET,
      generation,
      metageneration: '1',
      contentType: 'text/plain',
      timeCreated: created,
      updated: created,
      size: String(sample.bytes.length),
    };
    const key = objectUri(BUCKET, name, generation);
    objects.set(key, sample.bytes);
    keys.push(key);
    const copies = twiceEvery > 0 && i % twiceEvery === 0 ? 2 : 1;
    for (let c = 1; c <= copies; c++) {
      // A second notification config on the bucket publishes its own message (own messageId).
      announcements.push({
        at,
        data: JSON.stringify(resource),
        attributes: finalizeAttributes(resource, {
          notificationConfig: `projects/_/buckets/${BUCKET}/notificationConfigs/${c}`,
        }),
      });
    }
  }
  return { objects, keys, announcements };
}

export async function runScenario(
  options: ScenarioOptions,
): Promise<{ figures: BurstFigures; details: BurstDetails }> {
  const progress = options.progress ?? (() => {});
  const time = new SimTime(options.timeScale);
  const wallStart = performance.now();
  const bigquerySim: BigQueryServer = await startBigQueryServer({
    projectId: 'docline-bench',
    simulated: { time, random: seededRandom(13) },
  });
  // One requests-per-minute quota for every instance; an analysis of 1,500 input tokens; a 429 in 0.1 s.
  const gemini = new GeminiPortModel(
    time,
    new TierQuota(time, {
      requestsPerMinute: options.geminiRequestsPerMinute,
      tokensPerMinute: Number.POSITIVE_INFINITY,
    }),
    { latency: () => options.geminiLatencyMs, refusalLatency: () => 100 },
    () => 1_500,
  );
  const epochMs = time.clock.now().getTime();
  const { objects, keys, announcements } = burstAnnouncements(
    options.documents,
    options.duplicateShare,
    options.uploadSeconds,
    epochMs,
  );
  const reader = new SimReader(objects, time, options.readLatencyMs);
  const authClient = await staticTokenAuth();
  const servers: Server[] = [];
  const stores: Store[] = [];
  const ports: number[] = [];
  for (let i = 0; i < options.instances; i++) {
    const context: InstanceContext = {
      bigquery: new BigQuery({
        projectId: bigquerySim.projectId,
        apiEndpoint: bigquerySim.url,
        authClient: authClient as never,
        autoRetry: false,
      }),
      table: BURST_TABLE,
      clock: time.clock,
      time,
      settings: options.settings,
    };
    const store = options.wiring.store(context);
    stores.push(store);
    const deps: HandlerDeps = {
      store,
      reader,
      analyzer: gemini.analyzer(),
      clock: time.clock,
      dedupKeyMode: options.settings.dedupKeyMode,
      limits: { maxObjectBytes: options.settings.maxObjectBytes, allowedContentTypes: DEFAULT_CONTENT_TYPES },
      workerVersion: 'bench-burst',
      ...options.wiring.extraDeps?.(context),
    };
    const app = createApp({
      ...deps,
      logger: silentLogger,
      pushBodyLimitBytes: options.settings.pushBodyLimitBytes,
    });
    const server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    server.keepAliveTimeout = 60_000;
    servers.push(server);
    ports.push((server.address() as AddressInfo).port);
  }
  const cloudRun = new CloudRunSim(
    ports,
    options.concurrency,
    options.settings.workerTimeoutSeconds * 1000,
    time,
  );
  const subscription = new PushSubscription({
    time,
    settings: options.settings,
    endpoint: (body) => cloudRun.push(body),
  });

  // Publish on schedule: every announcement due by now, checked every 10 simulated ms or so.
  const publishStart = time.nowMs();
  let next = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = time.nowMs() - publishStart;
      while (next < announcements.length && announcements[next]!.at <= now) {
        const a = announcements[next++]!;
        subscription.publish(a.data, a.attributes);
      }
      if (next < announcements.length) setTimeout(tick, 1);
      else resolve();
    };
    tick();
  });
  progress(`${options.name}: ${announcements.length} messages published`);
  const report = setInterval(() => {
    progress(
      `${options.name}: t=${((time.nowMs() - publishStart) / 1000).toFixed(0)} s simulated, ` +
        `${subscription.pending} pending, ${bigquerySim.viewRows(BURST_TABLE).length} documents in the view, ` +
        `${gemini.paid} paid analyses, window ${subscription.window}`,
    );
  }, 5_000);
  // Bounded twice: in simulated time, and in real time (a busy machine slows the simulated clock).
  let wallTimer: NodeJS.Timeout | undefined;
  const wallLeftMs = options.maxWallSeconds * 1000 - (performance.now() - wallStart);
  await Promise.race([
    subscription.waitIdle(options.boundSeconds * 1000 - (time.nowMs() - publishStart)),
    new Promise<void>((resolve) => {
      wallTimer = setTimeout(resolve, Math.max(0, wallLeftMs));
    }),
  ]);
  clearTimeout(wallTimer);
  const finished = subscription.idle;
  const simulatedMs = time.nowMs() - publishStart;
  clearInterval(report);
  subscription.close();
  // Figures are read now, before late requests could add rows after the end.
  const tableRows = bigquerySim.rows(BURST_TABLE);
  const view = bigquerySim.viewRows(BURST_TABLE);
  const stats = { ...bigquerySim.stats };
  const paid = gemini.paid;
  const viewKeys = new Set(view.map((r) => r.dedup_key));
  const rowsPerKey = new Map<string, number>();
  for (const r of tableRows) rowsPerKey.set(r.dedup_key!, (rowsPerKey.get(r.dedup_key!) ?? 0) + 1);

  for (const server of servers) server.closeAllConnections();
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  cloudRun.close();
  await Promise.all(stores.map((s) => s.close?.().catch(() => undefined)));
  await bigquerySim.stop();
  time.stop();

  const push = subscription.stats;
  // Per document that landed: the same as per uploaded document once the run drained, and not
  // flattered by the documents a bounded run never reached.
  const landed = Math.max(1, view.length);
  const figures: BurstFigures = {
    simulatedSeconds: Math.round(simulatedMs / 1000),
    analysesPerDocument: paid / landed,
    mergeStatements: stats.mergeStatements,
    queryCalls: stats.queryCalls,
    bytesBilledPerDocument: stats.billedBytes / landed,
    http503: push.statuses[503] ?? 0,
    deadLetters: push.deadLetters,
    tableRows: tableRows.length,
    viewRows: view.length,
    lost: keys.filter((k) => !viewKeys.has(k)).length,
  };
  const details: BurstDetails = {
    finished,
    pendingAtEnd: subscription.pending,
    messages: announcements.length,
    pushes: push.pushes,
    acks: push.acks,
    nacks: push.nacks,
    answers: Object.fromEntries(Object.entries(push.statuses).map(([k, v]) => [k === '0' ? 'none' : k, v])),
    ackDeadlineExpired: push.deadlineExpired,
    cloudRunTimeouts: cloudRun.timeouts,
    cloudRunNoInstance429: cloudRun.refusedNoInstance,
    connectionErrors: cloudRun.connectionErrors,
    maxOutstandingPushes: push.maxOutstanding,
    pushBackoffs: push.pushBackoffsMs.length,
    longestPushBackoffSeconds: Math.max(0, ...push.pushBackoffsMs) / 1000,
    geminiRefused429: gemini.refused,
    analysesByMinute: byMinute(gemini.paidAtMs, publishStart),
    selectStatements: stats.selectStatements,
    getQueryResultsCalls: stats.getQueryResultsCalls,
    refusedDmlQueueFull: stats.refusedDmlQueue,
    refusedDmlRate: stats.refusedDmlRate,
    refusedApiRate: stats.refusedApiRate,
    maxDmlQueued: stats.maxQueued,
    documentsWithTwoRows: [...rowsPerKey.values()].filter((n) => n > 1).length,
    wallSeconds: (performance.now() - wallStart) / 1000,
    frozenRealSeconds: time.frozenRealMs / 1000,
  };
  return { figures, details };
}

function byMinute(atMs: readonly number[], startMs: number): number[] {
  const minutes: number[] = [];
  for (const at of atMs) {
    const minute = Math.max(0, Math.floor((at - startMs) / 60_000));
    while (minutes.length <= minute) minutes.push(0);
    minutes[minute]!++;
  }
  return minutes;
}

/** The seed's design: one lookup and one MERGE per delivery, no memo. */
export const perDeliveryWiring: Wiring = {
  store: (context) => statementPerDelivery(bigQueryStoreFor(context)),
};
