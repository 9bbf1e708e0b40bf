import {
  AdaptiveLimit,
  floorFor,
  NAMED_WAIT_SPREAD_MS,
  QuotaGate,
  type QuotaGateOptions,
  RecentCount,
} from '../src/adapters/quota-gate';
import { Deadline, ShuttingDownError } from '../src/core/deadline';
import { isRateLimited, RATE_LIMITED, RejectionError, TransientError } from '../src/core/errors';
import { ManualTime, settle } from './support/manual-time';

const quotaSpent = () => new TransientError(RATE_LIMITED, 'Gemini: 429 RESOURCE_EXHAUSTED');
/** A 429 of Vertex AI's shared pay-as-you-go pool (no capacity now, whatever this project's rate). */
const poolBusy = () =>
  new TransientError(RATE_LIMITED, 'Gemini: 429 Resource exhausted, please try again later.', {
    sharedCapacity: true,
  });
/** A 429 of a full tier window, naming its wait (the Gemini API's RetryInfo). */
const windowFull = (retryAfterMs: number) =>
  new TransientError(RATE_LIMITED, 'Gemini: 429 RESOURCE_EXHAUSTED, retry in …', { retryAfterMs });

/** A work the test finishes by hand: records when it started and how long its delivery waited. */
class Works {
  readonly started: string[] = [];
  readonly waited = new Map<string, number>();
  private readonly finishers = new Map<string, (outcome: Error | undefined) => void>();
  work(name: string) {
    return (waitedMs: number) => {
      this.started.push(name);
      this.waited.set(name, waitedMs);
      return new Promise<string>((resolve, reject) => {
        this.finishers.set(name, (error) => (error ? reject(error) : resolve(name)));
      });
    };
  }
  async finish(name: string, error?: Error): Promise<void> {
    const finisher = this.finishers.get(name);
    if (!finisher) throw new Error(`${name} is not running`);
    this.finishers.delete(name);
    finisher(error);
    await settle();
  }
  get running(): string[] {
    return [...this.finishers.keys()];
  }
  /** Finishes every running work, and those admitted as they end, until none runs; `between` runs after each round. */
  async finishAll(between: () => Promise<void> = async () => {}): Promise<void> {
    for (let running = this.running; running.length > 0; running = this.running) {
      for (const name of running) await this.finish(name);
      await between();
    }
  }
}

describe('AdaptiveLimit: the works admitted at once, learnt from what the analyzer answers', () => {
  /** `n` successes of `latencyMs` each, with `demand` deliveries running or waiting. */
  const succeed = (limit: AdaptiveLimit, n: number, latencyMs: number, demand = 1_000) => {
    for (let i = 0; i < n; i++) limit.succeeded(latencyMs, demand);
  };

  it('grows by one per success while it is in use, up to its ceiling and no further', () => {
    const limit = new AdaptiveLimit(40, 4, 2, 1);
    succeed(limit, 4, 6_000);
    // A full round of successes doubles it, as a slow start does.
    expect(limit.current).toBe(8);
    succeed(limit, 100, 6_000);
    expect(limit.current).toBe(40);
  });

  it('does not grow while fewer than half of it are running or waiting: an idle instance learns nothing', () => {
    const limit = new AdaptiveLimit(40, 10);
    succeed(limit, 50, 6_000, 4);
    expect(limit.current).toBe(10);
    succeed(limit, 1, 6_000, 5);
    expect(limit.current).toBe(11);
  });

  it('halves on a 429, never under its floor (an eighth of the ceiling), and recovers on the successes that follow', () => {
    const limit = new AdaptiveLimit(40, 40);
    limit.rateLimited();
    expect(limit.current).toBe(20);
    for (let i = 0; i < 10; i++) limit.rateLimited();
    expect(limit.current).toBe(5);
    succeed(limit, 1, 6_000);
    expect(limit.current).toBe(6);
    succeed(limit, 34, 6_000);
    expect(limit.current).toBe(40);
  });

  it('tells an instance over its own quota (most recent answers 429s) from a 429 among accepted calls', () => {
    const limit = new AdaptiveLimit(40, 8);
    succeed(limit, 20, 6_000, 0);
    // A shared capacity's burst refusing one call in three: never most of the answers.
    for (let i = 0; i < 60; i++) {
      if (i % 3 === 0) expect(limit.refused()).toBe(false);
      else limit.succeeded(6_000, 0);
    }
    // A tier's window, once over it, refuses every call: most of the last answers within a round.
    const verdicts = Array.from({ length: 8 }, () => limit.refused());
    expect(verdicts[0]).toBe(false);
    expect(verdicts.at(-1)).toBe(true);
  });

  it('halves on a 429 down to what the accepted rate needs (sustained), never under it, and never grows by it', () => {
    const limit = new AdaptiveLimit(40, 40);
    limit.rateLimited(28);
    expect(limit.current).toBe(28);
    limit.rateLimited(28);
    expect(limit.current).toBe(28);
    limit.rateLimited(10);
    expect(limit.current).toBe(14);
    limit.rateLimited(100);
    expect(limit.current).toBe(14);
  });

  it('floors at an eighth of the ceiling, at least 1', () => {
    expect(floorFor(40)).toBe(5);
    expect(floorFor(4)).toBe(1);
    expect(floorFor(1)).toBe(1);
    const one = new AdaptiveLimit(4, 4);
    for (let i = 0; i < 5; i++) one.rateLimited();
    expect(one.current).toBe(1);
  });

  it('shrinks when the latency inflates past twice its long-run level, and grows again once it is the norm', () => {
    const limit = new AdaptiveLimit(100, 50);
    succeed(limit, 100, 1_000);
    expect(limit.current).toBe(100);
    expect(limit.gradient).toBe(1);
    // Every call now takes 5 s: the analyzer is queueing them, more at once buy no throughput.
    succeed(limit, 30, 5_000);
    expect(limit.gradient).toBeLessThan(1);
    const shrunk = limit.current;
    expect(shrunk).toBeLessThan(100);
    expect(shrunk).toBeGreaterThanOrEqual(50);
    // The long-run level catches up with a latency that lasts (a slower model, not a queue).
    succeed(limit, 400, 5_000);
    expect(limit.gradient).toBe(1);
    expect(limit.current).toBe(100);
  });

  it("does not take the latency's own tail for a queue", () => {
    const limit = new AdaptiveLimit(40, 40);
    // One call in 20 takes 8× the median, as the sweep's slow latency model does.
    for (let i = 0; i < 400; i++) limit.succeeded(i % 20 === 0 ? 160_000 : 20_000, 1_000);
    expect(limit.current).toBe(40);
    expect(limit.gradient).toBe(1);
  });

  it('never shrinks under its floor however long the latency keeps inflating', () => {
    const limit = new AdaptiveLimit(40, 40);
    succeed(limit, 100, 10);
    for (let ms = 20; ms < 1e9; ms *= 2) succeed(limit, 20, ms);
    expect(limit.current).toBe(5);
  });
});

describe('RecentCount: successes in the last minute, in the same memory whatever the rate', () => {
  it('counts the events of the current second and the window before it, and forgets older ones', () => {
    const count = new RecentCount(60_000);
    count.add(1_000);
    count.add(30_500);
    count.add(30_900);
    expect(count.count(30_999)).toBe(3);
    expect(count.count(60_999)).toBe(3); // second 1 is the oldest of the 60 ending at second 60
    expect(count.count(61_000)).toBe(2); // second 1 has left the window
    expect(count.count(90_999)).toBe(0);
    count.add(120_000); // reuses the slot of second 0's ring position without its old count
    expect(count.count(120_000)).toBe(1);
  });

  it("keeps a minute's worth of counts, not of events: a million successes in a minute take what one does", () => {
    const one = new RecentCount(60_000);
    one.add(0);
    const many = new RecentCount(60_000);
    for (let i = 0; i < 1_000_000; i++) many.add(i * 0.05);
    expect(many.count(49_999)).toBe(1_000_000);
    expect(JSON.stringify(many).length).toBeLessThanOrEqual(JSON.stringify(one).length + 60 * 8);
  });
});

describe('QuotaGate', () => {
  function setup(maxInFlight: number, maxWaitMs = 60_000, extra: Partial<QuotaGateOptions> = {}) {
    const time = new ManualTime();
    const gate = new QuotaGate({
      maxInFlight,
      maxWaitMs,
      initialPauseMs: 100,
      maxPauseMs: 1_000,
      clock: time.clock,
      timers: time,
      random: () => 1,
      ...extra,
    });
    return { time, gate, works: new Works() };
  }

  it('admits at most maxInFlight works at once; the others wait in arrival order, holding nothing', async () => {
    const { gate, works } = setup(2);
    const results = ['a', 'b', 'c', 'd'].map((name) => gate.run(works.work(name)));
    await settle();
    expect(works.started).toEqual(['a', 'b']);
    expect(gate.queued).toBe(2);

    await works.finish('b');
    expect(works.started).toEqual(['a', 'b', 'c']);
    await works.finish('a');
    expect(works.started).toEqual(['a', 'b', 'c', 'd']);
    await works.finish('c');
    await works.finish('d');
    await expect(Promise.all(results)).resolves.toEqual(['a', 'b', 'c', 'd']);
    expect(works.waited.get('a')).toBe(0);
  });

  describe('with memory bounded by bytes (maxBytesInFlight)', () => {
    const bytesGate = (initialInFlight: number) =>
      setup(2, 60_000, { initialInFlight, maxBytesInFlight: 2 * 100 });

    it('admits small documents past maxInFlight while their declared bytes fit, and holds a large one until they do', async () => {
      const { gate, works } = bytesGate(10);
      const small = ['s1', 's2', 's3', 's4', 's5'].map((name) => gate.run(works.work(name), undefined, 10));
      const large = ['L1', 'L2'].map((name) => gate.run(works.work(name), undefined, 100));
      await settle();
      // 5 × 10 + 100 = 150 bytes fit in 200; the second large one (250) waits, and so does anyone behind it.
      expect(works.running).toEqual(['s1', 's2', 's3', 's4', 's5', 'L1']);
      expect(gate.queued).toBe(1);
      for (const name of ['s1', 's2', 's3', 's4']) await works.finish(name);
      expect(works.running).toEqual(['s5', 'L1']);
      await works.finish('s5');
      expect(works.running).toEqual(['L1', 'L2']);
      await works.finish('L1');
      await works.finish('L2');
      await expect(Promise.all([...small, ...large])).resolves.toHaveLength(7);
    });

    it('admits a document larger than the whole budget when nothing else runs', async () => {
      const { gate, works } = bytesGate(10);
      const huge = gate.run(works.work('huge'), undefined, 1_000);
      const next = gate.run(works.work('next'), undefined, 1);
      await settle();
      expect(works.running).toEqual(['huge']);
      await works.finish('huge');
      expect(works.running).toEqual(['next']);
      await works.finish('next');
      await expect(Promise.all([huge, next])).resolves.toEqual(['huge', 'next']);
    });

    it('lets the learnt limit grow past maxInFlight (small documents), where the count alone would stop it', async () => {
      const { gate, works } = bytesGate(2);
      const names = Array.from({ length: 12 }, (_, i) => `w${i}`);
      const results = names.map((name) => gate.run(works.work(name), undefined, 1));
      await settle();
      expect(works.running).toHaveLength(2);
      // Each success adds one while the line is used: 2 → 3 → 4 …
      await works.finish('w0');
      await works.finish('w1');
      expect(gate.admitting).toBe(4);
      expect(works.running).toHaveLength(4);
      for (const name of [...works.running]) await works.finish(name);
      expect(gate.admitting).toBeGreaterThan(2 * 2);
      await works.finishAll();
      await expect(Promise.all(results)).resolves.toHaveLength(12);
    });
  });

  it('halves the admitted works once most recent answers are 429s (over its own quota), pauses, and grows back on successes', async () => {
    const { time, gate, works } = setup(4);
    const results = ['a', 'b', 'c', 'd', 'e'].map((name) => gate.run(works.work(name)));
    await settle();
    expect(works.running).toEqual(['a', 'b', 'c', 'd']);

    await works.finish('a', quotaSpent());
    await works.finish('b', quotaSpent());
    // Two 429s of the last answers: not yet most of them, only a pause.
    expect(gate.admitting).toBe(4);
    await works.finish('c', quotaSpent());
    expect(gate.admitting).toBe(2);
    // d still runs; after the pause one refused delivery goes again, ahead of e.
    await time.advance(1_000);
    expect(works.running).toHaveLength(2);
    expect(works.running).not.toContain('e');
    await works.finish('d');
    // A success adds one: room for two at once again.
    expect(gate.admitting).toBe(3);
    await works.finishAll();
    await expect(Promise.all(results)).resolves.toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  /** Five deliveries at a gate of 4: two accepted, then `refusal` answers the third. */
  async function refusedAfterTwoAccepted(refusal: Error) {
    const { time, gate, works } = setup(4);
    const results = ['a', 'b', 'c', 'd', 'e'].map((name) => gate.run(works.work(name)));
    await settle();
    await works.finish('a');
    await works.finish('b');
    const before = gate.admitting;
    await works.finish('c', refusal);
    return { time, gate, works, results, before };
  }

  it('cuts at once for a 429 that names its wait, even among mostly accepted calls: a window of the project’s own is full', async () => {
    const { time, gate, works, results, before } = await refusedAfterTwoAccepted(windowFull(1_000));
    expect(gate.admitting).toBe(Math.floor(before / 2));
    await works.finishAll(() => time.advance(20_000));
    await expect(Promise.all(results)).resolves.toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it("never cuts for the shared pool's 429s, however many: it pauses, and each refused work backs off on its own", async () => {
    const { time, gate, works } = setup(4);
    const results = ['a', 'b', 'c', 'd', 'e'].map((name) => gate.run(works.work(name)));
    await settle();
    expect(works.running).toEqual(['a', 'b', 'c', 'd']);
    // Every answer a 429 of the pool: an instance over a quota of its own would halve here.
    for (const name of ['a', 'b', 'c', 'd']) await works.finish(name, poolBusy());
    expect(gate.admitting).toBe(4);
    // Nobody goes before the pause and the refused works' own backoff (0.5 s) are over; then four
    // at once again, the refused ones first.
    await time.advance(450);
    expect(works.running).toEqual([]);
    await time.advance(1_000);
    expect(works.running.sort()).toEqual(['a', 'b', 'c', 'd']);
    await works.finishAll();
    await expect(Promise.all(results)).resolves.toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('does not cut for a 429 that says nothing among mostly accepted calls: it only pauses', async () => {
    const { time, gate, works, results, before } = await refusedAfterTwoAccepted(quotaSpent());
    expect(gate.admitting).toBe(before);
    // The pause: nobody is admitted until it ends, then the refused delivery goes first.
    const started = works.started.length;
    await time.advance(50);
    expect(works.started.length).toBe(started);
    await time.advance(1_000);
    expect(works.started.slice(started)).toEqual(['c']);
    await works.finishAll();
    await expect(Promise.all(results)).resolves.toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it("never cuts under the works the last minute's accepted rate needs (Little's law), and cuts past it once that rate is gone", async () => {
    const { time, gate, works } = setup(40);
    let n = 0;
    const results: Promise<unknown>[] = [];
    const more = (count: number) => {
      for (let i = 0; i < count; i++) results.push(gate.run(works.work(`w${n++}`)).catch((e: unknown) => e));
    };
    more(80);
    await settle();
    // Seven rounds of 40 analyses of 6 s: 280 accepted in the last minute, 28 at once by Little's law.
    for (let round = 0; round < 7; round++) {
      await time.advance(6_000);
      for (const name of works.running) await works.finish(name);
      more(40);
      await settle();
    }
    expect(gate.admitting).toBe(40);
    // Then the analyzer refuses everything: most recent answers are 429s, and the cut stops at 28, not 20.
    for (const name of works.running.slice(0, 30)) await works.finish(name, quotaSpent());
    expect(gate.admitting).toBe(28);
    // A minute with no success: that rate is gone, and the next cut halves.
    await time.advance(61_000);
    for (const name of works.running.slice(0, 20)) await works.finish(name, quotaSpent());
    expect(gate.admitting).toBe(14);
    await works.finishAll(() => time.advance(10_000));
    await time.advance(10_000);
    await works.finishAll(() => time.advance(10_000));
    expect(await Promise.all(results)).toHaveLength(n);
  });

  it('cuts once per round: 429s of works admitted before the cut do not cut again', async () => {
    const { time, gate, works } = setup(8);
    const names = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
    const results = names.map((name) => gate.run(works.work(name)).catch((e: unknown) => e));
    await settle();
    // Six 429s in a row make most of the last answers: cut to 4, once.
    for (const name of names.slice(0, 6)) await works.finish(name, quotaSpent());
    expect(gate.admitting).toBe(4);
    // Two more 429s of works admitted before that cut: no further cut.
    await works.finish('g', quotaSpent());
    await works.finish('h', quotaSpent());
    expect(gate.admitting).toBe(4);
    await time.advance(10_000);
    await works.finishAll(() => time.advance(10_000));
    await expect(Promise.all(results)).resolves.toEqual(names);
  });

  it('waits out a pause before admitting anyone after a 429 with room to spare', async () => {
    const { time, gate, works } = setup(8);
    const refused = gate.run(works.work('a'));
    await settle();
    await works.finish('a', quotaSpent());
    // The gate pauses for 100 ms: a delivery that arrives meanwhile waits it out.
    const next = gate.run(works.work('b'));
    await settle();
    await time.advance(99);
    expect(works.running).toEqual([]);
    await time.advance(1);
    expect(works.running).toEqual(['b']);
    expect(works.waited.get('b')).toBe(100);
    await works.finish('b');
    await expect(next).resolves.toBe('b');
    await time.advance(1_000);
    await works.finish('a');
    await expect(refused).resolves.toBe('a');
  });

  // Each refusal, and how long the refused work then waits, holding its turn: its own backoff when
  // the 429 names no wait; the named wait and all of the spread after it (random() is 1) when it does.
  it.each([
    [
      'backs off on its own: 0.5 s, doubling, truncated at 2 s',
      [500, 1_000, 2_000, 2_000].map((ms) => [quotaSpent, ms] as const),
    ],
    [
      'waits out the wait a 429 names (a full window: RetryInfo) instead',
      [20_000, 5_000].map((ms) => [() => windowFull(ms), ms + NAMED_WAIT_SPREAD_MS] as const),
    ],
  ])('a refused work %s, holding its turn', async (_, refusals) => {
    const { time, gate, works } = setup(1, 300_000);
    const refused = gate.run(works.work('a'));
    const behind = gate.run(works.work('b'));
    await settle();
    for (const [refusal, waitMs] of refusals) {
      expect(works.running).toEqual(['a']);
      await works.finish('a', refusal());
      await time.advance(waitMs - 1);
      // Its turn is kept: the delivery behind it is not admitted while it waits.
      expect(works.running).toEqual([]);
      await time.advance(1);
    }
    expect(works.running).toEqual(['a']);
    await works.finish('a');
    await expect(refused).resolves.toBe('a');
    await works.finish('b');
    await expect(behind).resolves.toBe('b');
  });

  it('answers at once a 429 whose named wait ends past maxWaitMs: no call can succeed before it', async () => {
    const { time, gate, works } = setup(1, 30_000);
    const refused = gate.run(works.work('a')).catch((e: unknown) => e);
    const behind = gate.run(works.work('b'));
    await settle();
    await works.finish('a', windowFull(40_000));
    const error = await refused;
    expect(isRateLimited(error)).toBe(true);
    expect((error as TransientError).retryAfterMs).toBe(40_000);
    expect(works.started).toEqual(['a']);
    // Its turn is given back: the next delivery runs after the gate's pause (100 ms), not 40 s.
    await time.advance(100);
    expect(works.running).toEqual(['b']);
    await works.finish('b');
    await expect(behind).resolves.toBe('b');
  });

  it("ends a refused work's backoff at once when the instance drains: answered now, not after the backoff", async () => {
    const { time, gate, works } = setup(1);
    const deadline = new Deadline(time.clock.now().getTime() + 300_000, time.clock, time);
    const refused = gate.run(works.work('a'), deadline).catch((e: unknown) => e);
    await settle();
    await works.finish('a', quotaSpent());
    await time.advance(200);
    deadline.drain(time.clock.now().getTime() + 5_000);
    await settle();
    expect(await refused).toBeInstanceOf(ShuttingDownError);
    // Its turn is given back: the next delivery is admitted without waiting for the backoff's end.
    const next = gate.run(works.work('b'));
    await settle();
    expect(works.running).toEqual(['b']);
    await works.finish('b');
    await expect(next).resolves.toBe('b');
  });

  it('gives a delivery not admitted within maxWaitMs a 429 transient failure, and never runs its work', async () => {
    const { time, gate, works } = setup(1, 30_000);
    const first = gate.run(works.work('a'));
    const second = gate.run(works.work('b')).catch((e: unknown) => e);
    await settle();
    await time.advance(30_000);
    const error = await second;
    expect(isRateLimited(error)).toBe(true);
    expect((error as Error).message).toMatch(/not admitted within 30000 ms/);
    expect(works.started).toEqual(['a']);
    expect(gate.queued).toBe(0);
    await works.finish('a');
    await expect(first).resolves.toBe('a');
  });

  it('gives the 429 back once the deadline has passed while the work ran', async () => {
    const { time, gate, works } = setup(1, 10_000);
    const result = gate.run(works.work('a')).catch((e: unknown) => e);
    await settle();
    await time.advance(10_000);
    await works.finish('a', quotaSpent());
    expect(isRateLimited(await result)).toBe(true);
    expect(works.started).toEqual(['a']);
  });

  it('passes any other failure through at once: no retry, no cut, the slot freed', async () => {
    const { gate, works } = setup(2);
    const unavailable = gate.run(works.work('a')).catch((e: unknown) => e);
    const refused = gate.run(works.work('b')).catch((e: unknown) => e);
    const next = gate.run(works.work('c'));
    await settle();
    await works.finish('a', new TransientError('analyzer_unavailable', 'Gemini: 503'));
    await works.finish('b', new RejectionError('analysis_failed', 'Gemini: 400'));
    expect(await unavailable).toMatchObject({ code: 'analyzer_unavailable' });
    expect(await refused).toBeInstanceOf(RejectionError);
    expect(gate.admitting).toBe(2);
    expect(works.started).toEqual(['a', 'b', 'c']);
    await works.finish('c');
    await expect(next).resolves.toBe('c');
  });

  it('starts from initialInFlight and learns its way up to maxInFlight, never past it', async () => {
    const { time, gate, works } = setup(4, 60_000, { initialInFlight: 2 });
    const results = ['a', 'b', 'c', 'd', 'e', 'f'].map((name) => gate.run(works.work(name)));
    await settle();
    expect(works.running).toEqual(['a', 'b']);
    await time.advance(6_000);
    await works.finish('a');
    // One success with deliveries waiting: one more admitted at once.
    expect(gate.admitting).toBe(3);
    expect(works.running).toEqual(['b', 'c', 'd']);
    await works.finish('b');
    await works.finish('c');
    expect(gate.admitting).toBe(4);
    expect(works.running).toEqual(['d', 'e', 'f']);
    await works.finish('d');
    await works.finish('e');
    await works.finish('f');
    expect(gate.admitting).toBe(4);
    await expect(Promise.all(results)).resolves.toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
  });

  it('refuses a maxInFlight below 1', () => {
    expect(() => new QuotaGate({ maxInFlight: 0, maxWaitMs: 1 })).toThrow(/maxInFlight/);
  });
});
