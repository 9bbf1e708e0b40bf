import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { SqliteStore } from '../src/adapters/stores/sqlite-store';
import { testRow } from './support/builders';
import { describeBatchStoreContract, describeStoreContract } from './support/store-contract';

const inMemory = async () => {
  const store = new SqliteStore({ path: ':memory:' });
  return { store, rowsFor: async (key: string) => store.rowsFor(key), cleanup: () => store.close() };
};
describeStoreContract('SqliteStore', inMemory);
describeBatchStoreContract('SqliteStore', inMemory);

/** Starts a racer process and resolves with a handle once it said "ready". */
function racer(dbPath: string, row: object) {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(__dirname, 'support/sqlite-racer.ts'), dbPath, JSON.stringify(row)],
    { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, NODE_NO_WARNINGS: '1' } },
  );
  const lines = createInterface({ input: child.stdout });
  const output: string[] = [];
  const ready = new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`racer exited early (${code}): ${output.join(' ')}`)));
    lines.on('line', (line) => {
      output.push(line);
      if (line === 'ready') resolve();
    });
  });
  const result = new Promise<string>((resolve) => child.once('exit', () => resolve(output.at(-1) ?? '')));
  return { ready, result, go: () => child.stdin.write('go\n') };
}

describe('SqliteStore across processes', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'docline-sqlite-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('lets exactly one of two OS processes insert the same key at once', async () => {
    const dbPath = path.join(dir, 'shared.sqlite');
    const row = testRow();
    const racers = [racer(dbPath, { ...row, message_id: '1' }), racer(dbPath, { ...row, message_id: '2' })];
    await Promise.all(racers.map((r) => r.ready));
    for (const r of racers) r.go();
    const results = await Promise.all(racers.map((r) => r.result));
    expect(results.sort()).toEqual(['inserted=false', 'inserted=true']);
    const store = new SqliteStore({ path: dbPath });
    expect(store.rowsFor(row.dedup_key)).toHaveLength(1);
    await store.close();
  });

  describe('interleaving 6: a 200 before the commit is durable', () => {
    it('acknowledges only durable commits: WAL with synchronous = FULL, read back from SQLite', async () => {
      const store = new SqliteStore({ path: path.join(dir, 'durable.sqlite') });
      // NORMAL in WAL mode skips the fsync at commit: a power loss could take an acknowledged row.
      expect(store.durability()).toEqual({ journalMode: 'wal', synchronous: 'FULL' });
      await store.close();
    });
  });

  it('keeps its rows across a restart (same file)', async () => {
    const dbPath = path.join(dir, 'restart.sqlite');
    const row = testRow();
    const first = new SqliteStore({ path: dbPath });
    await first.record(row);
    await first.close();
    const second = new SqliteStore({ path: dbPath });
    expect(await second.seen(row.dedup_key)).toBe(true);
    await second.close();
  });

  it('serves the four views', async () => {
    // Rows are stamped at their commit, by the store's clock.
    const store = new SqliteStore({
      path: ':memory:',
      clock: { now: () => new Date('2026-11-30T01:00:00.000Z') },
    });
    const a = testRow({ processed_at: '2026-11-30T01:00:00.000Z' });
    await store.record(a);
    await store.record(
      testRow({ status: 'rejected', reason: 'too_large', processed_at: '2026-11-30T02:00:00.000Z' }),
    );
    expect(store.view('documents')).toHaveLength(2);
    expect(store.view('duplicate_objects')).toHaveLength(0);
    expect(store.view('delivery_stats')).toEqual([
      expect.objectContaining({
        day: '2026-11-30',
        row_count: 2,
        ok_rows: 1,
        rejected_rows: 1,
        duplicate_rows: 0,
      }),
    ]);
    await store.close();
  });
});
