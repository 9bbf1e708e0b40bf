import { isRateLimited, QuotaGate, RATE_LIMITED } from '../src/adapters/quota-gate';
import { RejectionError, TransientError } from '../src/core/errors';
import { ManualTime, settle } from './support/manual-time';

const quotaSpent = () => new TransientError(RATE_LIMITED, 'Gemini: 429 RESOURCE_EXHAUSTED');

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
}

describe('QuotaGate', () => {
  function setup(maxInFlight: number, maxWaitMs = 60_000) {
    const time = new ManualTime();
    const gate = new QuotaGate({
      maxInFlight,
      maxWaitMs,
      initialPauseMs: 100,
      maxPauseMs: 1_000,
      clock: time.clock,
      timers: time,
      random: () => 1,
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

  it('halves the admitted works on a 429, pauses, retries the refused delivery first, and grows back on successes', async () => {
    const { time, gate, works } = setup(4);
    const results = ['a', 'b', 'c', 'd', 'e'].map((name) => gate.run(works.work(name)));
    await settle();
    expect(works.running).toEqual(['a', 'b', 'c', 'd']);

    await works.finish('a', quotaSpent());
    expect(gate.admitting).toBe(2);
    // 3 still run, over the new limit of 2: nobody is admitted, not even after the pause.
    await time.advance(100);
    expect(works.running).toEqual(['b', 'c', 'd']);

    await works.finish('b');
    // A success adds one: room for one again, and the refused delivery goes first, ahead of e.
    expect(gate.admitting).toBe(3);
    expect(works.started.slice(4)).toEqual(['a']);
    await works.finish('c');
    expect(gate.admitting).toBe(4);
    expect(works.started.slice(5)).toEqual(['e']);
    await works.finish('d');
    await works.finish('a');
    await works.finish('e');
    await expect(Promise.all(results)).resolves.toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('cuts once per round: 429s of works admitted before the cut do not cut again', async () => {
    const { time, gate, works } = setup(8);
    const results = ['a', 'b', 'c'].map((name) => gate.run(works.work(name)).catch((e: unknown) => e));
    await settle();
    await works.finish('a', quotaSpent());
    await works.finish('b', quotaSpent());
    expect(gate.admitting).toBe(4);
    await works.finish('c');
    expect(gate.admitting).toBe(5);
    await time.advance(1_000);
    expect(works.running.sort()).toEqual(['a', 'b']);
    await works.finish('a');
    await works.finish('b');
    await expect(Promise.all(results)).resolves.toEqual(['a', 'b', 'c']);
  });

  it('waits out a pause before admitting anyone after a 429 with room to spare', async () => {
    const { time, gate, works } = setup(8);
    const result = gate.run(works.work('a'));
    await settle();
    await works.finish('a', quotaSpent());
    expect(works.running).toEqual([]);
    await time.advance(99);
    expect(works.running).toEqual([]);
    await time.advance(1);
    expect(works.running).toEqual(['a']);
    expect(works.waited.get('a')).toBe(100);
    await works.finish('a');
    await expect(result).resolves.toBe('a');
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

  it('refuses a maxInFlight below 1', () => {
    expect(() => new QuotaGate({ maxInFlight: 0, maxWaitMs: 1 })).toThrow(/maxInFlight/);
  });
});
