import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { localGenerationPath } from '../../worker/src/adapters/readers/local-bucket';
import { SqliteStore } from '../../worker/src/adapters/stores/sqlite-store';
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

  it('upload takes several files at once; two files of one object name become two generations in the order given', async () => {
    const files: string[] = [];
    for (const folder of ['first', 'second']) {
      mkdirSync(path.join(dir, folder));
      const file = path.join(dir, folder, 'same-name.txt');
      writeFileSync(file, `FACTURE\nSociété ${folder} SARL\nFacture n° F-${folder}\nTotal TTC : 10,00 €\n`);
      files.push(file);
    }
    for (let i = 0; i < 6; i++) {
      const file = path.join(dir, `batch-${i}.txt`);
      writeFileSync(file, `FACTURE\nSociété Lot SARL\nFacture n° L-${i}\nTotal TTC : ${i + 1},00 €\n`);
      files.push(file);
    }
    const uploaded = await command('upload.ts', ['--concurrency', '3', ...files], path.join(dir, 'data'));
    expect(uploaded.code).toBe(0);
    const lines = uploaded.stdout.split('\n').filter((l) => l.startsWith('uploaded '));
    expect(lines).toHaveLength(8);
    const generations = lines.filter((l) => l.includes(' same-name.txt#')).map((l) => /#(\d+)/.exec(l)![1]!);
    expect(generations).toHaveLength(2);
    expect(BigInt(generations[1]!)).toBeGreaterThan(BigInt(generations[0]!));
    // The live generation is the file given last: the later one was stored after the earlier one.
    const live = await pipeline.bucket.liveGeneration(pipeline.bucketName, 'same-name.txt');
    expect(live).toBe(generations[1]);
    const stored = localGenerationPath(pipeline.bucket.root, {
      bucket: pipeline.bucketName,
      name: 'same-name.txt',
      generation: live!,
    });
    expect(readFileSync(stored, 'utf8')).toBe(readFileSync(files[1]!, 'utf8'));
  });

  it('upload refuses a concurrency that is not a whole number in range', async () => {
    const result = await command('upload.ts', ['--concurrency', '0', 'x.txt'], path.join(dir, 'data'));
    expect(result.code).toBe(2);
    expect(result.stdout).toMatch(/--concurrency must be a whole number from 1 to \d+/);
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
