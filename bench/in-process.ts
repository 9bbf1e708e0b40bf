import type { ObjectResource } from '../local/lib/local-bucket';
import { OfflineAnalyzer } from '../worker/src/adapters/analyzers/offline-analyzer';
import { LocalBucketReader } from '../worker/src/adapters/readers/local-bucket';
import { SqliteStore } from '../worker/src/adapters/stores/sqlite-store';
import type { AnalysisResult } from '../worker/src/contract/analysis';
import { DEFAULT_CONTENT_TYPES, DELIVERY_DEFAULTS } from '../worker/src/contract/settings';
import { parsePush } from '../worker/src/core/event';
import { type HandlerDeps, handle, type Outcome } from '../worker/src/core/handle';
import { type Analyzer, type AnalyzerInput, systemClock } from '../worker/src/core/ports';
import { deliveryOrder, pushBodyFor } from './documents';
import { type RunSummary, summarize } from './stats';

/**
 * Stages 1 and 4: `parsePush` + `handle()` in this process, with the SQLite store, the local bucket
 * and the offline analyzer, on text invoices. No HTTP, no logging: the cost of the algorithm itself.
 */

/** Wraps an analyzer and counts its calls (stage 4: analyses per unique document). */
export class CountingAnalyzer implements Analyzer {
  calls = 0;
  constructor(private readonly inner: Analyzer) {}

  analyze(input: AnalyzerInput): Promise<AnalysisResult> {
    this.calls += 1;
    return this.inner.analyze(input);
  }
}

export interface InProcessRun extends RunSummary {
  documents: number;
  deliveries: number;
  analyses: number;
  analysesPerDocument: number;
  /** Deliveries that analysed and then lost at the conditional write (ran at the same time as another). */
  overlaps: number;
  rows: number;
  outcomes: Record<string, number>;
}

export interface InProcessOptions {
  bucketRoot: string;
  databasePath: string;
  resources: readonly ObjectResource[];
  /** Index of the first document of this run in `resources`. */
  first: number;
  documents: number;
  redeliveryShare: number;
  /** 1: one delivery after the other. Above 1: batches of this size run at once (Promise.all). */
  batchSize: number;
  maxDurationMs: number;
}

/** Runs deliveries through parsePush + handle() and measures them. */
export async function runInProcess(options: InProcessOptions): Promise<InProcessRun> {
  const store = new SqliteStore({ path: options.databasePath });
  const analyzer = new CountingAnalyzer(new OfflineAnalyzer());
  const deps: HandlerDeps = {
    store,
    reader: new LocalBucketReader(options.bucketRoot),
    analyzer,
    clock: systemClock,
    dedupKeyMode: 'object',
    limits: { maxObjectBytes: DELIVERY_DEFAULTS.maxObjectBytes, allowedContentTypes: DEFAULT_CONTENT_TYPES },
    workerVersion: 'bench',
  };
  // Sequential: a redelivery comes well after its first delivery. Batches: the two deliveries of a
  // document are placed in the same batch, as when Pub/Sub redelivers while the first is in flight.
  const order = deliveryOrder(options.documents, options.redeliveryShare, options.batchSize === 1 ? 8 : 0);
  const bodies = order.map((i) => {
    const resource = options.resources[options.first + i];
    if (!resource) throw new Error(`document ${options.first + i} was not stored`);
    return pushBodyFor(resource, `p${options.first + i}`);
  });

  const latenciesMs: number[] = [];
  const outcomes: Record<string, number> = {};
  let overlaps = 0;
  const note = (outcome: Outcome) => {
    const key = outcome.duplicateAt ? `${outcome.status}@${outcome.duplicateAt}` : outcome.status;
    outcomes[key] = (outcomes[key] ?? 0) + 1;
    if (outcome.duplicateAt === 'record' && outcome.analysed) overlaps += 1;
  };
  const one = async (body: unknown) => {
    const sent = performance.now();
    const outcome = await handle(parsePush(body), deps);
    latenciesMs.push(performance.now() - sent);
    note(outcome);
  };

  const started = performance.now();
  const deadline = started + options.maxDurationMs;
  try {
    for (let i = 0; i < bodies.length && performance.now() < deadline; i += options.batchSize) {
      if (options.batchSize === 1) await one(bodies[i]);
      else await Promise.all(bodies.slice(i, i + options.batchSize).map(one));
    }
    const elapsedMs = performance.now() - started;
    const documents = new Set(order.slice(0, latenciesMs.length)).size;
    return {
      ...summarize(latenciesMs, elapsedMs),
      documents,
      deliveries: latenciesMs.length,
      analyses: analyzer.calls,
      analysesPerDocument: analyzer.calls / documents,
      overlaps,
      rows: store.view('documents').length,
      outcomes,
    };
  } finally {
    await store.close();
  }
}
