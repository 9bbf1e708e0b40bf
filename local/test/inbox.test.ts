import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type InboxWatcher, watchInbox } from '../lib/inbox';
import { eventually } from './support/eventually';

/** A promise and the functions that settle it, for a test that decides when each upload ends. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** One call of onFile: what it got, and how the test ends its upload and its row. */
interface Call {
  name: string;
  text: string;
  upload: ReturnType<typeof deferred<void>>;
  recorded: ReturnType<typeof deferred<boolean>>;
}

describe('the inbox watcher', () => {
  let dir: string;
  let inbox: InboxWatcher | undefined;
  let calls: Call[];
  let inFlight: number;
  let maxInFlight: number;
  let errors: Array<{ name: string; error: unknown }>;

  const start = async (concurrency: number) => {
    inbox = await watchInbox({
      dir,
      concurrency,
      // Scans are driven by the test: the timer never fires during it.
      intervalMs: 3_600_000,
      onFile: async (name, bytes) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        const call: Call = { name, text: bytes.toString(), upload: deferred(), recorded: deferred() };
        calls.push(call);
        try {
          await call.upload.promise;
        } finally {
          inFlight--;
        }
        return { recorded: call.recorded.promise };
      },
      onError: (name, error) => errors.push({ name, error }),
    });
    return inbox;
  };
  /** Two scans: a file is taken once it was seen unchanged by the previous scan. */
  const scanTwice = async () => {
    await inbox!.scan();
    await inbox!.scan();
  };
  const drop = (name: string, text: string) => {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), text);
  };
  const inInbox = (name: string) => existsSync(path.join(dir, name));
  const uploaded = (name: string) => path.join(dir, '.uploaded', name);

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'docline-inbox-'));
    calls = [];
    inFlight = 0;
    maxInFlight = 0;
    errors = [];
  });
  afterEach(async () => {
    for (const call of calls) {
      call.upload.resolve();
      call.recorded.resolve(false);
    }
    await inbox?.stop();
    inbox = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  it('takes files concurrently, never more than the concurrency at once, and every one of them', async () => {
    await start(3);
    for (let i = 0; i < 10; i++) drop(`batch/f${i}.txt`, `invoice ${i}`);
    await scanTwice();
    await eventually(() => calls.length === 3, 'three uploads are in flight');
    expect(inbox!.counts()).toMatchObject({ uploading: 3, queued: 7 });
    for (let done = 0; done < 10; done++) {
      await eventually(() => calls.length > done, `upload ${done + 1} started`);
      calls[done]!.upload.resolve();
      calls[done]!.recorded.resolve(true);
    }
    await eventually(() => inbox!.counts().done === 10, 'every file has left the inbox');
    expect(maxInFlight).toBe(3);
    expect(calls.map((c) => c.name).sort()).toEqual(
      Array.from({ length: 10 }, (_, i) => `batch/f${i}.txt`).sort(),
    );
    for (let i = 0; i < 10; i++) {
      expect(inInbox(`batch/f${i}.txt`)).toBe(false);
      expect(readFileSync(uploaded(`batch/f${i}.txt`), 'utf8')).toBe(`invoice ${i}`);
    }
    expect(errors).toEqual([]);
  });

  it('moves a file to .uploaded only once its row exists, and leaves it when it will not be known', async () => {
    await start(4);
    drop('recorded.txt', 'one');
    drop('unknown.txt', 'two');
    await scanTwice();
    await eventually(() => calls.length === 2, 'both uploads started');
    for (const call of calls) call.upload.resolve();
    await eventually(() => inbox!.counts().awaitingRow === 2, 'both are announced');
    // Announced is not enough: the files are still in the inbox while their rows are awaited.
    expect([inInbox('recorded.txt'), inInbox('unknown.txt')]).toEqual([true, true]);
    calls.find((c) => c.name === 'recorded.txt')!.recorded.resolve(true);
    calls.find((c) => c.name === 'unknown.txt')!.recorded.resolve(false);
    await eventually(() => inbox!.counts().awaitingRow === 0, 'both are settled');
    expect(inInbox('recorded.txt')).toBe(false);
    expect(existsSync(uploaded('recorded.txt'))).toBe(true);
    expect(inInbox('unknown.txt')).toBe(true);
    expect(existsSync(uploaded('unknown.txt'))).toBe(false);
  });

  it('takes a second generation of one name only after the first, so they keep their order', async () => {
    await start(8);
    drop('same.txt', 'generation 1');
    await scanTwice();
    await eventually(() => calls.length === 1, 'the first generation is taken');
    // Dropped again while the first is still in flight: same name, new content.
    drop('same.txt', 'generation 2, longer');
    await scanTwice();
    expect(calls).toHaveLength(1);
    calls[0]!.upload.resolve();
    await eventually(() => inbox!.counts().awaitingRow === 1, 'the first is announced');
    await scanTwice();
    expect(calls).toHaveLength(1);
    calls[0]!.recorded.resolve(true);
    await eventually(() => inbox!.counts().awaitingRow === 0, 'the first has its row');
    // The file now holds the second generation: it was not moved away with the first one's row.
    expect(readFileSync(path.join(dir, 'same.txt'), 'utf8')).toBe('generation 2, longer');
    await scanTwice();
    await eventually(() => calls.length === 2, 'the second generation is taken');
    expect(calls.map((c) => c.text)).toEqual(['generation 1', 'generation 2, longer']);
    calls[1]!.upload.resolve();
    calls[1]!.recorded.resolve(true);
    await eventually(() => inbox!.counts().done === 1, 'the second has its row');
    expect(readFileSync(uploaded('same.txt'), 'utf8')).toBe('generation 2, longer');
    expect(inInbox('same.txt')).toBe(false);
  });

  it('on pause, starts nothing more: queued files stay in the inbox, untouched', async () => {
    await start(2);
    for (let i = 0; i < 6; i++) drop(`f${i}.txt`, `invoice ${i}`);
    await scanTwice();
    await eventually(() => calls.length === 2, 'two uploads are in flight');
    const paused = inbox!.pause();
    for (const call of calls) call.upload.resolve();
    await paused;
    expect(calls).toHaveLength(2);
    expect(inbox!.counts()).toMatchObject({ queued: 0, uploading: 0, awaitingRow: 2 });
    for (const call of calls) call.recorded.resolve(true);
    await inbox!.stop();
    const taken = new Set(calls.map((c) => c.name));
    for (let i = 0; i < 6; i++) expect(inInbox(`f${i}.txt`)).toBe(!taken.has(`f${i}.txt`));
    expect(inbox!.counts().done).toBe(2);
  });

  it('keeps a file whose upload failed, reports it, and takes it again later', async () => {
    await start(2);
    drop('flaky.txt', 'x');
    await scanTwice();
    await eventually(() => calls.length === 1, 'the upload started');
    calls[0]!.upload.reject(new Error('publish failed'));
    await eventually(() => errors.length === 1, 'the error is reported');
    expect(errors[0]!.name).toBe('flaky.txt');
    expect(inbox!.counts().failed).toBe(1);
    expect(inInbox('flaky.txt')).toBe(true);
    await scanTwice();
    await eventually(() => calls.length === 2, 'it is taken again');
  });
});
