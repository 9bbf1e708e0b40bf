import { UsageError } from '../lib/args';
import {
  concurrencySetting,
  createLimiter,
  DEFAULT_UPLOAD_CONCURRENCY,
  forEachBounded,
  LimiterClosedError,
  MAX_UPLOAD_CONCURRENCY,
  uploadConcurrency,
} from '../lib/bounded';

/** Lets every pending promise callback run (a macrotask turn). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('forEachBounded', () => {
  it('runs at most `limit` items at once, items of one key one after another in the order given', async () => {
    const items = ['a:1', 'b:1', 'a:2', 'c:1', 'a:3', 'b:2', 'd:1', 'e:1'];
    const started: string[] = [];
    const finish = new Map<string, () => void>();
    let running = 0;
    let peak = 0;
    const run = forEachBounded(
      items,
      3,
      (item) => item.split(':')[0]!,
      (item) =>
        new Promise<void>((resolve) => {
          running++;
          peak = Math.max(peak, running);
          started.push(item);
          finish.set(item, () => {
            running--;
            resolve();
          });
        }),
    );
    // Finish whatever runs, oldest first, until everything ran.
    while (started.length < items.length || running > 0) {
      await settle();
      const next = started.find((item) => finish.has(item));
      if (next) {
        finish.get(next)!();
        finish.delete(next);
      }
    }
    expect(await run).toEqual([]);
    expect(peak).toBe(3);
    expect(started.filter((item) => item.startsWith('a:'))).toEqual(['a:1', 'a:2', 'a:3']);
    expect(started.filter((item) => item.startsWith('b:'))).toEqual(['b:1', 'b:2']);
    expect([...started].sort()).toEqual([...items].sort());
  });

  it('tries every item and returns the ones that failed, with their errors', async () => {
    const done: string[] = [];
    const failures = await forEachBounded(
      ['x', 'boom', 'y'],
      2,
      (i) => i,
      async (item) => {
        if (item === 'boom') throw new Error('no space left');
        done.push(item);
      },
    );
    expect(done.sort()).toEqual(['x', 'y']);
    expect(failures.map((f) => [f.item, (f.error as Error).message])).toEqual([['boom', 'no space left']]);
  });
});

describe('createLimiter', () => {
  it('refuses the tasks still waiting when it closes, and waits for the running ones', async () => {
    const limiter = createLimiter(1);
    let release!: () => void;
    const first = limiter.run(() => new Promise<string>((resolve) => (release = () => resolve('first'))));
    const second = limiter.run(async () => 'second');
    await settle();
    expect([limiter.running, limiter.waiting]).toEqual([1, 1]);
    const closed = limiter.close();
    await expect(second).rejects.toBeInstanceOf(LimiterClosedError);
    release();
    await closed;
    await expect(first).resolves.toBe('first');
    await expect(limiter.run(async () => 'late')).rejects.toBeInstanceOf(LimiterClosedError);
  });
});

describe('uploadConcurrency', () => {
  it(`defaults to ${DEFAULT_UPLOAD_CONCURRENCY} and takes a whole number from 1 to ${MAX_UPLOAD_CONCURRENCY}`, () => {
    expect(uploadConcurrency(undefined)).toBe(DEFAULT_UPLOAD_CONCURRENCY);
    expect(uploadConcurrency('')).toBe(DEFAULT_UPLOAD_CONCURRENCY);
    expect(uploadConcurrency('1')).toBe(1);
    expect(uploadConcurrency(String(MAX_UPLOAD_CONCURRENCY))).toBe(MAX_UPLOAD_CONCURRENCY);
  });

  it.each(['0', '-3', '2.5', 'many', String(MAX_UPLOAD_CONCURRENCY + 1)])(
    'refuses %s, naming the setting',
    (value) => {
      expect(() => uploadConcurrency(value, 'DOCLINE_UPLOAD_CONCURRENCY')).toThrow(
        /^DOCLINE_UPLOAD_CONCURRENCY must be a whole number from 1 to/,
      );
    },
  );
});

describe('concurrencySetting', () => {
  const usage = 'usage: npm start -- [--concurrency N]';

  it('takes the flag over DOCLINE_UPLOAD_CONCURRENCY, and the variable over the default', () => {
    expect(concurrencySetting('8', '64', usage)).toBe(8);
    expect(concurrencySetting(undefined, '64', usage)).toBe(64);
    expect(concurrencySetting(undefined, undefined, usage)).toBe(DEFAULT_UPLOAD_CONCURRENCY);
  });

  it('refuses a wrong flag as a command line (exit code 2) and names a wrong variable', () => {
    expect(() => concurrencySetting('0', undefined, usage)).toThrow(UsageError);
    expect(() => concurrencySetting('0', undefined, usage)).toThrow(
      /--concurrency must be .*\. usage: npm start/,
    );
    expect(() => concurrencySetting(undefined, 'lots', usage)).toThrow(/^DOCLINE_UPLOAD_CONCURRENCY must be/);
    expect(() => concurrencySetting(undefined, 'lots', usage)).not.toThrow(UsageError);
  });
});
