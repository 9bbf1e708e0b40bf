import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LocalBucket } from '../../local/lib/local-bucket';
import { postPush, startWorkerProcess, type WorkerProcess } from '../../local/lib/worker-process';
import { SqliteStore } from '../src/adapters/stores/sqlite-store';
import { pushBody } from './support/builders';

describe('the worker as a process (npm run worker)', () => {
  let dataDir: string;
  let worker: WorkerProcess;

  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'docline-worker-'));
    worker = await startWorkerProcess({ env: { DOCLINE_DATA_DIR: dataDir, WORKER_VERSION: 'process-test' } });
  });
  afterAll(async () => {
    await worker?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('serves /healthz on embedded defaults', async () => {
    const res = await fetch(`${worker.url}/healthz`);
    expect(res.status).toBe(200);
  });

  it('turns a push over real HTTP into one row, then answers duplicate, with one log line each', async () => {
    const bucket = new LocalBucket(path.join(dataDir, 'bucket'));
    const text = 'FACTURE\nFacture n° F-1\nTotal TTC : 120,00 €\n';
    const { resource } = await bucket.put('docline-local', 'facture-1.txt', Buffer.from(text), 'text/plain');
    const body = pushBody('501', {
      bucket: 'docline-local',
      name: 'facture-1.txt',
      generation: resource.generation,
      size: text.length,
    });
    const post = () => postPush(worker.url, body);
    const first = await post();
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ status: 'ok', messageId: '501' });
    const second = await post();
    expect(await second.json()).toEqual({ status: 'duplicate', messageId: '501' });
    // The log travels through a pipe and may arrive after the HTTP answer.
    await worker.waitForLine((l) => l.messageId === '501' && l.status === 'duplicate');
    const lines = worker.lines.filter((l) => l.messageId === '501');
    expect(lines.map((l) => [l.severity, l.status])).toEqual([
      ['INFO', 'ok'],
      ['INFO', 'duplicate'],
    ]);
    const store = new SqliteStore({ path: path.join(dataDir, 'docline.sqlite') });
    expect(store.documents().map((r) => [r.message_id, r.status, r.model, r.worker_version])).toEqual([
      ['501', 'ok', 'offline', 'process-test'],
    ]);
    await store.close();
  });

  it('refuses to start with an invalid configuration and lists every problem', async () => {
    await expect(
      startWorkerProcess({ env: { DOCLINE_DATA_DIR: dataDir, DEDUP_KEY: 'nope', MAX_OBJECT_BYTES: '-1' } }),
    ).rejects.toThrow(/DEDUP_KEY must be one of object, message[\s\S]*MAX_OBJECT_BYTES/);
  });

  it('finishes cleanly on SIGTERM', async () => {
    const other = await startWorkerProcess({ env: { DOCLINE_DATA_DIR: dataDir } });
    await other.stop();
    expect(await other.exited).toEqual({ code: 0, signal: null });
  });

  it('starts quietly below INFO (no listening line) and is found through /healthz', async () => {
    const quiet = await startWorkerProcess({ env: { DOCLINE_DATA_DIR: dataDir, LOG_LEVEL: 'WARNING' } });
    try {
      expect((await fetch(`${quiet.url}/healthz`)).status).toBe(200);
      expect(quiet.lines.filter((l) => l.severity === 'INFO')).toEqual([]);
    } finally {
      await quiet.stop();
    }
  });
});
