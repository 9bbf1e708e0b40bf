import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { postPush } from '../../local/lib/worker-process';
import { sampleAnalysis } from '../../sim/samples';
import { MemoryMemoStore } from '../src/adapters/memo-stores/memory-memo-store';
import { GroupCommitStore } from '../src/adapters/stores/group-commit-store';
import { SqliteStore } from '../src/adapters/stores/sqlite-store';
import { createApp } from '../src/app';
import { loadConfig } from '../src/config';
import type { AnalysisResult } from '../src/contract/analysis';
import { Deadlines } from '../src/core/deadline';
import { objectDedupKey } from '../src/core/event';
import { AnalysisMemo } from '../src/core/memo';
import type { Analyzer, AnalyzerInput, LeaseTaken, Store } from '../src/core/ports';
import { type RunningWorker, serve } from '../src/main';
import { pushBody } from './support/builders';
import { MemoryLogger, MemoryReader } from './support/fakes';
import { handlerDeps } from './support/handler';

const BUCKET = 'acme-invoices-dev';
const GENERATION = '1764460800123456';
const INVOICE = 'FACTURE N° F-2026-0042\nTotal TTC : 1 234,56 €\n';

/** Answers at once, except for the objects it is told to hold: those stay in analysis. */
class GatedAnalyzer implements Analyzer {
  readonly started: string[] = [];
  constructor(private readonly held: Set<string>) {}
  analyze(input: AnalyzerInput): Promise<AnalysisResult> {
    this.started.push(input.name);
    if (this.held.has(input.name)) return new Promise(() => {});
    return Promise.resolve({
      analysis: sampleAnalysis(),
      model: 'gated',
      usage: { promptTokens: 10, outputTokens: 5, totalTokens: 15 },
    });
  }
}

/** A memo store that tells which keys were leased. */
class LeaseSpy extends MemoryMemoStore {
  readonly leased: string[] = [];
  override async lease(key: string, expiresAt: Date, now: Date): Promise<LeaseTaken | { heldUntil: Date }> {
    this.leased.push(key);
    return super.lease(key, expiresAt, now);
  }
}

/** Waits until `condition` holds, looking again every few milliseconds. */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
}

describe('interleaving 8: scale-in', () => {
  let dir: string;
  let worker: RunningWorker | undefined;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'docline-shutdown-'));
  });
  afterEach(async () => {
    await worker?.stop(0);
    worker = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  it('on SIGTERM answers every waiting delivery at once, writes the batched row, and stops within the grace period', async () => {
    const config = loadConfig({
      DOCLINE_DATA_DIR: dir,
      PORT: '0',
      // Two analyses at once: two documents of the largest size fill the memory budget.
      ANALYZER_MAX_IN_FLIGHT: '2',
      MAX_OBJECT_BYTES: String(Buffer.byteLength(INVOICE)),
      // The offline analyzer stands in for a paid one: keep the memo (and its leases) in front of it.
      MEMO: 'on',
      // Rows wait 10 s for their batch: longer than the grace period.
      BATCH_MAX_WAIT_MS: '10000',
      MERGE_MIN_INTERVAL_MS: '0',
    });
    const dbPath = path.join(dir, 'rows.sqlite');
    const reader = new MemoryReader();
    for (const name of ['a.txt', 'b.txt', 'c.txt', 'd.txt']) reader.put(BUCKET, name, GENERATION, INVOICE);
    const analyzer = new GatedAnalyzer(new Set(['a.txt']));
    const memo = new LeaseSpy();
    const dedupKeyOf = (name: string) => objectDedupKey({ bucket: BUCKET, name, generation: GENERATION });
    const keyOf = (name: string) => AnalysisMemo.leaseKey(dedupKeyOf(name));
    // Another instance holds the lease of d.txt and is still analysing it.
    await memo.lease(keyOf('d.txt'), new Date(Date.now() + 300_000), new Date());
    const sqlite = new SqliteStore({ path: dbPath });
    const batches = new GroupCommitStore(sqlite, { maxRows: 500, maxWaitMs: 10_000, minIntervalMs: 0 });
    // Lookups go straight to SQLite, so that each delivery reaches its place at once; writes wait
    // in group commit's batch.
    const store: Store = {
      seen: (key) => sqlite.seen(key),
      record: (row, deadline) => batches.record(row, deadline),
      ping: () => sqlite.ping(),
      drain: () => batches.drain(),
      close: () => batches.close(),
    };
    const running = await serve(config, { store, reader, analyzer, memo }, new MemoryLogger());
    worker = running;
    const push = (id: string, name: string) => {
      const sentAt = performance.now();
      return postPush(
        `http://127.0.0.1:${running.port}`,
        pushBody(id, { name, size: Buffer.byteLength(INVOICE) }),
      ).then(async (res) => ({
        status: res.status,
        body: await res.json(),
        atMs: performance.now() - sentAt,
      }));
    };

    // c: analysed, its row waits in the write batch.
    const c = push('3', 'c.txt');
    await until(() => memo.entries.has(AnalysisMemo.key(dedupKeyOf('c.txt'))));
    // a: in analysis.
    const a = push('1', 'a.txt');
    await until(() => analyzer.started.includes('a.txt'));
    // d: admitted, waiting for the other instance's lease.
    const d = push('4', 'd.txt');
    await until(() => memo.leased.filter((k) => k === keyOf('d.txt')).length === 2);
    // b: waiting for a turn at the analyzer (both places are taken).
    const b = push('2', 'b.txt');
    await until(() => running.admission.queued === 1);

    const stopAt = performance.now();
    // A short grace period for the test (Cloud Run gives 10 s): 5 s less 2 s to answer.
    const stopped = running.stop(5_000);
    const [answerB, answerD, answerC] = await Promise.all([b, d, c]);
    const promptlyMs = performance.now() - stopAt;
    // The waits end at once with a transient answer: Pub/Sub delivers them again elsewhere.
    expect(answerB).toMatchObject({ status: 503, body: { error: 'transient', cause: 'shutting_down' } });
    expect(answerD).toMatchObject({ status: 503, body: { error: 'transient', cause: 'shutting_down' } });
    // The batched row is written now, not after its 10 s wait.
    expect(answerC).toMatchObject({ status: 200, body: { status: 'ok' } });
    expect(promptlyMs).toBeLessThan(1_000);
    // The analysis under way keeps the grace period less the margin to answer (5 s - 2 s), then 503.
    expect(await a).toMatchObject({ status: 503, body: { error: 'transient', cause: 'deadline_exceeded' } });
    await stopped;
    expect(performance.now() - stopAt).toBeLessThan(5_000);
    worker = undefined;

    const rows = new SqliteStore({ path: dbPath });
    expect(rows.documents().map((r) => r.object_name)).toEqual(['c.txt']);
    await rows.close();
  });

  it('answers a push that arrives while the instance drains with 503 at once', async () => {
    const { deps } = handlerDeps();
    const deadlines = new Deadlines(498_000);
    const app = createApp({ ...deps, logger: new MemoryLogger(), pushBodyLimitBytes: 16 * 1024, deadlines });
    deadlines.drain(8_000);
    const res = await request(app).post('/push').send(pushBody('9'));
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ error: 'transient', cause: 'shutting_down' });
  });
});
