import { mkdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { startPubSubEmulator } from '../local/lib/emulator';
import type { ObjectResource } from '../local/lib/local-bucket';
import { LOCAL_NAMES, type Pipeline, pushSubscriptionSpec, startPipeline } from '../local/lib/pipeline';
import type { OutgoingMessage, PubSubClient } from '../local/lib/pubsub';
import type { WorkerProcess } from '../local/lib/worker-process';
import { SQLITE_TABLE } from '../worker/src/adapters/stores/sqlite-store';
import { dataDirLayout } from '../worker/src/contract/data-dir';
import { DELIVERY_DEFAULTS } from '../worker/src/contract/settings';
import { notification, storeInvoices } from './documents';
import { busyShare, cpuTimeMs, machineCpu, startServer } from './processes';
import { median, ratio } from './stats';

/**
 * Stage 3: end to end through the real Pub/Sub emulator. Three push subscriptions with the same
 * settings (the stack's, from contract/settings.ts) on three topics: the local pipeline's (docline
 * worker), one to the naive consumer and one to a no-op endpoint (bare Express answering 204), the
 * emulator's own push rate. The same payloads are published the same way (batches) to each, in
 * rounds whose order rotates, after a warm-up of the emulator's JVM. Documents are stored in the
 * bucket before the clock starts: every figure is publish → delivered (→ row), not the uploads.
 */

export type E2eTarget = 'noop' | 'naive' | 'docline';
const TARGETS: readonly E2eTarget[] = ['noop', 'naive', 'docline'];

export interface EmulatorStageOptions {
  tmpRoot: string;
  messagesPerRound: number;
  rounds: number;
  /** Messages pushed to each endpoint before the measured rounds (the JVM and the workers warm up). */
  warmupMessages: number;
  publishBatch: number;
  maxMeasureMs: number;
  progress: (text: string) => void;
}

export interface DeliveryRun {
  messages: number;
  /** Deliveries counted (no-op) or rows written (workers) when the clock stopped. */
  done: number;
  elapsedMs: number;
  perSecond: number;
  complete: boolean;
  /** Share of all cores busy meanwhile (emulator, endpoint, this process and any neighbour). */
  machineBusyShare: number;
  /** CPU time of the endpoint process per message, ms. */
  endpointCpuMsPerMessage: number;
}

export interface EmulatorStageResult {
  runs: Record<E2eTarget, DeliveryRun[]>;
  median: Record<E2eTarget, { perSecond: number; machineBusyShare: number; endpointCpuMsPerMessage: number }>;
  /** docline documents/s over the no-op push rate: medians of per-round ratios. */
  ratio: number;
  /** docline over the naive consumer, end to end: the dedup's share of the gap. */
  doclineOverNaive: number;
  /** Rows with status ok among the docline worker's measured documents. */
  okRows: number;
  documents: number;
  /** TCP connections the no-op endpoint accepted per push (1 = a new connection every time). */
  noopConnectionsPerPush: number;
}

const TOPICS: Record<Exclude<E2eTarget, 'docline'>, { topic: string; subscription: string }> = {
  noop: { topic: 'bench-noop', subscription: 'bench-noop-push' },
  naive: { topic: 'bench-naive', subscription: 'bench-naive-push' },
};

async function publishAll(pubsub: PubSubClient, topic: string, messages: OutgoingMessage[], batch: number) {
  for (let i = 0; i < messages.length; i += batch) await pubsub.publish(topic, messages.slice(i, i + batch));
}

/** Polls `count` every 20 ms until it reaches `target` or the time is up. */
async function until(count: () => Promise<number>, target: number, maxMs: number, started: number) {
  let done = await count();
  while (done < target && performance.now() - started < maxMs) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    done = await count();
  }
  return done;
}

function rowCounter(file: string) {
  const db = new DatabaseSync(file, { readOnly: true });
  return {
    count: async () =>
      Number((db.prepare(`SELECT COUNT(*) AS n FROM ${SQLITE_TABLE}`).get() as { n: number }).n),
    okRowsNamed: (prefix: string) =>
      Number(
        (
          db
            .prepare(`SELECT COUNT(*) AS n FROM ${SQLITE_TABLE} WHERE status = 'ok' AND object_name LIKE ?`)
            .get(`${prefix}%`) as { n: number }
        ).n,
      ),
    close: () => db.close(),
  };
}

/** Starts the clock and the CPU counters of a run; `finish` turns them into a {@link DeliveryRun}. */
function startRun(messages: number, endpointPid: number | undefined) {
  const cpuBefore = machineCpu();
  const endpointBefore = cpuTimeMs(endpointPid);
  const started = performance.now();
  return {
    started,
    finish(done: number): DeliveryRun {
      const elapsedMs = performance.now() - started;
      const endpointAfter = cpuTimeMs(endpointPid);
      return {
        messages,
        done,
        elapsedMs,
        perSecond: (Math.min(done, messages) * 1000) / elapsedMs,
        complete: done >= messages,
        machineBusyShare: busyShare(cpuBefore, machineCpu()),
        endpointCpuMsPerMessage:
          endpointBefore === null || endpointAfter === null
            ? Number.NaN
            : (endpointAfter - endpointBefore) / done,
      };
    },
  };
}

export async function runEmulatorStage(options: EmulatorStageOptions): Promise<EmulatorStageResult> {
  const { progress, publishBatch, messagesPerRound: perRound } = options;
  const settings = { ...DELIVERY_DEFAULTS };
  progress('stage 3: starting the Pub/Sub emulator and the local pipeline');
  const emulator = await startPubSubEmulator();
  let pipeline: Pipeline | undefined;
  const servers: WorkerProcess[] = [];
  const counters: Array<ReturnType<typeof rowCounter>> = [];
  try {
    const pipelineDir = path.join(options.tmpRoot, 'e2e-pipeline');
    pipeline = await startPipeline({
      dataDir: pipelineDir,
      emulatorHost: emulator.host,
      workerEnv: { DOCLINE_ANALYZER: 'offline', LOG_LEVEL: 'INFO', WORKER_VERSION: 'bench' },
    });
    // The pipeline's own client: closed with the pipeline.
    const pubsub = pipeline.pubsub;
    const dirFor = (name: string) => {
      const dir = path.join(options.tmpRoot, name);
      mkdirSync(dir, { recursive: true });
      // The naive consumer reads the pipeline's bucket: the very same objects.
      symlinkSync(path.join(pipelineDir, 'bucket'), path.join(dir, 'bucket'), 'dir');
      return dir;
    };
    const bare = await startServer('bare', dirFor('e2e-noop'));
    servers.push(bare);
    const naiveDir = dirFor('e2e-naive');
    const naive = await startServer('naive', naiveDir);
    servers.push(naive);
    for (const [target, server] of [
      ['noop', bare],
      ['naive', naive],
    ] as const) {
      await pubsub.ensureTopic(TOPICS[target].topic);
      await pubsub.ensureSubscription(TOPICS[target].subscription, {
        ...pushSubscriptionSpec(pubsub, settings, `${server.url}/push`),
        topic: pubsub.topicPath(TOPICS[target].topic),
      });
    }

    const total = options.warmupMessages + options.rounds * perRound;
    progress(`stage 3: storing ${total} invoices in the pipeline's bucket`);
    const resources: ObjectResource[] = await storeInvoices(pipeline.bucket, total, {
      prefix: 'e2e',
      bucketName: pipeline.bucketName,
    });
    const doclineRows = rowCounter(dataDirLayout(pipelineDir).sqlite);
    counters.push(doclineRows);
    const naiveRows = rowCounter(path.join(naiveDir, 'naive.sqlite'));
    counters.push(naiveRows);
    const bareUrl = bare.url;
    const bareCounts = async () =>
      (await (await fetch(`${bareUrl}/count`)).json()) as { pushes: number; connections: number };
    const targets: Record<
      E2eTarget,
      { topic: string; pid: number | undefined; count: () => Promise<number> }
    > = {
      noop: {
        topic: TOPICS.noop.topic,
        pid: bare.child.pid,
        count: async () => (await bareCounts()).pushes,
      },
      naive: { topic: TOPICS.naive.topic, pid: naive.child.pid, count: naiveRows.count },
      docline: { topic: LOCAL_NAMES.topic, pid: pipeline.worker.child.pid, count: doclineRows.count },
    };

    const measure = async (target: E2eTarget, first: number, count: number, label: string) => {
      const { topic, pid, count: counted } = targets[target];
      // Cycles through the stored documents: only the no-op's longer warm-up goes past their end.
      const messages = Array.from({ length: count }, (_, i) => notification(resources[(first + i) % total]!));
      const before = await counted();
      const clock = startRun(count, pid);
      await publishAll(pubsub, topic, messages, publishBatch);
      const done = await until(
        async () => (await counted()) - before,
        count,
        options.maxMeasureMs,
        clock.started,
      );
      const result = clock.finish(done);
      progress(
        `stage 3: ${label} ${target}: ${result.perSecond.toFixed(0)}/s (${done}/${count}), ` +
          `machine ${(result.machineBusyShare * 100).toFixed(0)}% busy, endpoint ${result.endpointCpuMsPerMessage.toFixed(3)} CPU ms each`,
      );
      return result;
    };

    // The emulator's JVM speeds up a lot over its first few thousand messages: warm it up first.
    await measure('noop', 0, 3 * options.warmupMessages, 'warm-up');
    for (const target of ['naive', 'docline'] as const)
      await measure(target, 0, options.warmupMessages, 'warm-up');
    const runs: Record<E2eTarget, DeliveryRun[]> = { noop: [], naive: [], docline: [] };
    const perRoundRatio = { noop: [] as number[], naive: [] as number[] };
    for (let round = 0; round < options.rounds; round++) {
      const first = options.warmupMessages + round * perRound;
      const order = TARGETS.map((_, i) => TARGETS[(i + round) % TARGETS.length]!);
      const rates = {} as Record<E2eTarget, number>;
      for (const target of order) {
        const result = await measure(target, first, perRound, `round ${round + 1}/${options.rounds}`);
        runs[target].push(result);
        rates[target] = result.perSecond;
      }
      perRoundRatio.noop.push(ratio(rates.docline, rates.noop));
      perRoundRatio.naive.push(ratio(rates.docline, rates.naive));
    }
    const medianOf = (target: E2eTarget) => ({
      perSecond: median(runs[target].map((r) => r.perSecond)),
      machineBusyShare: median(runs[target].map((r) => r.machineBusyShare)),
      endpointCpuMsPerMessage: median(runs[target].map((r) => r.endpointCpuMsPerMessage)),
    });
    return {
      runs,
      median: { noop: medianOf('noop'), naive: medianOf('naive'), docline: medianOf('docline') },
      ratio: median(perRoundRatio.noop),
      doclineOverNaive: median(perRoundRatio.naive),
      okRows: doclineRows.okRowsNamed('e2e/'),
      noopConnectionsPerPush: await bareCounts().then((c) => c.connections / c.pushes),
      documents: total,
    };
  } finally {
    for (const counter of counters) counter.close();
    await Promise.all(servers.map((s) => s.stop(5_000)));
    await pipeline?.stop();
    await emulator.stop();
  }
}
