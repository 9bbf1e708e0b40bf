import type { Storage } from '@google-cloud/storage';
import { sampleAnalysis } from '../../../sim/samples';
import { GcsMemoStore } from '../../src/adapters/memo-stores/gcs-memo-store';
import { createStorageClient } from '../../src/adapters/readers/gcs-reader';
import { AnalysisMemo } from '../../src/core/memo';
import type { MemoEntry } from '../../src/core/ports';
import { type FakeGcsServer, startFakeGcsServer } from './support/fake-gcs-server';
import { toolVersion } from './support/tool-process';

/*
 * The memo's Cloud Storage adapter against fake-gcs-server (an independent implementation of the
 * JSON API), through the worker's own client factory. What matters: a create is create-only
 * (`ifGenerationMatch: 0` answers 412 when the object exists), a missing entry reads as a miss.
 */

const BUCKET = 'docline-memo-emulated';
const t0 = Date.parse('2026-11-30T09:00:00.000Z');

const entry = (totalTokens: number): MemoEntry => ({
  analysis: sampleAnalysis(),
  model: 'gemini-2.5-flash',
  usage: { promptTokens: totalTokens - 100, outputTokens: 100, totalTokens },
  createdAt: '2026-11-30T04:00:00.000Z',
});

describe(`GcsMemoStore on fake-gcs-server ${toolVersion('fake-gcs-server')}`, () => {
  let server: FakeGcsServer;
  let storage: Storage;
  let store: GcsMemoStore;

  beforeAll(async () => {
    server = await startFakeGcsServer();
    await server.createBucket(BUCKET);
    storage = createStorageClient({ apiEndpoint: server.url, projectId: 'docline-emu', timeoutMs: 5_000 });
    store = new GcsMemoStore({ storage, bucket: BUCKET });
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
  });

  it('reads a key it never kept as a miss', async () => {
    expect(await store.get(AnalysisMemo.key('gs://b/never#1'))).toBeUndefined();
  });

  it('tells whether a key was ever leased, without taking its lease', async () => {
    const lease = AnalysisMemo.leaseKey('gs://b/leased#1');
    expect(await store.hasLease(lease)).toBe(false);
    expect(await store.hasLease(lease)).toBe(false);
    expect(await store.lease(lease, new Date(t0 + 15_000), new Date(t0))).toMatchObject({ earlier: false });
    expect(await store.hasLease(lease)).toBe(true);
  });

  it('keeps the first of racing creates and never replaces it', async () => {
    const key = AnalysisMemo.key('gs://b/race#1');
    await Promise.all([1000, 2000, 3000].map((t) => store.create(key, entry(t))));
    const kept = await store.get(key);
    expect([1000, 2000, 3000]).toContain(kept?.usage.totalTokens);
    await store.create(key, entry(9999));
    expect(await store.get(key)).toEqual(kept);
    const [files] = await storage.bucket(BUCKET).getFiles({ prefix: 'analyses/' });
    expect(files.filter((f) => f.name.endsWith(`${key.split('/')[1]}.json`))).toHaveLength(1);
  });

  it('interleaving 4: a lease is one object, renewed in place for its holder; a concurrent delivery reads the renewal', async () => {
    const key = AnalysisMemo.leaseKey('gs://b/lease#1');
    const mine = (await store.lease(key, new Date(t0 + 15_000), new Date(t0))) as { token: string };
    expect(mine.token).toBeDefined();
    // 20 s later the holder is still working and renews; a concurrent delivery asks now.
    const renewed = await store.renew(key, mine.token, new Date(t0 + 35_000));
    expect(renewed).toBeDefined();
    expect(await store.lease(key, new Date(t0 + 36_000), new Date(t0 + 21_000))).toEqual({
      heldUntil: new Date(t0 + 35_000),
    });
    const [objects] = await storage.bucket(BUCKET).getFiles({ prefix: `leases/${key}` });
    expect(objects.map((o) => o.name)).toEqual([`leases/${key}.json`]);
    // Renewals stop (the holder died): once expired, the next delivery takes it over, and the
    // old holder's token renews nothing.
    const next = await store.lease(key, new Date(t0 + 51_000), new Date(t0 + 36_000));
    expect(next).toMatchObject({ earlier: true });
    await expect(store.renew(key, renewed!, new Date(t0 + 60_000))).resolves.toBeUndefined();
  });

  it('lets one of two deliveries that find a lease ended take it (ifGenerationMatch on the real server)', async () => {
    const key = AnalysisMemo.leaseKey('gs://b/lease#2');
    const first = (await store.lease(key, new Date(t0 + 15_000), new Date(t0))) as { token: string };
    // Released by its holder (its write answered).
    await store.renew(key, first.token, new Date(t0 + 2_000), true);
    const other = new GcsMemoStore({ storage, bucket: BUCKET, sleep: async () => {} });
    const answers = await Promise.all([
      store.lease(key, new Date(t0 + 20_000), new Date(t0 + 5_000)),
      other.lease(key, new Date(t0 + 21_000), new Date(t0 + 5_000)),
    ]);
    expect(answers.filter((a) => 'token' in a)).toHaveLength(1);
    expect(answers.filter((a) => 'heldUntil' in a)).toHaveLength(1);
  });

  it('never lets a slow renewal that lands after a later one shorten a write’s bound', async () => {
    const key = AnalysisMemo.leaseKey('gs://b/lease#3');
    // The same real client, except that the next renewal's upload waits until released.
    const slow = createStorageClient({ apiEndpoint: server.url, projectId: 'docline-emu', timeoutMs: 5_000 });
    let release = () => {};
    let hold: Promise<void> | undefined;
    const bucketOf = slow.bucket.bind(slow);
    slow.bucket = ((name: string, options?: object) => {
      const bucket = bucketOf(name, options);
      const fileOf = bucket.file.bind(bucket);
      bucket.file = ((objectName: string, fileOptions?: object) => {
        const file = fileOf(objectName, fileOptions);
        if (hold) {
          const gate = hold;
          hold = undefined;
          const save = file.save.bind(file);
          file.save = (async (...args: Parameters<typeof save>) => {
            await gate;
            return save(...args);
          }) as typeof file.save;
        }
        return file;
      }) as typeof bucket.file;
      return bucket;
    }) as typeof slow.bucket;
    const holder = new GcsMemoStore({ storage: slow, bucket: BUCKET, sleep: async () => {} });

    const mine = (await holder.lease(key, new Date(t0 + 15_000), new Date(t0))) as { token: string };
    hold = new Promise<void>((resolve) => (release = resolve));
    const heartbeat = holder.renew(key, mine.token, new Date(t0 + 20_000));
    // The write turn moves the lease past its statement's bound; that renewal lands first.
    await holder.renew(key, mine.token, new Date(t0 + 513_000));
    release();
    await heartbeat;
    // A concurrent delivery (another instance, the plain client) reads the bound.
    expect(await store.lease(key, new Date(t0 + 30_000), new Date(t0 + 15_000))).toEqual({
      heldUntil: new Date(t0 + 513_000),
    });
  });
});
