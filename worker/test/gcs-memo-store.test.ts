import type { Storage } from '@google-cloud/storage';
import { GcsMemoStore } from '../src/adapters/memo-stores/gcs-memo-store';

/** A bucket whose create-only writes answer from a script of codes (undefined: the write succeeds). */
function scriptedBucket(codes: Array<number | undefined>) {
  const writes: string[] = [];
  const objects = new Map<string, string>();
  const storage = {
    bucket: () => ({
      file: (name: string) => ({
        save: async (data: string) => {
          writes.push(name);
          const code = codes.shift();
          if (code !== undefined) throw Object.assign(new Error(`HTTP ${code}`), { code });
          objects.set(name, data);
        },
        download: async () => {
          const data = objects.get(name);
          if (data === undefined) throw Object.assign(new Error('No such object.'), { code: 404 });
          return [Buffer.from(data)];
        },
      }),
      // The lease's renewals, listed after a 412 (none in these cases).
      getFiles: async ({ prefix }: { prefix: string }) => [
        [...objects.keys()]
          .filter((n) => n.startsWith(prefix))
          .map((n, i) => ({ name: n, metadata: { generation: String(i + 1) } })),
      ],
    }),
  } as unknown as Storage;
  return { storage, writes, objects };
}

describe('GcsMemoStore under the one-write-per-second limit of an object', () => {
  const expiresAt = new Date('2026-12-01T00:00:15Z');

  function store(codes: Array<number | undefined>) {
    const bucket = scriptedBucket(codes);
    const pauses: number[] = [];
    const memo = new GcsMemoStore({
      storage: bucket.storage,
      bucket: 'memo',
      sleep: async (ms) => {
        pauses.push(ms);
      },
      random: () => 1,
    });
    return { memo, pauses, ...bucket };
  }

  it('tries a lease refused by the rate (429) again after a second, and then sees the holder (412)', async () => {
    const { memo, pauses, writes, objects } = store([429, 412]);
    objects.set('leases/k.json', JSON.stringify({ expiresAt: expiresAt.toISOString() }));
    // 412 on the retry: another delivery holds the lease; its expiry is read back.
    await expect(memo.lease('k', new Date(expiresAt.getTime() + 1_000))).resolves.toEqual(expiresAt);
    expect(writes).toEqual(['leases/k.json', 'leases/k.json']);
    expect(pauses).toEqual([1_000]);
  });

  it('takes the lease when the retry succeeds', async () => {
    const { memo, pauses } = store([429, undefined]);
    await expect(memo.lease('k', expiresAt)).resolves.toBeUndefined();
    expect(pauses).toEqual([1_000]);
  });

  it('gives the 429 up after its retries (the memo then counts as failing), and never retries other errors', async () => {
    const spent = store([429, 429, 429]);
    await expect(spent.memo.lease('k', expiresAt)).rejects.toMatchObject({ code: 429 });
    expect(spent.pauses).toEqual([1_000, 2_000]);

    const broken = store([503]);
    await expect(broken.memo.create('k', { result: {} } as never)).rejects.toMatchObject({ code: 503 });
    expect(broken.pauses).toEqual([]);
  });

  it('keeps an analysis refused by the rate on its retry', async () => {
    const { memo, writes, objects } = store([429, undefined]);
    await memo.create('k', { result: { ok: true } } as never);
    expect(writes).toEqual(['analyses/k.json', 'analyses/k.json']);
    expect(objects.has('analyses/k.json')).toBe(true);
  });
});

/**
 * A bucket that honours create-only writes as Cloud Storage does (412 when the name exists), numbers
 * generations in the order writes land, and can hold the next renewal's write until released (a
 * slow request that lands after a later one).
 */
function landingOrderBucket() {
  const objects = new Map<string, { data: string; generation: number }>();
  let generation = 0;
  let hold: Promise<void> | undefined;
  let release = () => {};
  const storage = {
    bucket: () => ({
      file: (name: string) => ({
        save: async (data: string, options: { preconditionOpts?: { ifGenerationMatch?: number } }) => {
          if (hold && /^leases\/.+\/.+\.json$/.test(name)) {
            const gate = hold;
            hold = undefined;
            await gate;
          }
          if (options.preconditionOpts?.ifGenerationMatch === 0 && objects.has(name))
            throw Object.assign(new Error('At least one of the pre-conditions you specified did not hold.'), {
              code: 412,
            });
          objects.set(name, { data, generation: ++generation });
        },
        download: async () => {
          const object = objects.get(name);
          if (!object) throw Object.assign(new Error('No such object.'), { code: 404 });
          return [Buffer.from(object.data)];
        },
      }),
      getFiles: async ({ prefix }: { prefix: string }) => [
        [...objects.entries()]
          .filter(([n]) => n.startsWith(prefix))
          .map(([n, o]) => ({ name: n, metadata: { generation: String(o.generation) } })),
      ],
    }),
  } as unknown as Storage;
  return {
    storage,
    objects,
    /** The next renewal's write waits until `release()`. */
    holdNextRenewal() {
      hold = new Promise<void>((resolve) => (release = resolve));
    },
    release: () => release(),
  };
}

describe('GcsMemoStore renewals', () => {
  it('counts the renewal issued last, not the one that landed last: a slow older renewal never shortens the lease, and renewals to the same bound are not refused', async () => {
    const bucket = landingOrderBucket();
    let nowMs = Date.parse('2026-12-01T09:00:00.000Z');
    const memo = new GcsMemoStore({
      storage: bucket.storage,
      bucket: 'memo',
      clock: { now: () => new Date(nowMs) },
    });
    const t0 = nowMs;
    expect(await memo.lease('k', new Date(t0 + 15_000))).toBeUndefined();
    // A heartbeat renews to now + 15 s; its request is slow.
    nowMs = t0 + 5_000;
    bucket.holdNextRenewal();
    const slow = memo.renew('k', new Date(t0 + 20_000));
    // The write turn moves the lease past its statement's bound meanwhile; that lands first.
    nowMs = t0 + 6_000;
    await memo.renew('k', new Date(t0 + 513_000));
    bucket.release();
    await slow;
    expect((await memo.lease('k', new Date(t0 + 30_000)))?.getTime()).toBe(t0 + 513_000);
    // The next heartbeat renews to the same bound: a renewal of its own, not a silent 412.
    nowMs = t0 + 10_000;
    await memo.renew('k', new Date(t0 + 513_000));
    expect([...bucket.objects.keys()].filter((n) => n.startsWith('leases/k/'))).toHaveLength(3);
    expect((await memo.lease('k', new Date(t0 + 30_000)))?.getTime()).toBe(t0 + 513_000);
    // The write answered: the lease ends now, whatever lands after.
    nowMs = t0 + 12_000;
    await memo.renew('k', new Date(t0 + 12_000));
    expect((await memo.lease('k', new Date(t0 + 30_000)))?.getTime()).toBe(t0 + 12_000);
  });

  it('stamps renewals issued in the same millisecond in order', async () => {
    const bucket = landingOrderBucket();
    const memo = new GcsMemoStore({
      storage: bucket.storage,
      bucket: 'memo',
      clock: { now: () => new Date(1_000) },
    });
    expect(await memo.lease('k', new Date(15_000))).toBeUndefined();
    await memo.renew('k', new Date(90_000));
    await memo.renew('k', new Date(5_000));
    expect([...bucket.objects.keys()].sort()).toEqual([
      'leases/k.json',
      'leases/k/1000-90000.json',
      'leases/k/1001-5000.json',
    ]);
    expect((await memo.lease('k', new Date(1)))?.getTime()).toBe(5_000);
  });

  it('reads a renewal named after its expiry alone (written by an earlier revision) by when it was created', async () => {
    const bucket = landingOrderBucket();
    const memo = new GcsMemoStore({
      storage: bucket.storage,
      bucket: 'memo',
      clock: { now: () => new Date(0) },
    });
    expect(await memo.lease('k', new Date(15_000))).toBeUndefined();
    bucket.objects.set('leases/k/40000.json', { data: '{}', generation: 99 });
    expect((await memo.lease('k', new Date(1)))?.getTime()).toBe(40_000);
  });
});
