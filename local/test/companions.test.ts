import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SqliteStore } from '../../worker/src/adapters/sqlite-store';
import { LOCAL_NAMES, type Pipeline, startPipeline } from '../lib/pipeline';
import { runLocalCommand } from './support/command';

/** Runs a companion command (`npm run upload|rows|dlq`) against a data dir; stdout then stderr. */
async function command(script: string, args: string[], dataDir: string) {
  const result = await runLocalCommand(script, args, dataDir);
  return { code: result.code, stdout: `${result.stdout}${result.stderr}` };
}

describe('the companions of a running pipeline: upload, rows, dlq', () => {
  let dir: string;
  let pipeline: Pipeline;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'docline-companions-'));
    pipeline = await startPipeline({
      dataDir: path.join(dir, 'data'),
      settings: { minRetryBackoffSeconds: 1, maxRetryBackoffSeconds: 2, maxDeliveryAttempts: 5 },
    });
  }, 120_000);
  afterAll(async () => {
    await pipeline?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const rowsFor = (name: string) => {
    const store = new SqliteStore({ path: path.join(dir, 'data', 'docline.sqlite') });
    try {
      return store.rowsWhere('object_name', name);
    } finally {
      void store.close();
    }
  };

  it('upload stores a file as a new generation and announces it; rows shows its row', async () => {
    const file = path.join(dir, 'facture-777.txt');
    writeFileSync(file, 'FACTURE\nSociété Test SARL\nFacture n° F-777\nTotal TTC : 1 234,56 €\n');
    const uploaded = await command('upload.ts', [file], path.join(dir, 'data'));
    expect(uploaded.stdout).toMatch(/^uploaded {3}facture-777\.txt#\d+ \(message \d+\)$/m);
    await pipeline.worker.waitForLine(
      (l) => l.objectUri?.includes('facture-777.txt') === true && l.status === 'ok',
    );
    expect(rowsFor('facture-777.txt').map((r) => r.status)).toEqual(['ok']);
    const table = await command('rows.ts', [], path.join(dir, 'data'));
    expect(table.stdout).toMatch(/ok\s+facture-777\.txt#\d+\s+Société Test SARL\s+1234\.56 EUR/);
  });

  it('dlq lists a dead letter without removing it, and replay re-publishes it to the topic', async () => {
    // A notification for an object whose push body is over the worker's limit can never be accepted.
    const [poisonId] = await pipeline.pubsub.publish(LOCAL_NAMES.topic, [
      { data: Buffer.alloc(400 * 1024, 'x'), attributes: { test: 'poison' } },
    ]);
    expect(poisonId).toBeDefined();
    let listed = { code: 0, stdout: '' };
    // Dead-lettering takes the configured five attempts; poll the command as an operator would.
    for (let i = 0; i < 120 && !/^1 dead letters$/m.test(listed.stdout); i++) {
      listed = await command('dlq.ts', ['list'], path.join(dir, 'data'));
      if (!/^1 dead letters$/m.test(listed.stdout)) await new Promise((r) => setTimeout(r, 500));
    }
    expect(listed.stdout).toMatch(/after 5 deliveries/);
    expect((await command('dlq.ts', ['list'], path.join(dir, 'data'))).stdout).toMatch(/^1 dead letters$/m);

    const replayed = await command('dlq.ts', ['replay'], path.join(dir, 'data'));
    expect(replayed.stdout).toMatch(/^replayed {3}\d+ → new message \d+$/m);
    expect(replayed.stdout).toMatch(/^1 dead letters replayed to docline-uploads$/m);
    expect((await command('dlq.ts', ['list'], path.join(dir, 'data'))).stdout).toMatch(/^0 dead letters$/m);
  });

  it('explains what to do when no pipeline runs', async () => {
    const result = await command('dlq.ts', ['list'], path.join(dir, 'nowhere'));
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('start one with `npm start` first');
  });
});
