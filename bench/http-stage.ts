import { mkdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { ObjectResource } from '../local/lib/local-bucket';
import type { WorkerLogLine, WorkerProcess } from '../local/lib/worker-process';
import { SQLITE_TABLE } from '../worker/src/adapters/stores/sqlite-store';
import { dataDirLayout } from '../worker/src/contract/data-dir';
import { deliveryOrder, pushBodies } from './documents';
import { type LoadResult, runLoad } from './load';
import { cpuTimeMs, memoryOf, type ServerKind, startServer } from './processes';
import { median, ratio } from './stats';

/**
 * Stage 2: the same load generator against (a) bare Express, (b) the naive consumer and (c) the
 * docline worker, in rounds whose order rotates, so that a slower moment of this shared machine
 * does not always fall on the same server. Every server receives the very same request bodies.
 */

export interface HttpStageOptions {
  tmpRoot: string;
  /** The folder holding the stored invoices' bucket; every server reads it through a symlink. */
  bucketRoot: string;
  resources: readonly ObjectResource[];
  concurrency: number;
  warmupRequests: number;
  requestsPerTrial: number;
  rounds: number;
  maxTrialMs: number;
  progress: (text: string) => void;
}

/** One measured load against one server, with the CPU time that server spent on it. */
export interface Trial extends LoadResult {
  /** CPU time (user + system) of the server process per request, ms. */
  cpuMsPerRequest: number;
}

export interface RedeliveryRun extends Trial {
  documents: number;
  analyses: number;
  analysesPerDocument: number;
  /** Deliveries analysed and then refused at the conditional write (two deliveries at once). */
  overlaps: number;
  rowsAdded: number;
}

export interface HttpStageResult {
  concurrency: number;
  trials: Record<ServerKind, Trial[]>;
  median: Record<ServerKind, { perSecond: number; p50Ms: number; p99Ms: number; cpuMsPerRequest: number }>;
  /** Medians of the per-round ratios (each round's servers ran back to back). */
  doclineOverBare: number;
  doclineOverNaive: number;
  /** The naive consumer over the ceiling: how much of (c)/(a) is the work itself, not the dedup. */
  naiveOverBare: number;
  /** The naive consumer's CPU time per request over the worker's (the same ratio, in CPU, not wall time). */
  doclineOverNaiveByCpu: number;
  /** 50% redeliveries, each `2 × concurrency` requests after its first delivery. */
  redelivery: { docline: RedeliveryRun; naive: RedeliveryRun };
  /** 50% redeliveries sent right behind their first delivery: both in flight at once. */
  overlapping: RedeliveryRun;
  /** Rows in each SQLite file at the end, against the unique documents and the deliveries sent. */
  rows: { docline: number; naive: number; uniqueDocuments: number; deliveries: number };
  memory: Record<ServerKind, { peakRssBytes: number; rssBytes: number } | null>;
}

const KINDS: readonly ServerKind[] = ['bare', 'naive', 'docline'];

/** How many stored documents stage 2 uses (every docline run needs documents it has not seen). */
export function httpStageDocuments(
  options: Pick<HttpStageOptions, 'warmupRequests' | 'requestsPerTrial' | 'rounds'>,
) {
  const redelivery = Math.floor(options.requestsPerTrial / 2);
  const overlapping = Math.floor(options.requestsPerTrial / 4);
  return {
    redelivery,
    overlapping,
    total: options.warmupRequests + options.rounds * options.requestsPerTrial + redelivery + overlapping,
  };
}

function countRows(file: string): number {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return Number((db.prepare(`SELECT COUNT(*) AS n FROM ${SQLITE_TABLE}`).get() as { n: number }).n);
  } finally {
    db.close();
  }
}

/**
 * Counts what the server's log lines say about the deliveries of `work` (one INFO line each). A
 * line is written before its answer, but may still be in the pipe when the answer arrives: after
 * the work, waits (bounded) until one line per answered request was read.
 */
async function watchLog(
  server: WorkerProcess,
  work: () => Promise<Trial>,
): Promise<{ value: Trial; analysed: number; overlaps: number }> {
  let lines = 0;
  let analysed = 0;
  let overlaps = 0;
  let caughtUp: (() => void) | undefined;
  let expected = Number.POSITIVE_INFINITY;
  const onLine = (line: WorkerLogLine) => {
    if (line.status === undefined) return;
    lines += 1;
    if (line.analysed === true) analysed += 1;
    if (line.analysed === true && line.status === 'duplicate') overlaps += 1;
    if (lines >= expected) caughtUp?.();
  };
  server.events.on('line', onLine);
  try {
    const value = await work();
    expected = value.count;
    if (lines < expected) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 10_000);
        caughtUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    return { value, analysed, overlaps };
  } finally {
    server.events.off('line', onLine);
  }
}

export async function runHttpStage(options: HttpStageOptions): Promise<HttpStageResult> {
  const { concurrency, requestsPerTrial } = options;
  const need = httpStageDocuments(options);
  if (options.resources.length < need.total) throw new Error(`stage 2 needs ${need.total} stored documents`);

  const dirs = {} as Record<ServerKind, string>;
  for (const kind of KINDS) {
    dirs[kind] = path.join(options.tmpRoot, `http-${kind}`);
    mkdirSync(dirs[kind], { recursive: true });
    symlinkSync(options.bucketRoot, path.join(dirs[kind], 'bucket'), 'dir');
  }
  options.progress('stage 2: starting bare Express, the naive consumer and the docline worker');
  const servers = {} as Record<ServerKind, WorkerProcess>;
  try {
    for (const kind of KINDS) servers[kind] = await startServer(kind, dirs[kind]);

    const unique = (first: number, count: number) =>
      pushBodies(options.resources, deliveryOrder(count, 0, 0), first);
    const load = async (kind: ServerKind, bodies: Buffer[]): Promise<Trial> => {
      const pid = servers[kind].child.pid;
      const cpuBefore = cpuTimeMs(pid);
      const result = await runLoad({
        url: `${servers[kind].url}/push`,
        bodies,
        concurrency,
        maxDurationMs: options.maxTrialMs,
      });
      const cpuAfter = cpuTimeMs(pid);
      const cpuMsPerRequest =
        cpuBefore === null || cpuAfter === null ? Number.NaN : (cpuAfter - cpuBefore) / result.count;
      return { ...result, cpuMsPerRequest };
    };

    const warmup = unique(0, options.warmupRequests);
    for (const kind of KINDS) {
      options.progress(`stage 2: warm-up of ${kind} (${warmup.length} requests)`);
      await load(kind, warmup);
    }

    const trials: Record<ServerKind, Trial[]> = { bare: [], naive: [], docline: [] };
    const roundRatios = {
      bare: [] as number[],
      naive: [] as number[],
      naiveOverBare: [] as number[],
      naiveByCpu: [] as number[],
    };
    for (let round = 0; round < options.rounds; round++) {
      const bodies = unique(options.warmupRequests + round * requestsPerTrial, requestsPerTrial);
      const order = KINDS.map((_, i) => KINDS[(i + round) % KINDS.length]!);
      const perSecond = {} as Record<ServerKind, number>;
      const cpu = {} as Record<ServerKind, number>;
      for (const kind of order) {
        const result = await load(kind, bodies);
        trials[kind].push(result);
        perSecond[kind] = result.perSecond;
        cpu[kind] = result.cpuMsPerRequest;
        options.progress(
          `stage 2: round ${round + 1}/${options.rounds} ${kind}: ${result.perSecond.toFixed(0)} req/s, ` +
            `p50 ${result.p50Ms.toFixed(1)} ms, p99 ${result.p99Ms.toFixed(1)} ms, ` +
            `${result.cpuMsPerRequest.toFixed(3)} CPU ms/request, ${result.acked}/${result.count} acked`,
        );
      }
      roundRatios.naiveByCpu.push(ratio(cpu.naive, cpu.docline));
      roundRatios.bare.push(ratio(perSecond.docline, perSecond.bare));
      roundRatios.naive.push(ratio(perSecond.docline, perSecond.naive));
      roundRatios.naiveOverBare.push(ratio(perSecond.naive, perSecond.bare));
    }

    // 50% redeliveries: each document twice, the second delivery 2 × concurrency requests later.
    const redeliveryFirst = options.warmupRequests + options.rounds * requestsPerTrial;
    const redeliveryBodies = pushBodies(
      options.resources,
      deliveryOrder(need.redelivery, 0.5, 2 * concurrency),
      redeliveryFirst,
    );
    const measureRedeliveries = async (
      kind: 'docline' | 'naive',
      bodies: Buffer[],
      documents: number,
      label: string,
    ): Promise<RedeliveryRun> => {
      const file =
        kind === 'docline' ? dataDirLayout(dirs.docline).sqlite : path.join(dirs.naive, 'naive.sqlite');
      const rowsBefore = countRows(file);
      const watched = await watchLog(servers[kind], () => load(kind, bodies));
      const run: RedeliveryRun = {
        ...watched.value,
        documents,
        analyses: watched.analysed,
        analysesPerDocument: watched.analysed / documents,
        overlaps: watched.overlaps,
        rowsAdded: countRows(file) - rowsBefore,
      };
      options.progress(
        `stage 2: ${kind}, ${label}: ${run.perSecond.toFixed(0)} req/s, ` +
          `${run.analysesPerDocument.toFixed(2)} analyses per document (${run.overlaps} overlaps), ${run.rowsAdded} rows for ${documents} documents`,
      );
      return run;
    };
    const redelivery = {
      docline: await measureRedeliveries('docline', redeliveryBodies, need.redelivery, '50% redeliveries'),
      naive: await measureRedeliveries('naive', redeliveryBodies, need.redelivery, '50% redeliveries'),
    };
    // Both deliveries back to back: with 32 lanes they are in flight together, as when the emulator
    // redelivers after the ack deadline while the first request is still open.
    const overlapping = await measureRedeliveries(
      'docline',
      pushBodies(
        options.resources,
        deliveryOrder(need.overlapping, 0.5, 0),
        redeliveryFirst + need.redelivery,
      ),
      need.overlapping,
      'both deliveries at once',
    );

    const memory = {} as HttpStageResult['memory'];
    for (const kind of KINDS) memory[kind] = memoryOf(servers[kind].child.pid);
    const medianOf = (kind: ServerKind) => ({
      perSecond: median(trials[kind].map((t) => t.perSecond)),
      p50Ms: median(trials[kind].map((t) => t.p50Ms)),
      p99Ms: median(trials[kind].map((t) => t.p99Ms)),
      cpuMsPerRequest: median(trials[kind].map((t) => t.cpuMsPerRequest)),
    });
    return {
      concurrency,
      trials,
      median: { bare: medianOf('bare'), naive: medianOf('naive'), docline: medianOf('docline') },
      doclineOverBare: median(roundRatios.bare),
      doclineOverNaive: median(roundRatios.naive),
      naiveOverBare: median(roundRatios.naiveOverBare),
      doclineOverNaiveByCpu: median(roundRatios.naiveByCpu),
      redelivery,
      overlapping,
      rows: {
        docline: countRows(dataDirLayout(dirs.docline).sqlite),
        naive: countRows(path.join(dirs.naive, 'naive.sqlite')),
        // Every stored document reached the worker (some twice); the naive consumer had no overlap run.
        uniqueDocuments: need.total,
        // Deliveries the naive consumer received.
        deliveries: options.warmupRequests + options.rounds * requestsPerTrial + redeliveryBodies.length,
      },
      memory,
    };
  } finally {
    await Promise.all(Object.values(servers).map((s) => s.stop(5_000)));
  }
}
