import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SqliteStore } from '../../worker/src/adapters/stores/sqlite-store';
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import { objectUri, RECONCILE_ATTRIBUTE } from '../../worker/src/reconcile/notification';
import { APPLY_CONFIRM_THRESHOLD, RECONCILE_EXIT } from '../../worker/src/reconcile/reconcile';
import { runReconcile } from '../lib/e2e-targets';
import { LOCAL_NAMES, type Pipeline, startPipeline } from '../lib/pipeline';
import { runLocalCommand } from './support/command';

/*
 * `npm run reconcile` against a running local pipeline: the real Pub/Sub emulator, the worker, the
 * folder bucket and SQLite. Objects are written into the bucket WITHOUT announcing them, standing
 * in for documents that predate the notification.
 */

describe('npm run reconcile on the local pipeline', () => {
  let dir: string;
  let dataDir: string;
  let pipeline: Pipeline;
  let store: SqliteStore;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'docline-reconcile-'));
    dataDir = path.join(dir, 'data');
    pipeline = await startPipeline({ dataDir });
    store = new SqliteStore({ path: dataDirLayout(dataDir).sqlite });
  }, 120_000);
  afterAll(async () => {
    await store?.close();
    await pipeline?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const invoice = (n: number) =>
    Buffer.from(`FACTURE\nSociété Reconcile SARL\nFacture n° R-${n}\nTotal TTC : ${n},00 €\n`);

  /** Stores an object without announcing it; returns its URI. */
  async function writeSilently(name: string, bytes: Buffer): Promise<string> {
    const { resource } = await pipeline.bucket.put(pipeline.bucketName, name, bytes, 'text/plain');
    return objectUri(resource);
  }

  const reconcile = (args: string[], data = dataDir) => runReconcile([...args, '--data-dir', data], {});

  /** Resolves once the worker has answered every one of these messages. */
  const answered = (ids: string[]) =>
    Promise.all(
      ids.map((id) => pipeline.worker.waitForLine((l) => l.messageId === id && l.status !== undefined)),
    );

  it('reports objects without a row (exit 1), brings them in with --apply, and a second --apply changes nothing', async () => {
    const uris = [
      await writeSilently('old/a.txt', invoice(1)),
      await writeSilently('old/b.txt', invoice(2)),
      await writeSilently('old/c.txt', invoice(3)),
    ];
    // As a user runs it: a process, its exit code and its lines.
    const report = await runLocalCommand('reconcile.ts', ['--prefix', 'old/', '--older-than', '0'], dataDir);
    expect(report.code).toBe(RECONCILE_EXIT.missing);
    expect(report.stdout).toContain('3 objects listed, 0 with a line, 3 missing, 0 too young to judge');
    for (const uri of uris) expect(report.stdout).toContain(`missing  ${uri}`);

    // Too young by default (written just now): nothing is judged missing.
    const young = await reconcile(['--prefix', 'old/']);
    expect(young.code).toBe(RECONCILE_EXIT.ok);
    expect(young.report).toMatchObject({ listed: 3, missing: 0, tooYoung: 3 });

    const applied = await reconcile(['--prefix', 'old/', '--older-than', '0', '--apply']);
    expect(applied.code).toBe(RECONCILE_EXIT.ok);
    expect(applied.lines).toContain(
      'announced 3 document(s) again; each gets its line as the pipeline processes it',
    );
    expect(applied.lines.some((l) => /^3 document\(s\) to announce; estimated cost \$/.test(l))).toBe(true);
    await answered(applied.announced!);
    expect(uris.map((u) => store.rowsWhere('object_uri', u).map((r) => r.status))).toEqual([
      ['ok'],
      ['ok'],
      ['ok'],
    ]);

    const again = await reconcile(['--prefix', 'old/', '--older-than', '0', '--apply']);
    expect(again.code).toBe(RECONCILE_EXIT.ok);
    expect(again.report).toMatchObject({ listed: 3, withLine: 3, missing: 0 });
    expect(again.announced).toBeUndefined();
  });

  it('gives an object one row when reconcile races a late real notification of it', async () => {
    const { resource, overwroteGeneration } = await pipeline.bucket.put(
      pipeline.bucketName,
      'race/late.txt',
      invoice(4),
      'text/plain',
    );
    // Reconcile announces the object, and the real notification arrives late, before either is
    // processed: both messages are in flight for the same object at once.
    const reconciled = await reconcile(['--prefix', 'race/', '--older-than', '0', '--apply']);
    const real = await pipeline.announcer.announce(resource, overwroteGeneration);
    expect(reconciled.announced).toHaveLength(1);
    const lines = await answered([...real, ...reconciled.announced!]);
    const rows = store.rowsWhere('object_uri', objectUri(resource));
    expect(rows).toHaveLength(1);
    expect(rows[0]!.status).toBe('ok');
    expect(lines.map((l) => l.status).sort()).toEqual(['duplicate', 'ok']);
  });

  it('publishes what Cloud Storage would have sent, plus the reconcile attribute', async () => {
    const tap = 'reconcile-tap';
    await pipeline.pubsub.ensureSubscription(tap, { topic: LOCAL_NAMES.topic, ackDeadlineSeconds: 60 });
    try {
      const uri = await writeSilently('marked/x.txt', invoice(5));
      const applied = await reconcile(['--prefix', 'marked/', '--older-than', '0', '--apply']);
      const [line] = await answered(applied.announced!);
      expect(line!.objectUri).toBe(uri);
      let tapped: Awaited<ReturnType<typeof pipeline.pubsub.pull>> = [];
      for (let i = 0; i < 50 && tapped.length === 0; i++) tapped = await pipeline.pubsub.pull(tap, 10);
      const message = tapped.find((m) => m.message.messageId === applied.announced![0])!.message;
      expect(message.attributes).toMatchObject({
        eventType: 'OBJECT_FINALIZE',
        payloadFormat: 'JSON_API_V1',
        bucketId: pipeline.bucketName,
        objectId: 'marked/x.txt',
        [RECONCILE_ATTRIBUTE]: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/),
      });
      const resource = JSON.parse(Buffer.from(message.data!, 'base64').toString());
      expect(objectUri(resource)).toBe(uri);
    } finally {
      await pipeline.pubsub.deleteSubscription(tap);
    }
  });

  it(`refuses --apply above ${APPLY_CONFIRM_THRESHOLD} documents without --yes (exit 2), and goes ahead with it`, async () => {
    const count = APPLY_CONFIRM_THRESHOLD + 1;
    for (let i = 0; i < count; i++) await writeSilently(`bulk/${i}.txt`, invoice(100 + i));
    const refused = await reconcile(['--prefix', 'bulk/', '--older-than', '0', '--apply']);
    expect(refused.code).toBe(RECONCILE_EXIT.error);
    expect(refused.lines.at(-1)).toBe(
      `ERROR: --apply would announce ${count} documents (more than ${APPLY_CONFIRM_THRESHOLD}): check the estimate above and add --yes to go ahead.`,
    );
    expect(refused.announced).toBeUndefined();

    const confirmed = await reconcile(['--prefix', 'bulk/', '--older-than', '0', '--apply', '--yes']);
    expect(confirmed.code).toBe(RECONCILE_EXIT.ok);
    expect(confirmed.announced).toHaveLength(count);
    await answered(confirmed.announced!);
    const after = await reconcile(['--prefix', 'bulk/', '--older-than', '0']);
    expect(after.report).toMatchObject({ listed: count, withLine: count, missing: 0 });
  }, 120_000);

  it('refuses --apply when the pipeline runs with DEDUP_KEY=message, and says why (exit 2)', async () => {
    // The same running pipeline, described as message mode (what `npm start -- --dedup-key message` writes).
    const other = path.join(dir, 'message-mode');
    mkdirSync(other, { recursive: true });
    const state = JSON.parse(readFileSync(dataDirLayout(dataDir).pipelineState, 'utf8'));
    writeFileSync(dataDirLayout(other).pipelineState, JSON.stringify({ ...state, dedupKeyMode: 'message' }));
    await writeSilently('message/y.txt', invoice(6));
    const refused = await reconcile(['--prefix', 'message/', '--older-than', '0', '--apply'], other);
    expect(refused.code).toBe(RECONCILE_EXIT.error);
    expect(refused.lines).toEqual([
      expect.stringMatching(/^ERROR: --apply refused: the pipeline runs with DEDUP_KEY=message/),
    ]);
    const report = await reconcile(['--prefix', 'message/', '--older-than', '0'], other);
    expect(report.code).toBe(RECONCILE_EXIT.missing);
  });

  it('answers a usage error with exit 2 and the usage', async () => {
    const result = await reconcile(['--apply', '--older-than', 'soon']);
    expect(result.code).toBe(RECONCILE_EXIT.error);
    expect(result.lines).toEqual([
      expect.stringMatching(/^ERROR: --older-than must be a duration .* usage: npm run reconcile/),
    ]);
    expect((await reconcile(['extra'])).code).toBe(RECONCILE_EXIT.error);
    expect((await reconcile(['--target', 'moon'])).code).toBe(RECONCILE_EXIT.error);
  });
});
