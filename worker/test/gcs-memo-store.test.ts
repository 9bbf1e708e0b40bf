import type { Storage } from '@google-cloud/storage';
import { GcsMemoStore } from '../src/adapters/memo-stores/gcs-memo-store';

/**
 * A bucket as Cloud Storage answers the memo: a write with `ifGenerationMatch` answers 412 unless
 * the object's generation is that one (0: it does not exist), every write makes a new generation
 * (which `file.metadata` holds after it, with the custom metadata), `getMetadata()` reads both. A
 * script of codes can refuse the next writes (undefined: the write goes on), and the next write can
 * be held until released (a slow request that lands after a later one).
 */
function bucketModel(codes: Array<number | undefined> = []) {
  const failure = (message: string, code: number) => Object.assign(new Error(message), { code });
  const objects = new Map<string, { data: string; generation: number; metadata: Record<string, string> }>();
  const writes: string[] = [];
  let generation = 0;
  let hold: Promise<void> | undefined;
  let release = () => {};
  const storage = {
    bucket: () => ({
      file: (name: string) => {
        const handle = {
          metadata: {} as Record<string, unknown>,
          save: async (
            data: string,
            options: {
              metadata?: { metadata?: Record<string, string> };
              preconditionOpts?: { ifGenerationMatch?: number };
            },
          ) => {
            writes.push(name);
            if (hold) {
              const gate = hold;
              hold = undefined;
              await gate;
            }
            const code = codes.shift();
            if (code !== undefined) throw failure(`HTTP ${code}`, code);
            const expected = options.preconditionOpts?.ifGenerationMatch;
            if (expected !== undefined && (objects.get(name)?.generation ?? 0) !== expected)
              throw failure('At least one of the pre-conditions you specified did not hold.', 412);
            const metadata = { ...(options.metadata?.metadata ?? {}) };
            objects.set(name, { data, generation: ++generation, metadata });
            handle.metadata = { generation: String(generation), metadata };
          },
          download: async () => {
            const object = objects.get(name);
            if (!object) throw failure('No such object.', 404);
            return [Buffer.from(object.data)];
          },
          getMetadata: async () => {
            const object = objects.get(name);
            if (!object) throw failure('No such object.', 404);
            return [{ generation: String(object.generation), metadata: { ...object.metadata } }];
          },
          exists: async () => [objects.has(name)],
        };
        return handle;
      },
    }),
  } as unknown as Storage;
  return {
    storage,
    objects,
    writes,
    /** The next write waits until `release()`. */
    holdNextWrite() {
      hold = new Promise<void>((resolve) => (release = resolve));
    },
    release: () => release(),
  };
}

function store(codes: Array<number | undefined> = []) {
  const bucket = bucketModel(codes);
  const pauses: number[] = [];
  let holder = 0;
  let nowMs = 0;
  const memo = new GcsMemoStore({
    storage: bucket.storage,
    bucket: 'memo',
    sleep: async (ms) => {
      pauses.push(ms);
      nowMs += ms;
    },
    now: () => nowMs,
    // Pauses at their full length; each holder a new id.
    random: () => (holder++ === 0 ? 1 : 1 - holder / 1e6),
  });
  return { memo, pauses, ...bucket };
}

const t0 = Date.parse('2026-12-01T09:00:00.000Z');
const at = (ms: number) => new Date(t0 + ms);

describe('GcsMemoStore under the one-write-per-second limit of an object', () => {
  it("answers a live lease from one read, with no write (every write counts against the holder's renewals)", async () => {
    const { memo, writes, objects } = store();
    const held = { expiresAt: at(15_000).toISOString(), holder: 'another' };
    objects.set('leases/k.json', { data: JSON.stringify(held), generation: 3, metadata: held });
    await expect(memo.lease('k', at(16_000), at(1_000))).resolves.toEqual({ heldUntil: at(15_000) });
    expect(writes).toEqual([]);
  });

  it('tries a takeover refused by the rate (429) again after a second', async () => {
    const { memo, pauses, writes, objects } = store([429]);
    const ended = { expiresAt: at(0).toISOString(), holder: 'another' };
    objects.set('leases/k.json', { data: JSON.stringify(ended), generation: 3, metadata: ended });
    await expect(memo.lease('k', at(16_000), at(1_000))).resolves.toMatchObject({ earlier: true });
    expect(writes).toEqual(['leases/k.json', 'leases/k.json']);
    expect(pauses).toEqual([1_000]);
  });

  it('sends a renewal within a second of its own last write of the object once that second is over', async () => {
    const { memo, pauses, writes } = store();
    const taken = (await memo.lease('k', at(15_000), at(0))) as { token: string };
    // A heartbeat, then a write's bound at once: the second write waits out the rest of the second.
    const renewed = await memo.renew('k', taken.token, at(16_000));
    await memo.renew('k', renewed!, at(20_000));
    expect(pauses).toEqual([1_000, 1_000]);
    expect(writes).toEqual(['leases/k.json', 'leases/k.json', 'leases/k.json']);
    // Another object is not held back by it.
    await memo.create('k', { result: {} } as never);
    expect(pauses).toHaveLength(2);
  });

  it('takes the lease when the retry succeeds', async () => {
    const { memo, pauses } = store([429]);
    await expect(memo.lease('k', at(15_000), at(0))).resolves.toMatchObject({ earlier: false });
    expect(pauses).toEqual([1_000]);
  });

  it('gives the 429 up after its retries (the memo then counts as failing), and never retries other errors', async () => {
    const spent = store([429, 429, 429]);
    await expect(spent.memo.lease('k', at(15_000), at(0))).rejects.toMatchObject({ code: 429 });
    expect(spent.pauses).toEqual([1_000, 2_000]);

    const broken = store([503]);
    await expect(broken.memo.create('k', { result: {} } as never)).rejects.toMatchObject({ code: 503 });
    expect(broken.pauses).toEqual([]);
  });

  it('keeps an analysis refused by the rate on its retry, and never replaces a kept one', async () => {
    const { memo, writes, objects } = store([429]);
    await memo.create('k', { result: { ok: true } } as never);
    await memo.create('k', { result: { ok: false } } as never);
    expect(writes).toEqual(['analyses/k.json', 'analyses/k.json', 'analyses/k.json']);
    expect(JSON.parse(objects.get('analyses/k.json')!.data)).toEqual({ result: { ok: true } });
  });
});

describe('GcsMemoStore: a lease is one object', () => {
  it('answers the expiry of a live lease, takes over one that expired or was released, and says the key was leased before', async () => {
    const { memo, objects } = store();
    const first = await memo.lease('k', at(15_000), at(0));
    expect(first).toMatchObject({ earlier: false });
    expect(await memo.lease('k', at(20_000), at(5_000))).toEqual({ heldUntil: at(15_000) });
    // Expired: taken over, by a rewrite of the same object.
    const second = await memo.lease('k', at(31_000), at(16_000));
    expect(second).toMatchObject({ earlier: true });
    expect([...objects.keys()]).toEqual(['leases/k.json']);
    // Released by its holder: the next delivery takes it at once.
    await memo.renew('k', (second as { token: string }).token, at(17_000), true);
    expect(await memo.lease('k', at(33_000), at(18_000))).toMatchObject({ earlier: true });
  });

  it('lets one of two deliveries that find a lease expired take it: the other sees it held (412, read again)', async () => {
    const shared = bucketModel();
    const a = new GcsMemoStore({ storage: shared.storage, bucket: 'memo', random: () => 0.1 });
    const b = new GcsMemoStore({ storage: shared.storage, bucket: 'memo', random: () => 0.2 });
    await a.lease('k', at(15_000), at(0));
    const [one, two] = await Promise.all([
      a.lease('k', at(40_000), at(20_000)),
      b.lease('k', at(41_000), at(20_000)),
    ]);
    const taken = [one, two].filter((x) => 'token' in x);
    expect(taken).toHaveLength(1);
    expect([one, two].filter((x) => 'heldUntil' in x)).toHaveLength(1);
  });

  it('renews only for its holder: once another delivery took the lease over, a renewal says it is no longer ours', async () => {
    const { memo } = store();
    const mine = (await memo.lease('k', at(15_000), at(0))) as { token: string };
    const renewed = await memo.renew('k', mine.token, at(20_000));
    expect(renewed).toBeDefined();
    expect(await memo.lease('k', at(25_000), at(10_000))).toEqual({ heldUntil: at(20_000) });
    // It lapsed (the holder stalled); another delivery takes it over.
    await memo.lease('k', at(36_000), at(21_000));
    await expect(memo.renew('k', renewed!, at(40_000))).resolves.toBeUndefined();
  });

  it('never lets a slow renewal that lands after a later one shorten the lease, nor bring back one released', async () => {
    const { memo, holdNextWrite, release } = store();
    const mine = (await memo.lease('k', at(15_000), at(0))) as { token: string };
    // A heartbeat renews to +20 s; its request is slow. The write turn moves the lease past its
    // statement's bound meanwhile, with the same token: that lands first.
    holdNextWrite();
    const slow = memo.renew('k', mine.token, at(20_000));
    const bound = await memo.renew('k', mine.token, at(513_000));
    release();
    await expect(slow).resolves.toBeDefined();
    expect(await memo.lease('k', at(30_000), at(15_000))).toEqual({ heldUntil: at(513_000) });
    // The write answered: the lease ends now; a late renewal after it leaves it ended.
    await memo.renew('k', bound!, at(16_000), true);
    await expect(memo.renew('k', bound!, at(40_000))).resolves.toBeUndefined();
    expect(await memo.lease('k', at(45_000), at(17_000))).toMatchObject({ earlier: true });
  });

  it('takes over a lease object without an expiry it can read (one an earlier layout wrote)', async () => {
    const { memo, objects } = store();
    objects.set('leases/k.json', {
      data: '{"expiresAt":"2026-12-01T09:00:15.000Z"}',
      generation: 7,
      metadata: {},
    });
    expect(await memo.lease('k', at(15_000), at(0))).toMatchObject({ earlier: true });
    expect(await memo.hasLease('k')).toBe(true);
    expect(await memo.hasLease('other')).toBe(false);
  });
});
