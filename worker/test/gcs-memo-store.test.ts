import type { Storage } from '@google-cloud/storage';
import { GcsMemoStore } from '../src/adapters/gcs-memo-store';

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
