import type { Storage } from '@google-cloud/storage';
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

const entry = (totalTokens: number): MemoEntry => ({
  analysis: {
    document_type: 'invoice',
    language: 'fr',
    supplier_name: 'Atelier Dupont SARL',
    supplier_vat_id: null,
    supplier_siren: null,
    supplier_siret: null,
    customer_name: null,
    invoice_number: 'F-2026-0042',
    issue_date: '2026-11-30',
    due_date: null,
    currency: 'EUR',
    net_amount: 1028.8,
    tax_amount: 205.76,
    total_amount: 1234.56,
    line_items: [],
  },
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
    expect(await store.lease(lease, new Date(Date.parse('2026-11-30T09:00:15.000Z')))).toBeUndefined();
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

  it('interleaving 4: renews a lease with create-only objects, and a concurrent delivery reads the renewal', async () => {
    const key = AnalysisMemo.key('gs://b/lease#1');
    const t0 = Date.parse('2026-11-30T09:00:00.000Z');
    expect(await store.lease(key, new Date(t0 + 15_000))).toBeUndefined();
    // 20 s later the holder is still working and renews; a concurrent delivery asks now.
    await store.renew(key, new Date(t0 + 35_000));
    expect((await store.lease(key, new Date(t0 + 36_000)))?.getTime()).toBe(t0 + 35_000);
    // Renewals stop (the holder died): the lease reads as its last renewal left it, and expires.
    expect((await store.lease(key, new Date(t0 + 90_000)))?.getTime()).toBe(t0 + 35_000);
    const [objects] = await storage.bucket(BUCKET).getFiles({ prefix: `leases/${key}` });
    // The renewal is named after when it was issued and the expiry it sets.
    const names = objects.map((o) => o.name).sort();
    expect(names).toHaveLength(2);
    expect(names[0]).toBe(`leases/${key}.json`);
    expect(names[1]).toMatch(new RegExp(`^leases/${key}/\\d+-${t0 + 35_000}\\.json$`));
  });

  it('soak I4: the last renewal counts, whether it moves the lease far ahead (a write’s bound) or back to now (its write answered)', async () => {
    const key = AnalysisMemo.key('gs://b/lease#2');
    const t0 = Date.parse('2026-11-30T09:00:00.000Z');
    expect(await store.lease(key, new Date(t0 + 15_000))).toBeUndefined();
    await store.renew(key, new Date(t0 + 20_000));
    // The write turn moves it past its statement's bound: far beyond any caller's own expiry.
    await store.renew(key, new Date(t0 + 513_000));
    expect((await store.lease(key, new Date(t0 + 25_000)))?.getTime()).toBe(t0 + 513_000);
    // A heartbeat after that renews to the same bound (never shorter); then the write answers.
    await store.renew(key, new Date(t0 + 513_000));
    await store.renew(key, new Date(t0 + 40_000));
    expect((await store.lease(key, new Date(t0 + 55_000)))?.getTime()).toBe(t0 + 40_000);
  });
  it('counts the renewal issued last, not the one that landed last: a slow older renewal never shortens a write’s bound', async () => {
    const key = AnalysisMemo.key('gs://b/lease#3');
    const t0 = Date.parse('2026-11-30T09:00:00.000Z');
    let nowMs = t0;
    // The same real client, except that the next renewal's upload waits until released.
    const slow = createStorageClient({ apiEndpoint: server.url, projectId: 'docline-emu', timeoutMs: 5_000 });
    let release = () => {};
    let hold: Promise<void> | undefined = new Promise<void>((resolve) => (release = resolve));
    const bucketOf = slow.bucket.bind(slow);
    slow.bucket = ((name: string, options?: object) => {
      const bucket = bucketOf(name, options);
      const fileOf = bucket.file.bind(bucket);
      bucket.file = ((objectName: string, fileOptions?: object) => {
        const file = fileOf(objectName, fileOptions);
        if (hold && objectName.startsWith(`leases/${key}/`)) {
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
    const holder = new GcsMemoStore({ storage: slow, bucket: BUCKET, clock: { now: () => new Date(nowMs) } });

    expect(await holder.lease(key, new Date(t0 + 15_000))).toBeUndefined();
    nowMs = t0 + 5_000;
    const heartbeat = holder.renew(key, new Date(t0 + 20_000));
    // The write turn moves the lease past its statement's bound; that renewal lands first.
    nowMs = t0 + 6_000;
    await holder.renew(key, new Date(t0 + 513_000));
    release();
    await heartbeat;
    // The next heartbeat renews to the same bound.
    nowMs = t0 + 10_000;
    await holder.renew(key, new Date(t0 + 513_000));
    // A concurrent delivery (another instance, the plain client) reads the bound.
    expect((await store.lease(key, new Date(t0 + 30_000)))?.getTime()).toBe(t0 + 513_000);
    const [renewals] = await storage.bucket(BUCKET).getFiles({ prefix: `leases/${key}/` });
    expect(renewals).toHaveLength(3);
  });
});
