import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sampleAnalysis } from '../../sim/samples';
import { OfflineAnalyzer } from '../src/adapters/analyzers/offline-analyzer';
import { FileMemoStore } from '../src/adapters/memo-stores/file-memo-store';
import { MemoryMemoStore } from '../src/adapters/memo-stores/memory-memo-store';
import { QuotaGate } from '../src/adapters/quota-gate';
import type { AnalysisProgress, AnalysisResult } from '../src/contract/analysis';
import type { Row } from '../src/contract/row';
import { Deadline, DeadlineError } from '../src/core/deadline';
import {
  ConfigurationError,
  OutcomeUnknownError,
  RATE_LIMITED,
  RejectionError,
  TransientError,
} from '../src/core/errors';
import { dedupKey, parsePush } from '../src/core/event';
import { handle } from '../src/core/handle';
import { AnalysisCutError, AnalysisMemo, type AnalysisMemoOptions } from '../src/core/memo';
import type { LeaseTaken, MemoEntry, MemoStore } from '../src/core/ports';
import { pushBody } from './support/builders';
import { MemoryLogger, type MemoryReader, transient } from './support/fakes';
import { failWrites, handlerDeps } from './support/handler';
import { ManualClock, ManualTime, settle } from './support/manual-time';
import { analyse } from './support/memo';

const DAY_MS = 24 * 60 * 60 * 1000;
const KEY = 'gs://acme-invoices-dev/2026/11/facture-0042.txt#1764460800123456';

/** A memo's options on `time`, the clock and timers a test moves (`extra` on top). */
const onTime = (time: ManualTime, extra: Partial<AnalysisMemoOptions> = {}): AnalysisMemoOptions => ({
  ttlMs: 8 * DAY_MS,
  clock: time.clock,
  sleep: time.sleep,
  timers: time,
  ...extra,
});

const INVOICE = 'FACTURE N° F-2026-0042\nTotal TTC : 1 234,56 €\n';

/** A push body announcing INVOICE (`spec` over the defaults), the object put in each of `readers`. */
function announceInvoice(readers: MemoryReader[], id = '1', spec: Parameters<typeof pushBody>[1] = {}) {
  const body = pushBody(id, { size: Buffer.byteLength(INVOICE), ...spec });
  for (const reader of readers) reader.putAnnounced(body, INVOICE);
  return body;
}

const paid = (total = 1500): AnalysisResult => ({
  analysis: sampleAnalysis(),
  model: 'gemini-2.5-flash',
  usage: { promptTokens: total - 300, outputTokens: 300, totalTokens: total },
});

/** The attempts a failed analysis paid for: one, answered outside the schema. */
const PROGRESS = { attemptsDone: 1, problems: 'total_amount: expected a number' };

/** Work that answers when the test calls `finish`, and never if it does not. */
function held() {
  let finish: (r: AnalysisResult) => void = () => {};
  const work = jest.fn(() => new Promise<AnalysisResult>((resolve) => (finish = resolve)));
  return { work, finish: (r: AnalysisResult) => finish(r) };
}

/** Work that fails as an unavailable analyzer does. */
const unavailable = (): Promise<AnalysisResult> => Promise.reject(transient());

/** A memo store that is down: every call fails. */
function downMemoStore(): MemoStore {
  const unavailable = () => Promise.reject(new Error('503 Service Unavailable'));
  const get = () => Promise.reject(new Error('EACCES: permission denied, open memo'));
  return { get, create: unavailable, lease: unavailable, renew: unavailable };
}

type LeaseAnswer = LeaseTaken | { heldUntil: Date };

/** `store`, with the calls in `overrides` answered by them instead (a bucket failing or slow in those). */
function over(store: MemoStore, overrides: Partial<MemoStore>): MemoStore {
  return {
    get: (key) => store.get(key),
    create: (key, entry) => store.create(key, entry),
    lease: (key, until, now) => store.lease(key, until, now),
    renew: (key, token, until, release) => store.renew(key, token, until, release),
    ...overrides,
  };
}

/**
 * `store`, with its lease calls answered by `answer` (`call` counts them from 1), as a bucket that
 * fails or slows down some of them would; `leaseCalls()` says how many were made.
 */
function leasing(
  store: MemoStore,
  answer: (call: number, key: string, until: Date, now: Date) => Promise<LeaseAnswer>,
): MemoStore & { leaseCalls(): number } {
  let calls = 0;
  return {
    ...over(store, { lease: (key, until, now) => answer(++calls, key, until, now) }),
    leaseCalls: () => calls,
  };
}

describe('AnalysisMemo', () => {
  let clock: ManualClock;
  let logger: MemoryLogger;
  beforeEach(() => {
    clock = new ManualClock();
    logger = new MemoryLogger();
  });
  // Leases are about other instances: these cases are one instance (the lease has its own below).
  const memoOn = (store: MemoStore) =>
    new AnalysisMemo(store, { ttlMs: 8 * DAY_MS, clock, logger, leaseMs: 0 });

  it('serves a second delivery of the same key from the memo without paying again', async () => {
    const memo = memoOn(new MemoryMemoStore());
    const work = jest.fn(async () => paid());
    expect(await analyse(memo, KEY, work)).toMatchObject({ source: 'analyzer' });
    const again = await analyse(memo, KEY, work);
    expect(again).toEqual({ result: paid(), source: 'memo' });
    expect(work).toHaveBeenCalledTimes(1);
  });

  it('looks in the memo again once admitted after a wait: a delivery elsewhere may have paid meanwhile', async () => {
    const store = new MemoryMemoStore();
    const memo = memoOn(store);
    const work = jest.fn(async () => paid());
    // The admission lets the delivery in only after another instance kept its analysis.
    const admission = {
      run: async <T>(admitted: (waitedMs: number) => Promise<T>) => {
        await analyse(new AnalysisMemo(store, { ttlMs: 8 * DAY_MS, clock, leaseMs: 0 }), KEY, async () =>
          paid(1900),
        );
        return admitted(30_000);
      },
    };
    expect(await analyse(memo, KEY, work, admission)).toEqual({
      result: paid(1900),
      source: 'shared',
    });
    expect(work).not.toHaveBeenCalled();
  });

  it('replays an analysis another analyzer version paid for: a document is analysed once, whichever version pays', async () => {
    const store = new MemoryMemoStore();
    const work = jest.fn(async () => paid());
    await analyse(memoOn(store), KEY, work);
    expect(await analyse(memoOn(store), KEY, work)).toEqual({
      result: paid(),
      source: 'memo',
    });
    expect(work).toHaveBeenCalledTimes(1);
  });

  it('ignores an entry older than the redelivery window', async () => {
    const memo = memoOn(new MemoryMemoStore());
    const work = jest.fn(async () => paid());
    await analyse(memo, KEY, work);
    clock.ms += 8 * DAY_MS;
    expect(await analyse(memo, KEY, work)).toMatchObject({ source: 'memo' });
    clock.ms += 1;
    expect(await analyse(memo, KEY, work)).toMatchObject({ source: 'analyzer' });
    expect(work).toHaveBeenCalledTimes(2);
  });

  it('lets concurrent deliveries of one key share one analysis', async () => {
    const memo = memoOn(new MemoryMemoStore());
    const { work, finish } = held();
    const first = analyse(memo, KEY, work);
    const second = analyse(memo, KEY, work);
    await settle();
    finish(paid());
    expect((await Promise.all([first, second])).map((r) => (r === 'written' ? r : r.source)).sort()).toEqual([
      'analyzer',
      'shared',
    ]);
    expect(work).toHaveBeenCalledTimes(1);
  });

  it('keeps nothing when the work fails, so the next delivery does the work', async () => {
    const memo = memoOn(new MemoryMemoStore());
    await expect(analyse(memo, KEY, unavailable)).rejects.toMatchObject({ code: 'analyzer_unavailable' });
    const work = jest.fn(async () => paid());
    expect(await analyse(memo, KEY, work)).toMatchObject({ source: 'analyzer' });
  });

  it('still does the work and answers when the memo store is down, and says so in a warning', async () => {
    const memo = memoOn(downMemoStore());
    const work = jest.fn(async () => paid());
    expect(await analyse(memo, KEY, work)).toEqual({ result: paid(), source: 'analyzer' });
    expect(await analyse(memo, KEY, work)).toMatchObject({ source: 'analyzer' });
    expect(work).toHaveBeenCalledTimes(2);
    // Read, read again right before paying (the memo may answer by then), keep.
    const once = [
      'the memo of paid analyses could not be read: analysing again',
      'the memo of paid analyses could not be read: analysing again',
      'the memo of paid analyses could not keep an analysis: a retry would pay again',
    ];
    expect(logger.entries.filter((e) => e.severity === 'WARNING').map((e) => e.message)).toEqual([
      ...once,
      ...once,
    ]);
  });
});

describe('AnalysisMemo across instances (the lease)', () => {
  const DAY = 8 * DAY_MS;
  /** Two instances: their own memo objects (single flight is per instance) over one store. */
  function twoInstances() {
    const clock = new ManualClock();
    const store = new MemoryMemoStore();
    // The sleep moves the test's clock: waiting is simulated, not slept.
    const sleep = async (ms: number) => {
      clock.ms += ms;
      await settle();
    };
    const make = () => new AnalysisMemo(store, { ttlMs: DAY, clock, leaseMs: 60_000, pollMs: 1_000, sleep });
    return { clock, store, a: make(), b: make() };
  }

  it.each([
    ['makes a concurrent delivery in another instance wait for the holder and share its analysis', false],
    [
      'serialises a second wave of concurrent retries after a failed first holder: one paid analysis (soak I5, seed 13)',
      true,
    ],
  ])('%s', async (_, afterFailedHolder) => {
    const { clock, a, b } = twoInstances();
    if (afterFailedHolder) {
      await expect(analyse(a, KEY, unavailable)).rejects.toMatchObject({ code: 'analyzer_unavailable' });
      // Pub/Sub's backoff: both retries come after the failed holder ended its lease.
      clock.ms += 61_000;
    }
    const { work: workA, finish } = held();
    const workB = jest.fn(async () => paid(9999));
    const first = analyse(a, KEY, workA);
    await settle();
    const second = analyse(b, KEY, workB);
    await settle();
    finish(paid());
    expect(await first).toMatchObject({ source: 'analyzer' });
    expect(await second).toEqual({ result: paid(), source: 'shared' });
    expect(workA).toHaveBeenCalledTimes(1);
    expect(workB).not.toHaveBeenCalled();
  });

  it('reads the memo again before paying once a holder has ended its lease: it kept its analysis after the delivery first read the memo', async () => {
    const { a, b } = twoInstances();
    let peeked: Awaited<ReturnType<AnalysisMemo['peek']>> | undefined;
    // B's first read comes while A holds the key's lease and has kept nothing yet.
    await analyse(a, KEY, async () => {
      peeked = await b.peek(KEY);
      return paid();
    });
    expect(peeked?.state).toBe('worked');
    // A writes and ends its lease; then B, its lookup missed A's row, goes on to pay.
    (await a.leases.writeTurn(KEY)).done();
    await settle();
    const work = jest.fn(async () => paid(9999));
    expect(await analyse(b, KEY, work, undefined, undefined, peeked)).toEqual({
      result: paid(),
      source: 'memo',
    });
    expect(work).not.toHaveBeenCalled();
  });

  // A's first attempt is paid and answered outside the schema; its second is refused for a reason not
  // about the document (404 NOT_FOUND), which ends the delivery (503); or the model is not found
  // (a configuration fault), fixed before the retry.
  it.each([
    [
      'a failed delivery paid for: its retry on another instance goes on after them (soak I5, seed 168)',
      TransientError,
      'dependency_refused',
    ],
    [
      'paid before a configuration fault (a 404 for the model): the retry after the fix goes on after them',
      ConfigurationError,
      'analyzer_model_not_found',
    ],
  ] as const)('keeps the attempts %s', async (_, Failure, code) => {
    const { clock, a, b } = twoInstances();
    const failure = new Failure(code, 'Gemini: 404 NOT_FOUND', { usage: paid().usage, progress: PROGRESS });
    await expect(analyse(a, KEY, () => Promise.reject(failure))).rejects.toThrow('404');
    // The retry reaches B.
    clock.ms += 120_000;
    const work = jest.fn(async (_resume?: AnalysisProgress) => paid());
    expect(await analyse(b, KEY, work)).toMatchObject({ source: 'analyzer' });
    expect(work).toHaveBeenCalledWith(PROGRESS);
  });

  // A holder that never finished (a crash): the delivery waits for its lease, and not a moment longer.
  it.each([
    ['once the lease expires, when the holder never finished (a crash)', 60_000, 60_000],
    ['at once when the lease has expired', -1, 0],
  ])('does the work itself %s', async (_, leaseLeftMs, waitedMs) => {
    const { clock, store, b } = twoInstances();
    await store.lease(
      AnalysisMemo.leaseKey(KEY),
      new Date(clock.ms + leaseLeftMs),
      new Date(clock.ms - 60_000),
    );
    const work = jest.fn(async () => paid());
    const started = clock.ms;
    expect(await analyse(b, KEY, work)).toMatchObject({ source: 'analyzer' });
    expect(work).toHaveBeenCalledTimes(1);
    expect(clock.ms - started).toBe(waitedMs);
  });

  it('lets a retry after a failed holder go at once, here or on another instance: the holder ended its lease', async () => {
    const { clock, store, a, b } = twoInstances();
    const failing = async (): Promise<AnalysisResult> => {
      throw new TransientError('analyzer_rate_limited', 'Gemini: 429');
    };
    await expect(analyse(a, KEY, failing)).rejects.toMatchObject({ code: 'analyzer_rate_limited' });
    expect(store.leases.get(AnalysisMemo.leaseKey(KEY))?.released).toBe(true);
    const started = clock.ms;
    expect(await analyse(b, KEY, async () => paid())).toMatchObject({ source: 'analyzer' });
    await expect(analyse(a, `${KEY}-2`, failing)).rejects.toMatchObject({ code: 'analyzer_rate_limited' });
    expect(await analyse(a, `${KEY}-2`, async () => paid())).toMatchObject({ source: 'analyzer' });
    expect(clock.ms).toBe(started);
  });

  it('leaves the lease of an analysis cut at its deadline to expire on its own: its answer may still be kept', async () => {
    const { clock, store, a, b } = twoInstances();
    const late = new Promise<AnalysisResult>(() => {});
    const cut = new AnalysisCutError(new DeadlineError('analysis', 'SIGTERM'), late);
    await expect(analyse(a, KEY, () => Promise.reject(cut))).rejects.toBe(cut);
    expect(store.leases.get(AnalysisMemo.leaseKey(KEY))?.released).toBe(false);
    const started = clock.ms;
    expect(await analyse(b, KEY, async () => paid())).toMatchObject({ source: 'analyzer' });
    expect(clock.ms - started).toBe(60_000);
  });

  it('takes over a lease that expired, and makes a later delivery wait for its new holder', async () => {
    const { clock, store, a, b } = twoInstances();
    const key = AnalysisMemo.leaseKey(KEY);
    await store.lease(key, new Date(clock.ms - 1), new Date(clock.ms - 60_000));
    const expired = store.leases.get(key)!.holder;
    const { work, finish } = held();
    const first = analyse(a, KEY, work);
    await settle();
    const workB = jest.fn(async () => paid(9999));
    const second = analyse(b, KEY, workB);
    await settle();
    expect(store.leases.get(key)!.holder).not.toBe(expired);
    expect(store.leases.size).toBe(1);
    finish(paid());
    expect(await first).toMatchObject({ source: 'analyzer' });
    expect(await second).toEqual({ result: paid(), source: 'shared' });
    expect(workB).not.toHaveBeenCalled();
  });

  it.each([
    ['an earlier delivery held a lease (soak I5, seed 17)', false],
    ['the lease could not be taken', true],
  ])('reads the memo once more before paying when its first read failed and %s', async (_, leaseFails) => {
    const { clock, store, a } = twoInstances();
    // An earlier delivery analysed and kept its result; its lease has long expired.
    await analyse(a, KEY, async () => paid());
    clock.ms += 120_000;
    let reads = 0;
    const unavailable = () => Promise.reject(new Error('503 from the memo bucket'));
    const flaky = over(store, {
      // Reads of the analysis are counted (the attempts already paid are read beside it).
      get: (key) =>
        key !== AnalysisMemo.key(KEY) ? store.get(key) : ++reads === 1 ? unavailable() : store.get(key),
      ...(leaseFails ? { lease: unavailable } : {}),
    });
    const retry = new AnalysisMemo(flaky, { ttlMs: DAY, clock, leaseMs: 60_000, pollMs: 1_000 });
    const work = jest.fn(async () => paid(9999));
    expect(await analyse(retry, KEY, work)).toEqual({
      result: paid(),
      source: 'shared',
    });
    expect(work).not.toHaveBeenCalled();
    expect(reads).toBe(2);
  });

  it('asks the store before paying when it takes over a lease an earlier holder ended and the memo cannot be read (soak I5, seed 22)', async () => {
    const { clock, store, a } = twoInstances();
    // The holder analysed, kept, wrote its row and ended its lease.
    await analyse(a, KEY, async () => paid());
    (await a.leases.writeTurn(KEY)).done();
    await settle();
    const unreadable = over(store, { get: () => Promise.reject(new Error('503 from the memo bucket')) });
    const retry = new AnalysisMemo(unreadable, { ttlMs: DAY, clock, leaseMs: 60_000, pollMs: 1_000 });
    const work = jest.fn(async () => paid(9999));
    const rows = { seen: jest.fn(async () => false) };
    await analyse(retry, KEY, work, undefined, undefined, undefined, rows);
    expect(rows.seen).toHaveBeenCalledWith(KEY, expect.anything());
    expect(work).toHaveBeenCalledTimes(1);
  });
});

describe('FileMemoStore', () => {
  let dir: string;
  let store: FileMemoStore;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'docline-memo-'));
    store = new FileMemoStore(dir);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const key = (n: number) => AnalysisMemo.key(`${KEY}-${n}`);
  const entry = (total: number): MemoEntry => ({ ...paid(total), createdAt: '2026-11-30T04:00:00.000Z' });

  it('answers undefined for a key it never kept, keeps the first of racing creates whole, and leaves no temporary file', async () => {
    expect(await store.get(key(1))).toBeUndefined();
    await Promise.all(Array.from({ length: 8 }, (_, i) => store.create(key(1), entry(1000 + i))));
    const kept = await store.get(key(1));
    expect(kept?.usage.totalTokens).toBeGreaterThanOrEqual(1000);
    // A later create never replaces it.
    await store.create(key(1), entry(9999));
    expect(await store.get(key(1))).toEqual(kept);
    const files = readdirSync(path.join(dir, 'analysis'));
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^[a-f0-9]{64}\.json$/);
  });

  it('prunes the entries written before the cutoff and keeps the others', async () => {
    await store.create(key(1), entry(1));
    await store.create(key(2), entry(2));
    const old = new Date('2026-11-01T00:00:00Z');
    const [first] = key(1).split('/').slice(1);
    utimesSync(path.join(dir, 'analysis', `${first}.json`), old, old);
    expect(await store.prune(new Date('2026-11-20T00:00:00Z'))).toBe(1);
    expect(await store.get(key(1))).toBeUndefined();
    expect(await store.get(key(2))).toBeDefined();
  });

  it('gives a lease to the first caller only and tells the others when it expires', async () => {
    const now = new Date('2026-11-30T04:00:00.000Z');
    const until = new Date('2026-11-30T04:01:00.000Z');
    const answers = await Promise.all([1, 2, 3].map(() => store.lease(key(1), until, now)));
    expect(answers.filter((a) => 'token' in a)).toHaveLength(1);
    expect(answers.filter((a) => 'heldUntil' in a && a.heldUntil.getTime() === until.getTime())).toHaveLength(
      2,
    );
  });

  it('renews a lease for its holder only, by replacing its file whole, and takes over one that ended', async () => {
    const t = (s: number) => new Date(Date.parse('2026-11-30T04:00:00.000Z') + s * 1000);
    const mine = (await store.lease(key(2), t(15), t(0))) as { token: string };
    expect(await store.renew(key(2), mine.token, t(35))).toBe(mine.token);
    expect(await store.lease(key(2), t(36), t(20))).toEqual({ heldUntil: t(35) });
    expect(await store.renew(key(2), 'someone else', t(90))).toBeUndefined();
    // Released: the next caller takes it at once, and the holder's late renewal leaves it ended.
    await store.renew(key(2), mine.token, t(21), true);
    expect(await store.renew(key(2), mine.token, t(40))).toBeUndefined();
    expect(await store.lease(key(2), t(37), t(22))).toMatchObject({ earlier: true });
    expect(readdirSync(path.dirname(path.join(dir, key(2)))).filter((f) => /\.(tmp|lock)$/.test(f))).toEqual(
      [],
    );
  });

  it('refuses a key that is not namespace/sha256, so no name can escape its folder', async () => {
    await expect(store.get('../../etc/passwd')).rejects.toThrow('not a memo key');
    await expect(store.lease(`${key(1)}~../x`, new Date(), new Date())).rejects.toThrow('not a memo key');
  });

  it('breaks a lock left by a process that died mid-change', async () => {
    const lease = AnalysisMemo.leaseKey(KEY);
    const file = path.join(dir, `${lease}.lease.lock`);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, '4242');
    const old = new Date(Date.now() - 60_000);
    utimesSync(file, old, old);
    expect(await store.lease(lease, new Date(Date.now() + 15_000), new Date())).toMatchObject({
      earlier: false,
    });
  });

  it('tells whether a key was ever leased, without taking its lease (leases are `lease/sha256`, one for every version)', async () => {
    const lease = AnalysisMemo.leaseKey(KEY);
    expect(lease).toMatch(/^lease\/[a-f0-9]{64}$/);
    expect(await store.hasLease(lease)).toBe(false);
    expect(await store.hasLease(lease)).toBe(false);
    const now = new Date('2026-11-30T04:00:00.000Z');
    expect(await store.lease(lease, new Date('2026-11-30T04:00:15.000Z'), now)).toMatchObject({
      earlier: false,
    });
    expect(await store.hasLease(lease)).toBe(true);
  });
});

/** The handler over a memo in `memoStore` (`options` on top), with INVOICE stored and announced. */
function setup(
  memoStore: MemoStore = new MemoryMemoStore(),
  admission?: QuotaGate,
  options: Partial<AnalysisMemoOptions> = {},
) {
  const { store, reader, analyzer, deps } = handlerDeps({
    clock: new ManualClock(),
    memo: new AnalysisMemo(memoStore, { ttlMs: 8 * DAY_MS, clock: new ManualClock(), ...options }),
    ...(admission ? { admission } : {}),
  });
  const body = announceInvoice([reader]);
  return { store, reader, analyzer, deps, body, key: dedupKey(parsePush(body), 'object') };
}

describe('handle with the memo', () => {
  it("keeps the key's lease across the gate's retry of a call the quota refused: taken once, not ended and taken again", async () => {
    // Ended and taken again within a second, the lease object would be written twice (Cloud Storage
    // refuses the second write) and the retry would wait out its own lease, then look the key up.
    const memoStore = new MemoryMemoStore();
    const leases = jest.spyOn(memoStore, 'lease');
    const gate = new QuotaGate({ maxInFlight: 2, maxWaitMs: 60_000, initialPauseMs: 0, maxPauseMs: 0 });
    const { store, analyzer, deps, body } = setup(memoStore, gate);
    const seen = jest.spyOn(store, 'seen');
    analyzer.failNext(new TransientError(RATE_LIMITED, 'Gemini: 429 RESOURCE_EXHAUSTED'));
    expect(await handle(parsePush(body), deps)).toMatchObject({ status: 'ok', analysed: true });
    expect(analyzer.calls).toHaveLength(2);
    expect(leases).toHaveBeenCalledTimes(1);
    expect(seen).not.toHaveBeenCalled();
  });

  it("ends a lease kept for the gate's retry when the gate gives up: the next delivery takes it at once", async () => {
    const memoStore = new MemoryMemoStore();
    const gate = new QuotaGate({ maxInFlight: 2, maxWaitMs: 0, initialPauseMs: 0, maxPauseMs: 0 });
    const { analyzer, deps, body, key } = setup(memoStore, gate);
    analyzer.failNext(new TransientError(RATE_LIMITED, 'Gemini: 429 RESOURCE_EXHAUSTED'));
    await expect(handle(parsePush(body), deps)).rejects.toMatchObject({ code: RATE_LIMITED });
    expect(memoStore.leases.get(AnalysisMemo.leaseKey(key))?.released).toBe(true);
  });

  it('asks the analyzer to go on after the attempts an earlier delivery paid for and did not end (soak I5, seed 168)', async () => {
    const memoStore = new MemoryMemoStore();
    const { analyzer, deps, body, key } = setup(memoStore);
    // An earlier delivery held the key's lease (expired now) and kept the attempt it paid for.
    const createdAt = new ManualClock().now().toISOString();
    await memoStore.create(AnalysisMemo.progressKey(key), {
      progress: PROGRESS,
      usage: paid().usage,
      createdAt,
    });
    const then = new ManualClock().now();
    await memoStore.lease(AnalysisMemo.leaseKey(key), then, new Date(then.getTime() - 60_000));
    expect(await handle(parsePush(body), deps)).toMatchObject({ status: 'ok', analysed: true });
    expect(analyzer.calls.map((c) => c.resume)).toEqual([PROGRESS]);
  });

  const memoDirs: string[] = [];
  afterAll(() => {
    for (const dir of memoDirs) rmSync(dir, { recursive: true, force: true });
  });
  const fileMemo = () => {
    memoDirs.push(mkdtempSync(path.join(tmpdir(), 'docline-memo-readings-')));
    return new FileMemoStore(memoDirs.at(-1)!);
  };

  it.each([
    ['in memory', () => new MemoryMemoStore()],
    ['in files (JSON)', fileMemo],
  ])(
    'writes from a memo hit the confidence and review a fresh analysis writes (the readings are kept, %s)',
    async (_, memoStore) => {
      const rowOf = async (writeFailures: number) => {
        const { store, deps, body } = setup(memoStore());
        deps.analyzer = new OfflineAnalyzer();
        failWrites(store, writeFailures);
        for (let attempt = 0; attempt < writeFailures; attempt += 1)
          await expect(handle(parsePush(body), deps)).rejects.toMatchObject({ code: 'store_busy' });
        const outcome = await handle(parsePush(body), deps);
        expect(outcome).toMatchObject({ status: 'ok', ...(writeFailures > 0 ? { memo: 'hit' } : {}) });
        return store.rowsFor(outcome.dedupKey)[0]!;
      };
      const fresh = await rowOf(0);
      const fromMemo = await rowOf(1);
      // The offline analyzer says how it read each field: the confidence is not the fallback's.
      expect(Object.values(fresh.confidence ?? {}).map((c) => c.how)).not.toContain('unknown');
      expect(fromMemo.confidence).toEqual(fresh.confidence);
      expect(fromMemo.review).toEqual(fresh.review);
    },
  );

  it('still reads an entry kept without readings: the row says the fields were read by an analyzer that did not say how', async () => {
    const memoStore = new MemoryMemoStore();
    const { store, analyzer, deps, body, key } = setup(memoStore);
    // The analysis, its model and tokens only.
    const createdAt = new ManualClock().now().toISOString();
    await memoStore.create(AnalysisMemo.key(key), { ...paid(), createdAt });
    const outcome = await handle(parsePush(body), deps);
    expect(outcome).toMatchObject({ status: 'ok', analysed: false, memo: 'hit' });
    expect(analyzer.calls).toHaveLength(0);
    const row = store.rowsFor(outcome.dedupKey)[0]!;
    expect(row.confidence).toMatchObject({ total_amount: { source: 'gemini', how: 'model' } });
  });

  it('pays once when the write fails and Pub/Sub delivers again; the row keeps the tokens paid', async () => {
    const { store, reader, analyzer, deps, body } = setup();
    failWrites(store, 1);
    await expect(handle(parsePush(body), deps)).rejects.toMatchObject({ code: 'store_busy' });
    const retry = await handle(parsePush(body), deps);
    expect(retry).toMatchObject({ status: 'ok', analysed: false, memo: 'hit' });
    expect(analyzer.calls).toHaveLength(1);
    // The memo saves the read too.
    expect(reader.reads).toHaveLength(1);
    expect(store.rowsFor(retry.dedupKey)[0]).toMatchObject({ total_tokens: 1500, model: 'scripted' });
  });

  // A PDF may carry an e-invoice: it is read before the paid work (here it carries none).
  const eInvoices = {
    accepts: (mime: string) => mime === 'application/pdf',
    read: async () => ({ kind: 'none' as const }),
  };

  it('writes the kept, paid analysis of a PDF whose generation is gone by the retry, never `object_gone`', async () => {
    const { store, reader, analyzer, deps } = setup();
    const pdf = Buffer.from('%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n');
    const body = pushBody('7', {
      name: '2026/11/facture-0007.pdf',
      contentType: 'application/pdf',
      size: pdf.length,
    });
    reader.putAnnounced(body, pdf);
    failWrites(store, 1);
    await expect(handle(parsePush(body), { ...deps, eInvoices })).rejects.toMatchObject({
      code: 'store_busy',
    });
    // The object is overwritten (or deleted) before Pub/Sub delivers again.
    reader.objects.clear();
    const retry = await handle(parsePush(body), { ...deps, eInvoices });
    expect(retry).toMatchObject({ status: 'ok', memo: 'hit', analysed: false });
    expect(analyzer.calls).toHaveLength(1);
    expect(store.rowsFor(retry.dedupKey)).toEqual([expect.objectContaining({ status: 'ok', reason: null })]);
  });

  it('still rejects a PDF whose generation is gone when nothing was paid for it (object_gone)', async () => {
    const { store, analyzer, deps } = setup();
    const body = pushBody('8', {
      name: '2026/11/facture-0008.pdf',
      contentType: 'application/pdf',
      size: 60,
    });
    const outcome = await handle(parsePush(body), { ...deps, eInvoices });
    expect(outcome).toMatchObject({ status: 'rejected', reason: 'object_gone', analysed: false });
    expect(analyzer.calls).toHaveLength(0);
    expect(store.rowsFor(outcome.dedupKey)).toHaveLength(1);
  });

  it('keeps a paid answer that comes after SIGTERM cut its delivery (issue 45, item 7, C2): the retry pays nothing', async () => {
    const time = new ManualTime();
    const memo = new AnalysisMemo(new MemoryMemoStore(), onTime(time));
    const { reader, analyzer, deps } = handlerDeps({ clock: time.clock, memo });
    const body = announceInvoice([reader], '9');
    analyzer.hold();
    const deadline = Deadline.after(498_000, time.clock, time);
    const cut = handle(parsePush(body), deps, deadline).catch((e: unknown) => e);
    await analyzer.arrived(1);
    // SIGTERM: the deadline comes forward to the grace period less the margin to answer.
    deadline.drain(time.ms + 8_000);
    await time.advance(8_000);
    expect(await cut).toBeInstanceOf(DeadlineError);
    // The call Gemini was running answers within the grace period: it is paid, and kept.
    await time.advance(1_000);
    analyzer.release();
    await settle();
    await time.advance(100);
    const retry = await handle(parsePush(body), deps, Deadline.after(498_000, time.clock, time));
    expect(retry).toMatchObject({ status: 'ok', memo: 'hit', analysed: false });
    expect(analyzer.calls).toHaveLength(1);
  });

  it('lets two overlapping deliveries of one object share one analysis and write one row', async () => {
    const { store, analyzer, deps, body } = setup();
    analyzer.hold();
    const both = Promise.all([handle(parsePush(body), deps), handle(parsePush(body), deps)]);
    await analyzer.arrived(1);
    analyzer.release();
    const outcomes = await both;
    expect(outcomes.map((o) => o.status).sort()).toEqual(['duplicate', 'ok']);
    expect(outcomes.find((o) => o.memo === 'shared')).toBeDefined();
    expect(analyzer.calls).toHaveLength(1);
    expect(store.rowsFor(outcomes[0]!.dedupKey)).toHaveLength(1);
  });

  it('ends the key’s lease once its write answered, and leaves it to its bound when the write was cut at the deadline (soak I4)', async () => {
    const time = new ManualTime();
    const memoStore = new MemoryMemoStore();
    const memo = new AnalysisMemo(memoStore, onTime(time, { writesOutliveInstance: true }));
    const { store, reader, deps } = handlerDeps({ clock: time.clock, memo });
    const deadline = (ms: number) => Deadline.after(ms, time.clock, time);
    const delivery = (id: string, name: string) => parsePush(announceInvoice([reader], id, { name }));
    const leaseOf = (dedupKey: string) =>
      memoStore.leases.get(AnalysisMemo.leaseKey(dedupKey))!.expiresAt.getTime();

    const answered = await handle(delivery('1', 'a.txt'), deps, deadline(498_000));
    expect(answered.status).toBe('ok');
    // The write answered: nobody need wait for this key any longer.
    expect(leaseOf(answered.dedupKey)).toBeLessThanOrEqual(time.ms);

    // A MERGE that does not answer before the delivery's deadline (it may still commit).
    store.record = () => new Promise<boolean>(() => {});
    const cut = handle(delivery('2', 'b.txt'), deps, deadline(30_000)).catch((e: unknown) => e);
    for (let t = 0; t < 31; t++) await time.advance(1_000);
    const error = await cut;
    expect(error).toBeInstanceOf(DeadlineError);
    const key = dedupKey(delivery('2', 'b.txt'), 'object');
    // Still held one lease time past the deadline, the bound of the statement (its jobTimeoutMs).
    expect(leaseOf(key)).toBe(time.ms - 31_000 + 30_000 + 15_000);
  });

  it('keeps the key’s lease to its bound when the write’s outcome is unknown: neither another instance nor this instance’s own retry writes meanwhile', async () => {
    const { time, memoStore, old: a, next: b, body } = revisions();
    const key = dedupKey(parsePush(body), 'object');
    const leaseOf = () => memoStore.leases.get(AnalysisMemo.leaseKey(key))!.expiresAt.getTime();

    // A's MERGE was sent and its answer lost; jobs.get could not tell whether it committed.
    const record = a.store.record.bind(a.store);
    let unknown = 1;
    const writes: number[] = [];
    a.store.record = async (row: Row) => {
      writes.push(time.ms);
      if (unknown-- > 0)
        throw new OutcomeUnknownError('bigquery_outcome_unknown', 'the answer of the MERGE was lost');
      return record(row);
    };
    const startMs = time.ms;
    await expect(
      handle(parsePush(body), a.deps, Deadline.after(30_000, time.clock, time)),
    ).rejects.toBeInstanceOf(OutcomeUnknownError);
    // Its lease lives on to the statement's bound (the deadline plus one lease time), not ended now.
    expect(leaseOf()).toBe(startMs + 30_000 + 15_000);

    // A duplicate on B and the retry on A (both find the analysis in the memo) wait for that bound.
    let bDone = false;
    let aDone = false;
    const onB = handle(parsePush(body), b.deps, Deadline.after(498_000, time.clock, time)).then((o) => {
      bDone = true;
      return o;
    });
    const onA = handle(parsePush(body), a.deps, Deadline.after(498_000, time.clock, time)).then((o) => {
      aDone = true;
      return o;
    });
    await time.advance(40_000);
    expect([aDone, bDone]).toEqual([false, false]);
    expect(writes).toHaveLength(1);
    await time.advance(10_000);
    const outcomes = await Promise.all([onA, onB]);
    expect(outcomes.map((o) => o.status).sort()).toEqual(['duplicate', 'ok']);
    expect(writes.every((at) => at === startMs || at >= startMs + 45_000)).toBe(true);
    expect(a.analyzer.calls.length + b.analyzer.calls.length).toBe(1);
  });

  /** Counts the store's lookups and the memo's reads. */
  function counting(memoStore: MemoStore = new MemoryMemoStore()) {
    const s = setup(memoStore);
    const counts = { seen: 0, memoReads: 0 };
    const seen = s.store.seen.bind(s.store);
    s.store.seen = (key) => {
      counts.seen++;
      return seen(key);
    };
    const get = memoStore.get.bind(memoStore);
    memoStore.get = (key) => {
      counts.memoReads++;
      return get(key);
    };
    return { ...s, counts };
  }

  it("skips the store's lookup for a key the memo knows nothing of (one memo read), and asks the store once the memo holds the analysis: a redelivery after the write pays nothing and writes nothing", async () => {
    const { store, analyzer, reader, deps, body, counts } = counting();
    expect(await handle(parsePush(body), deps)).toMatchObject({ status: 'ok', analysed: true });
    expect(counts).toEqual({ seen: 0, memoReads: 1 });
    const again = await handle(parsePush(body), deps);
    expect(again).toMatchObject({ status: 'duplicate', duplicateAt: 'seen', analysed: false });
    expect(counts).toEqual({ seen: 1, memoReads: 2 });
    expect(analyzer.calls).toHaveLength(1);
    expect(reader.reads).toHaveLength(1);
    expect(store.rowsFor(again.dedupKey)).toHaveLength(1);
  });

  it('still processes the document when the memo store is down, and asks the store: a redelivery of a written document pays nothing', async () => {
    const { store, analyzer, deps, body } = setup(downMemoStore());
    expect(await handle(parsePush(body), deps)).toMatchObject({ status: 'ok', analysed: true });
    const again = await handle(parsePush(body), deps);
    expect(again).toMatchObject({ status: 'duplicate', duplicateAt: 'seen', analysed: false });
    expect(analyzer.calls).toHaveLength(1);
    expect(store.rowsFor(again.dedupKey)).toHaveLength(1);
  });

  it('costs one analysis, never a second row, when the memo lost the entry of a written document', async () => {
    const { store, analyzer, deps, body } = setup();
    await handle(parsePush(body), deps);
    // The same store and row, but a memo that has lost everything (a new analyzer version would too).
    const forgetful = { ...deps, memo: new AnalysisMemo(new MemoryMemoStore(), { ttlMs: 8 * DAY_MS }) };
    const again = await handle(parsePush(body), forgetful);
    expect(again).toMatchObject({ status: 'duplicate', duplicateAt: 'record', analysed: true });
    expect(analyzer.calls).toHaveLength(2);
    expect(store.rowsFor(again.dedupKey)).toHaveLength(1);
  });

  it('reads the memo again before paying when its first read failed: a concurrent delivery may have kept its analysis during the lookup (soak I5, seed 334)', async () => {
    const memoStore = new MemoryMemoStore();
    let reads = 0;
    const get = memoStore.get.bind(memoStore);
    memoStore.get = (key) => (++reads === 1 ? Promise.reject(new Error('503')) : get(key));
    const { store, analyzer, deps, body } = setup(memoStore);
    const seen = store.seen.bind(store);
    store.seen = async (key) => {
      // While this delivery's lookup runs, another instance's delivery pays and keeps the analysis.
      const elsewhere = new AnalysisMemo(memoStore, { ttlMs: 8 * DAY_MS, clock: new ManualClock() });
      await analyse(elsewhere, key, async () => paid());
      // Its write is refused (no row yet), and its turn ends.
      (await elsewhere.leases.writeTurn(key)).done();
      return seen(key);
    };
    const outcome = await handle(parsePush(body), deps);
    // Read again once admitted, right before paying: the analysis kept meanwhile is shared.
    expect(outcome).toMatchObject({ status: 'ok', analysed: false, memo: 'shared' });
    expect(analyzer.calls).toHaveLength(0);
    expect(store.rowsFor(outcome.dedupKey)).toHaveLength(1);
  });

  it('asks the store first for a message that is not work (no memo read)', async () => {
    const { store, deps, counts } = counting();
    const notWork = pushBody('9', { eventType: 'OBJECT_DELETE' });
    const first = await handle(parsePush(notWork), deps);
    const again = await handle(parsePush(notWork), deps);
    expect(first.status).toBe('rejected');
    expect(again).toMatchObject({ status: 'duplicate', duplicateAt: 'seen' });
    expect(counts).toEqual({ seen: 2, memoReads: 0 });
    expect(store.rowsFor(first.dedupKey)).toHaveLength(1);
  });
});

/**
 * Two instances, or the old revision and the new one: one memo bucket, one table, INVOICE stored and
 * announced, on a clock and timers the test moves; `seen` counts the table's lookups.
 */
function revisions() {
  const time = new ManualTime();
  const memoStore = new MemoryMemoStore();
  const options = onTime(time, { writesOutliveInstance: true });
  const old = handlerDeps({ clock: time.clock, memo: new AnalysisMemo(memoStore, options) });
  const next = handlerDeps({
    clock: time.clock,
    memo: new AnalysisMemo(memoStore, options),
    store: old.store,
  });
  const body = announceInvoice([old.reader, next.reader]);
  const seen = { count: 0 };
  const lookup = old.store.seen.bind(old.store);
  old.store.seen = (key) => {
    seen.count++;
    return lookup(key);
  };
  const deadline = () => Deadline.after(498_000, time.clock, time);
  return { time, memoStore, old, next, body, seen, deadline };
}

describe('an analyzer rollout: two revisions, another model each, share one memo and one lease', () => {
  it('answers a redelivery of a document the old version wrote as a duplicate at the lookup: no second payment', async () => {
    const { old, next, body, seen, deadline } = revisions();
    expect(await handle(parsePush(body), old.deps, deadline())).toMatchObject({ status: 'ok' });
    // The memo holds v1's analysis: a delivery of it may have written, so the store is asked.
    const again = await handle(parsePush(body), next.deps, deadline());
    expect(again).toMatchObject({ status: 'duplicate', duplicateAt: 'seen', analysed: false });
    expect(next.analyzer.calls).toHaveLength(0);
    expect(seen.count).toBe(1);
    expect(old.store.rowsFor(again.dedupKey)).toHaveLength(1);
  });

  it('writes the analysis the old version paid for and could not write: the new version pays nothing (soak I5, seeds 47, 101, 222)', async () => {
    const { old, next, body, deadline } = revisions();
    // The old revision pays, keeps its analysis, and its write fails (an outage of the store).
    const record = old.store.record.bind(old.store);
    old.store.record = () =>
      Promise.reject(new TransientError('store_unavailable', 'the store answered 503'));
    await expect(handle(parsePush(body), old.deps, deadline())).rejects.toThrow('503');
    old.store.record = record;
    // The retry reaches the new revision: it replays v1's analysis and writes it, under v1's model.
    const again = await handle(parsePush(body), next.deps, deadline());
    expect(again).toMatchObject({ status: 'ok', analysed: false, memo: 'hit' });
    expect(old.analyzer.calls).toHaveLength(1);
    expect(next.analyzer.calls).toHaveLength(0);
    const rows = old.store.rowsFor(again.dedupKey);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 'ok', model: 'scripted', worker_version: 'test' });
  });

  it('asks the store when the memo cannot tell whether the key was leased', async () => {
    const { memoStore, next, body, seen, deadline } = revisions();
    memoStore.hasLease = () => Promise.reject(new Error('503 from the memo bucket'));
    expect(await handle(parsePush(body), next.deps, deadline())).toMatchObject({ status: 'ok' });
    expect(seen.count).toBe(1);
  });

  it('still skips the lookup for a key no delivery of any version has touched', async () => {
    const { next, body, seen, deadline } = revisions();
    expect(await handle(parsePush(body), next.deps, deadline())).toMatchObject({
      status: 'ok',
      analysed: true,
    });
    expect(seen.count).toBe(0);
  });

  it('excludes the other revision’s write: the new version waits for the old one’s write, then pays nothing and writes nothing', async () => {
    const { time, old, next, body, deadline } = revisions();
    // The old revision's MERGE is slow: 20 s.
    const record = old.store.record.bind(old.store);
    const writes: Array<{ atMs: number; doneMs?: number }> = [];
    let slow = true;
    old.store.record = async (row: Row) => {
      const write: { atMs: number; doneMs?: number } = { atMs: time.ms };
      writes.push(write);
      if (slow) {
        slow = false;
        await time.sleep(20_000);
      }
      const inserted = await record(row);
      write.doneMs = time.ms;
      return inserted;
    };
    const first = handle(parsePush(body), old.deps, deadline());
    await time.advance(1_000);
    // The same document reaches the new revision while the old one writes.
    const second = handle(parsePush(body), next.deps, deadline());
    for (let t = 0; t < 40; t++) await time.advance(1_000);
    const [a, b] = await Promise.all([first, second]);
    expect(a).toMatchObject({ status: 'ok' });
    expect(b).toMatchObject({ status: 'duplicate', analysed: false });
    expect(next.analyzer.calls).toHaveLength(0);
    expect(old.store.rowsFor(a.dedupKey)).toHaveLength(1);
    // No write of the new revision overlapped the old one's.
    const oldWrite = writes[0]!;
    for (const w of writes.slice(1)) expect(w.atMs).toBeGreaterThanOrEqual(oldWrite.doneMs!);
  });
});

describe("the delivery's deadline during a memo call", () => {
  /**
   * A memo whose keep never answers, with its own call bound, and the delivery it runs for: the
   * settled outcome (an analysis or the error) once the test moves time.
   */
  function hungKeep(callTimeoutMs: number, deadlineMs: number) {
    const time = new ManualTime();
    const store = new MemoryMemoStore();
    store.create = () => new Promise(() => {});
    const memo = new AnalysisMemo(store, onTime(time, { callTimeoutMs }));
    const deadline = Deadline.after(deadlineMs, time.clock, time);
    const settled = analyse(memo, KEY, async () => paid(), undefined, deadline).then(
      (analysed) => analysed,
      (error: unknown) => error,
    );
    return { time, settled };
  }

  it('ends the delivery (503) instead of passing the memo by and going on past its deadline (soak I6, seed 306)', async () => {
    // The memo call's own bound (60 s) is later than the deadline (10 s).
    const { time, settled } = hungKeep(60_000, 10_000);
    await time.advance(11_000);
    expect(await settled).toBeInstanceOf(DeadlineError);
  });

  it('still passes the memo by when a call outlasts its own bound, within the deadline', async () => {
    const { time, settled } = hungKeep(5_000, 60_000);
    for (let t = 0; t < 10; t++) await time.advance(1_000);
    expect(await settled).toMatchObject({ source: 'analyzer' });
  });
});

describe('interleaving 4: a lease shorter than the work', () => {
  /** One memo store, and a clock and timers the test moves. */
  let time: ManualTime;
  let store: MemoryMemoStore;
  beforeEach(() => {
    time = new ManualTime();
    store = new MemoryMemoStore();
  });
  /** Two instances over the memo store. */
  function twoInstances() {
    // The default lease (15 s), renewed every 5 s by its holder while it works.
    const make = () => new AnalysisMemo(store, onTime(time));
    return { store, a: make(), b: make() };
  }
  const deadline = (ms: number) => Deadline.after(ms, time.clock, time);
  /** `memo`'s turn to write KEY, asked for now: `came()` says whether it has come yet. */
  function askTurn(memo: AnalysisMemo) {
    let came = false;
    const turn = memo.leases.writeTurn(KEY, deadline(498_000)).then((t) => {
      came = true;
      return t;
    });
    return { turn, came: () => came };
  }

  it("keeps the lease for the holder's whole analysis: a 100 s analysis on one instance is not paid again on another", async () => {
    const { a, b } = twoInstances();
    const { work: workA, finish } = held();
    const workB = jest.fn(async () => paid(9999));
    // A doubled notification: the same upload reaches two instances together.
    const first = analyse(a, KEY, workA, undefined, deadline(498_000));
    await settle();
    const second = analyse(b, KEY, workB, undefined, deadline(498_000));
    await time.advance(100_000);
    finish(paid());
    await time.advance(1_000);
    expect(await first).toMatchObject({ source: 'analyzer' });
    expect(await second).toEqual({ result: paid(), source: 'shared' });
    expect(workB).not.toHaveBeenCalled();
  });

  it('interleaving 7: a delivery on another instance writes only after the holder has written (no overlapping MERGEs)', async () => {
    const { a, b } = twoInstances();
    // A doubled notification: A analyses and starts its write; B arrives just after.
    const first = analyse(a, KEY, async () => paid(), undefined, deadline(498_000));
    await settle();
    const second = analyse(b, KEY, async () => paid(9999), undefined, deadline(498_000));
    await first;
    const turnA = await a.leases.writeTurn(KEY, deadline(498_000));
    await time.advance(1_000);
    // B found A's analysis in the memo while A's write runs.
    expect(await second).toEqual({ result: paid(), source: 'memo' });
    const turnB = askTurn(b);
    // A's MERGE is slow (20 s): B does not write meanwhile, however long it takes.
    await time.advance(20_000);
    expect(turnB.came()).toBe(false);
    turnA.done();
    // Once A's lease runs out (at most one lease time after its write), B takes it over.
    await time.advance(15_000);
    expect(turnB.came()).toBe(true);
    (await turnB.turn).done();
  });

  it('interleaving 7: a delivery whose lease failed and never wrote does not let a later one on its instance write unguarded (soak I4, seed 112)', async () => {
    let failLease = true;
    const flaky = over(store, {
      lease: (key, until, now) =>
        failLease ? Promise.reject(new Error('503')) : store.lease(key, until, now),
    });
    const options = onTime(time);
    const a = new AnalysisMemo(flaky, options);
    const b = new AnalysisMemo(store, options);
    // On A, a delivery whose lease call failed analyses and is cut at its deadline before its write.
    await expect(analyse(a, KEY, unavailable)).rejects.toMatchObject({ code: 'analyzer_unavailable' });
    failLease = false;
    // Later, B analyses and writes slowly; A's next delivery finds the analysis in the memo.
    await analyse(b, KEY, async () => paid(), undefined, deadline(498_000));
    const turnB = await b.leases.writeTurn(KEY, deadline(498_000));
    expect(await analyse(a, KEY, async () => paid(9999), undefined, deadline(498_000))).toMatchObject({
      source: 'memo',
    });
    const turnA = askTurn(a);
    await time.advance(20_000);
    expect(turnA.came()).toBe(false);
    turnB.done();
    await time.advance(15_000);
    expect(turnA.came()).toBe(true);
    (await turnA.turn).done();
  });

  it('takes the lease for the write when the memo refused both analyses theirs: the two writes do not overlap (soak I4, seeds 70, 272)', async () => {
    // A doubled notification: on each instance the first lease call (the analysis's) answers 503.
    const refusingFirstLease = (): MemoStore =>
      leasing(store, (call, key, until, now) =>
        call === 1 ? Promise.reject(new Error('503')) : store.lease(key, until, now),
      );
    const options = onTime(time);
    const a = new AnalysisMemo(refusingFirstLease(), options);
    const b = new AnalysisMemo(refusingFirstLease(), options);
    const workA = jest.fn(async () => paid());
    const workB = jest.fn(async () => paid(9999));
    // Both analyse without a lease (the memo failing never stops the work)...
    await Promise.all([
      analyse(a, KEY, workA, undefined, deadline(498_000)),
      analyse(b, KEY, workB, undefined, deadline(498_000)),
    ]);
    expect([workA.mock.calls.length, workB.mock.calls.length]).toEqual([1, 1]);
    // ...but only one writes at a time: B waits while A's MERGE runs.
    const turnA = await a.leases.writeTurn(KEY, deadline(498_000));
    const turnB = askTurn(b);
    await time.advance(30_000);
    expect(turnB.came()).toBe(false);
    // A's write answered: its lease ends at once, and B goes within one poll (not a lease time).
    turnA.done(true);
    await time.advance(1_000);
    expect(turnB.came()).toBe(true);
    (await turnB.turn).done(true);
  });

  it('waits out a lease its own timed-out call created, then takes it over, within its deadline', async () => {
    // The analysis's lease call takes 7 s: past the 5 s call timeout, yet the bucket creates it.
    const slowFirst = leasing(store, (call, key, until, now) =>
      call === 1 ? time.sleep(7_000).then(() => store.lease(key, until, now)) : store.lease(key, until, now),
    );
    const memo = new AnalysisMemo(slowFirst, onTime(time));
    const analysed = analyse(memo, KEY, async () => paid(), undefined, deadline(498_000));
    await settle();
    await time.advance(5_000);
    expect(await analysed).toMatchObject({ source: 'analyzer' });
    await time.advance(3_000);
    // The orphan lease (nobody renews it) runs until 15 s; the write waits for it, then goes.
    const orphan = store.leases.get(AnalysisMemo.leaseKey(KEY))!;
    const round0 = orphan.expiresAt.getTime();
    expect(round0).toBe(time.ms - 8_000 + 15_000);
    const turn = askTurn(memo);
    while (time.ms < round0 - 1_000 && !turn.came()) await time.advance(500);
    expect(turn.came()).toBe(false);
    await time.advance(2_000);
    expect(turn.came()).toBe(true);
    expect(store.leases.get(AnalysisMemo.leaseKey(KEY))!.holder).not.toBe(orphan.holder);
    (await turn.turn).done(true);
  });

  it('moves the lease past the bound of the write it guards: a holder killed mid-statement still keeps the next writer out (soak I4, seeds 339, 773)', async () => {
    // On BigQuery, whose jobs run on without their client.
    const make = () => new AnalysisMemo(store, onTime(time, { writesOutliveInstance: true }));
    const [a, b] = [make(), make()];
    await analyse(a, KEY, async () => paid(), undefined, deadline(300_000));
    const holderDeadline = time.ms + 298_000;
    const turnA = await a.leases.writeTurn(KEY, deadline(298_000));
    // On taking the turn the lease already runs past the deadline (the bound of the MERGE's
    // jobTimeoutMs) by one lease time: no renewal is needed after that, so a killed holder is covered.
    expect(store.leases.get(AnalysisMemo.leaseKey(KEY))!.expiresAt.getTime()).toBe(holderDeadline + 15_000);
    // The holder's write is cut at shutdown (its statement may still run): the lease stays.
    turnA.done(false);
    const turnB = askTurn(b);
    // Second by second (B looks at the lease every poll), up to 1 s before the lease's end.
    while (time.ms < holderDeadline + 14_000 && !turnB.came()) await time.advance(1_000);
    expect(turnB.came()).toBe(false);
    await time.advance(2_000);
    expect(turnB.came()).toBe(true);
    (await turnB.turn).done(true);
  });

  it('keeps the write’s lease to its heartbeat on a store whose writes die with their process (SQLite): a killed holder holds up the next writer one lease time at most', async () => {
    const { store, a } = twoInstances();
    await analyse(a, KEY, async () => paid(), undefined, deadline(300_000));
    const turn = await a.leases.writeTurn(KEY, deadline(298_000));
    expect(store.leases.get(AnalysisMemo.leaseKey(KEY))!.expiresAt.getTime()).toBeLessThanOrEqual(
      time.ms + 15_000,
    );
    turn.done(true);
  });

  it('never holds the work up when a lease call fails after it saw a holder: it goes on, and says so (the excuse the invariants name)', async () => {
    // The waiter's second lease call (after the holder's lease was seen) answers 503.
    const flaky = leasing(store, (call, key, until, now) =>
      call === 2 ? Promise.reject(new Error('503')) : store.lease(key, until, now),
    );
    const logger = new MemoryLogger();
    const options = onTime(time);
    const holder = new AnalysisMemo(store, options);
    const waiter = new AnalysisMemo(flaky, { ...options, logger });
    const first = analyse(holder, KEY, held().work, undefined, deadline(498_000));
    first.catch(() => {});
    await settle();
    const work = jest.fn(async () => paid(9999));
    const rows = { seen: jest.fn(async () => false) };
    const second = analyse(waiter, KEY, work, undefined, deadline(498_000), undefined, rows);
    for (let t = 0; t < 3; t++) await time.advance(1_000);
    expect(await second).toMatchObject({ source: 'analyzer' });
    expect(flaky.leaseCalls()).toBe(2);
    expect(rows.seen).toHaveBeenCalledWith(KEY, expect.anything());
    expect(logger.entries.map((e) => e.message)).toContain(
      'the memo could not take a lease: working without one',
    );
  });

  it('renews every third of the lease even while an earlier renewal hangs (soak I4, seed 240)', async () => {
    let renewals = 0;
    const slow = over(store, {
      renew: () => {
        renewals += 1;
        return new Promise(() => {});
      },
    });
    const holder = new AnalysisMemo(slow, onTime(time));
    const outcome = analyse(holder, KEY, held().work, undefined, deadline(60_000));
    outcome.catch(() => {});
    await settle();
    await time.advance(15_500);
    // At 5, 10 and 15 s, not 5 then 15 (a renewal that waited for the hung one, 5 s call timeout).
    expect(renewals).toBe(3);
  });

  it('renews the lease while the holder works and writes, and stops renewing when its write is done', async () => {
    const { store, a } = twoInstances();
    const { work, finish } = held();
    const outcome = analyse(a, KEY, work, undefined, deadline(498_000));
    const leaseOf = () => store.leases.get(AnalysisMemo.leaseKey(KEY))!.expiresAt.getTime();
    await settle();
    const taken = leaseOf();
    expect(taken).toBe(time.ms + 15_000);
    await time.advance(100_000);
    // Renewed every 5 s: it still lasts one lease time past now, 100 s into the work.
    expect(leaseOf()).toBeGreaterThan(time.ms + 10_000);
    finish(paid());
    await outcome;
    // The lease now guards the write: still renewed while the delivery writes its row.
    const turn = await a.leases.writeTurn(KEY, deadline(300_000));
    await time.advance(30_000);
    expect(leaseOf()).toBeGreaterThan(time.ms + 10_000);
    turn.done();
    const last = leaseOf();
    await time.advance(60_000);
    expect(leaseOf()).toBe(last);
    expect(last).toBeLessThan(time.ms);
  });

  it('still expires on its own when the holder dies: the waiting delivery then does the work', async () => {
    const { store, b } = twoInstances();
    // The holder took its 15 s lease, then its instance was killed: nobody renews it.
    await store.lease(AnalysisMemo.leaseKey(KEY), new Date(time.ms + 15_000), new Date(time.ms));
    const work = jest.fn(async () => paid());
    const outcome = analyse(b, KEY, work, undefined, deadline(498_000));
    await time.advance(14_000);
    expect(work).not.toHaveBeenCalled();
    await time.advance(2_000);
    expect(await outcome).toMatchObject({ source: 'analyzer' });
    expect(work).toHaveBeenCalledTimes(1);
  });

  it("answers 503 without paying when its own deadline comes before the holder's analysis", async () => {
    const { store, b } = twoInstances();
    await store.lease(AnalysisMemo.leaseKey(KEY), new Date(time.ms + 400_000), new Date(time.ms));
    const work = jest.fn(async () => paid());
    const outcome = analyse(b, KEY, work, undefined, deadline(30_000)).catch((e: unknown) => e);
    await time.advance(31_000);
    expect(await outcome).toBeInstanceOf(DeadlineError);
    expect(work).not.toHaveBeenCalled();
  });
});

describe('interleaving 5: paid work paid again', () => {
  const usage = { promptTokens: 2400, outputTokens: 600, totalTokens: 3000 };

  function failingFirstWrite(admission?: QuotaGate) {
    const memoStore = new MemoryMemoStore();
    const s = setup(memoStore, admission, { leaseMs: 0 });
    // The first write fails (a full DML queue): Pub/Sub delivers again.
    failWrites(
      s.store,
      1,
      new TransientError('bigquery_dml_queue_full', 'Too many DML statements outstanding'),
    );
    return { ...s, memoStore };
  }

  it.each([
    ['analysis_failed', "Gemini's answer did not match the analysis schema after 2 attempts"],
    ['safety_blocked', 'Gemini blocked the document: PROHIBITED_CONTENT'],
  ] as const)(
    'replays a paid %s from the memo after a failed write, without paying again',
    async (reason, detail) => {
      const { store, analyzer, deps, body } = failingFirstWrite();
      analyzer.failNext(new RejectionError(reason, detail, { usage }));
      await expect(handle(parsePush(body), deps)).rejects.toMatchObject({ code: 'bigquery_dml_queue_full' });
      const retry = await handle(parsePush(body), deps);
      expect(retry).toMatchObject({ status: 'rejected', reason, analysed: false, memo: 'hit' });
      expect(analyzer.calls).toHaveLength(1);
      expect(store.rowsFor(retry.dedupKey)[0]).toMatchObject({
        status: 'rejected',
        reason,
        total_tokens: 3000,
      });
    },
  );

  it('does not keep a refusal that cost nothing (the object is gone): the memo holds paid outcomes only', async () => {
    const { deps, body, memoStore } = failingFirstWrite();
    deps.reader = { read: async () => Promise.reject(new RejectionError('object_gone', 'generation gone')) };
    await expect(handle(parsePush(body), deps)).rejects.toMatchObject({ code: 'bigquery_dml_queue_full' });
    expect(memoStore.entries.size).toBe(0);
  });

  it('records the tokens of a paid first call when the second got a 429 and the gate ran the analysis again', async () => {
    const gate = new QuotaGate({ maxInFlight: 2, maxWaitMs: 60_000, initialPauseMs: 0, maxPauseMs: 0 });
    const { store, analyzer, deps, body } = failingFirstWrite(gate);
    // First run: one call answered (paid) outside the schema, the second refused with a 429.
    analyzer.failNext(new TransientError(RATE_LIMITED, 'Gemini: 429 RESOURCE_EXHAUSTED', { usage }));
    await expect(handle(parsePush(body), deps)).rejects.toMatchObject({ code: 'bigquery_dml_queue_full' });
    const retry = await handle(parsePush(body), deps);
    expect(analyzer.calls).toHaveLength(2);
    // 3000 tokens of the refused run + 1500 of the run that answered, kept in the memo with the result.
    expect(store.rowsFor(retry.dedupKey)[0]).toMatchObject({ status: 'ok', total_tokens: 4500 });
    expect(retry).toMatchObject({ memo: 'hit' });
  });
});
