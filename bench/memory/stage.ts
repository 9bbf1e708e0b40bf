import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ObjectResource } from '../../local/lib/local-bucket';
import { silentLogger } from '../../sim/logger';
import { textInvoices } from '../../sim/samples';
import { OfflineAnalyzer } from '../../worker/src/adapters/analyzers/offline-analyzer';
import {
  type LeaseState,
  renewLease,
  takeLease,
} from '../../worker/src/adapters/memo-stores/memory-memo-store';
import { QuotaGate } from '../../worker/src/adapters/quota-gate';
import { SqliteStore } from '../../worker/src/adapters/stores/sqlite-store';
import { loadConfig } from '../../worker/src/config';
import type { AnalysisResult } from '../../worker/src/contract/analysis';
import { DELIVERY_DEFAULTS, deliveryBudgetMs } from '../../worker/src/contract/settings';
import { Deadlines } from '../../worker/src/core/deadline';
import { parsePush } from '../../worker/src/core/event';
import { type HandlerDeps, handle } from '../../worker/src/core/handle';
import { AnalysisMemo } from '../../worker/src/core/memo';
import { OutageBreaker } from '../../worker/src/core/outage';
import {
  type Analyzer,
  type AnalyzerInput,
  type LeaseTaken,
  type MemoEntry,
  type MemoStore,
  type ObjectRef,
  type Reader,
  systemClock,
} from '../../worker/src/core/ports';
import { withGroupCommit } from '../../worker/src/main';
import { BENCH_BUCKET, pushBodyFor } from '../documents';

/**
 * The long-run memory stage, one worker process: `runMemoryDeliveries` pushes a million deliveries
 * through the worker's own composition (the outage breaker, the quota gate, the deadlines, the memo
 * with its leases on, group commit over the embedded SQLite store) and samples the process's
 * resident set every `sampleEvery` deliveries. Run as its own child process
 * (bench/memory/run-memory.ts), so that the RSS is the worker's and nothing else's.
 *
 * Stand-ins, only where the real thing is not the worker's memory: the bucket is a reader that
 * serves the sample invoices from memory (no million files on disk); the analyzer is the offline
 * analyzer run once per sample invoice and replayed for each copy (the paid call is outside the
 * worker); the memo bucket is a store that keeps the last {@link MEMO_WINDOW_KEYS} keys, as the
 * bucket's lifecycle rule deletes old objects (it lives outside the worker in production).
 */

export interface MemorySample {
  deliveries: number;
  rssBytes: number;
  heapUsedBytes: number;
  /** The memo's per-key memories at the sample (core/memo.ts `footprint()`). */
  memo: ReturnType<AnalysisMemo['footprint']>;
}

export interface MemoryRunOptions {
  deliveries: number;
  sampleEvery: number;
  /** Deliveries in flight at once (Cloud Run's concurrency). */
  concurrency: number;
  /** Every n-th delivery is a Pub/Sub redelivery of a document delivered a little earlier. */
  redeliveryEvery: number;
  onSample(sample: MemorySample): void;
}

/** Keys the memo bucket's stand-in keeps (its lifecycle rule). */
export const MEMO_WINDOW_KEYS = 10_000;

/** How far back a redelivery's document was first delivered, in deliveries. */
const REDELIVERY_LAG = 200;

export interface MemoryRunSummary {
  deliveries: number;
  documents: number;
  seconds: number;
  outcomes: Record<string, number>;
}

/** Runs the deliveries; the SQLite file lives in a temporary folder removed at the end. */
export async function runMemoryDeliveries(options: MemoryRunOptions): Promise<MemoryRunSummary> {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'docline-memory-'));
  const config = loadConfig({ DOCLINE_DATA_DIR: tmp, DOCLINE_ANALYZER: 'offline', DOCLINE_READER: 'local' });
  const samples = textInvoices();
  const store = await withGroupCommit(
    new SqliteStore({ path: path.join(tmp, 'docline.sqlite') }),
    config,
    silentLogger,
  );
  const outage = new OutageBreaker();
  const deps: HandlerDeps = {
    store: outage.store(store),
    reader: new SampleReader(samples),
    analyzer: outage.analyzer(await ReplayingAnalyzer.of(samples)),
    outage,
    clock: systemClock,
    dedupKeyMode: config.dedupKeyMode,
    limits: { maxObjectBytes: config.maxObjectBytes, allowedContentTypes: config.allowedContentTypes },
    workerVersion: 'bench-memory',
    admission: new QuotaGate(config.admission),
    memo: new AnalysisMemo(new WindowedMemoStore(MEMO_WINDOW_KEYS), {
      // The memo is on, as in production (the offline analyzer's config turns it off: it is free).
      ttlMs: DELIVERY_DEFAULTS.redeliveryWindowDays * 86_400_000,
    }),
  };
  const deadlines = new Deadlines(deliveryBudgetMs({ workerTimeoutSeconds: config.requestTimeoutSeconds }));
  const outcomes: Record<string, number> = {};
  const started = performance.now();
  let next = 0;
  let done = 0;
  let documents = 0;
  const one = async (n: number) => {
    // A redelivery (same messageId) of the document first delivered REDELIVERY_LAG documents ago.
    const redelivery = documents > REDELIVERY_LAG && n % options.redeliveryEvery === 0;
    const document = redelivery ? documents - REDELIVERY_LAG : documents++;
    const sample = samples[document % samples.length]!;
    const body = pushBodyFor(resourceOf(document, sample), `m${document}`);
    const deadline = deadlines.start();
    try {
      const outcome = await handle(parsePush(body), deps, deadline);
      const key = outcome.duplicateAt ? `${outcome.status}@${outcome.duplicateAt}` : outcome.status;
      outcomes[key] = (outcomes[key] ?? 0) + 1;
    } catch (error) {
      const key = `error:${(error as { code?: string }).code ?? 'unknown'}`;
      outcomes[key] = (outcomes[key] ?? 0) + 1;
    } finally {
      deadlines.end(deadline);
    }
    done += 1;
    if (done % options.sampleEvery === 0) options.onSample(sample_(done, deps.memo!));
  };
  try {
    await Promise.all(
      Array.from({ length: options.concurrency }, async () => {
        for (let n = next++; n < options.deliveries; n = next++) await one(n);
      }),
    );
    return { deliveries: done, documents, seconds: (performance.now() - started) / 1000, outcomes };
  } finally {
    await store.close?.();
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** A sample: garbage collected first when the process allows it, so that RSS is what is kept. */
function sample_(deliveries: number, memo: AnalysisMemo): MemorySample {
  (globalThis as { gc?: () => void }).gc?.();
  const usage = process.memoryUsage();
  return { deliveries, rssBytes: usage.rss, heapUsedBytes: usage.heapUsed, memo: memo.footprint() };
}

const TIME_CREATED = new Date().toISOString();

/** The object resource of document `i`: a unique name and generation, one sample invoice's bytes. */
function resourceOf(i: number, sample: { name: string; bytes: Buffer }): ObjectResource {
  const name = `memory/${String(i).padStart(7, '0')}-${sample.name}`;
  const generation = String(1_764_460_800_000_000 + i);
  const id = `${BENCH_BUCKET}/${name}/${generation}`;
  return {
    kind: 'storage#object',
    id,
    selfLink: `https://storage.local/${id}`,
    mediaLink: `https://storage.local/${id}?alt=media`,
    name,
    bucket: BENCH_BUCKET,
    generation,
    metageneration: '1',
    contentType: 'text/plain',
    timeCreated: TIME_CREATED,
    updated: TIME_CREATED,
    storageClass: 'STANDARD',
    timeStorageClassUpdated: TIME_CREATED,
    size: String(sample.bytes.length),
    md5Hash: '',
    crc32c: '',
    etag: generation,
  };
}

/** The bucket's stand-in: every object `memory/NNNNNNN-<sample>` is that sample invoice's bytes. */
class SampleReader implements Reader {
  private readonly byName: Map<string, Buffer>;
  constructor(samples: Array<{ name: string; bytes: Buffer }>) {
    this.byName = new Map(samples.map((s) => [s.name, s.bytes]));
  }
  async read(ref: ObjectRef): Promise<Buffer> {
    const bytes = this.byName.get(ref.name.slice(ref.name.indexOf('-') + 1));
    if (!bytes) throw new Error(`no sample behind ${ref.name}`);
    return bytes;
  }
}

/** The offline analyzer, run once per sample invoice; each copy of a sample gets its answer. */
class ReplayingAnalyzer implements Analyzer {
  private constructor(private readonly answers: Map<string, AnalysisResult>) {}
  static async of(samples: Array<{ name: string; bytes: Buffer }>): Promise<ReplayingAnalyzer> {
    const offline = new OfflineAnalyzer();
    const answers = new Map<string, AnalysisResult>();
    for (const s of samples)
      answers.set(
        s.bytes.toString('latin1'),
        await offline.analyze({ bytes: s.bytes, contentType: 'text/plain', name: s.name }),
      );
    return new ReplayingAnalyzer(answers);
  }
  async analyze(input: AnalyzerInput): Promise<AnalysisResult> {
    const answer = this.answers.get(input.bytes.toString('latin1'));
    if (!answer) throw new Error(`not a sample invoice: ${input.name}`);
    return answer;
  }
}

/**
 * The memo bucket's stand-in: create-only entries and leases like the others, of which it keeps
 * the last `capacity` keys (the bucket's lifecycle rule deletes old objects; in production the
 * bucket is not the worker's memory).
 */
export class WindowedMemoStore implements MemoStore {
  private readonly entries = new Map<string, MemoEntry>();
  private readonly leases = new Map<string, LeaseState>();
  private nextHolder = 1;
  constructor(private readonly capacity: number) {}
  async get(key: string): Promise<MemoEntry | undefined> {
    return this.entries.get(key);
  }
  async create(key: string, entry: MemoEntry): Promise<void> {
    if (!this.entries.has(key)) this.keep(this.entries, key, entry);
  }
  async lease(key: string, expiresAt: Date, now: Date): Promise<LeaseTaken | { heldUntil: Date }> {
    const taken = takeLease(this.leases, key, expiresAt, now, () => String(this.nextHolder++));
    this.keep(this.leases, key, this.leases.get(key)!);
    return taken;
  }
  async renew(key: string, token: string, expiresAt: Date, release = false): Promise<string | undefined> {
    return renewLease(this.leases, key, token, expiresAt, release);
  }
  async hasLease(key: string): Promise<boolean> {
    return this.leases.has(key);
  }
  private keep<V>(map: Map<string, V>, key: string, value: V): void {
    map.set(key, value);
    while (map.size > this.capacity) map.delete(map.keys().next().value!);
  }
}
