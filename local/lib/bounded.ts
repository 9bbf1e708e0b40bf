import { UsageError } from './args';

/**
 * Bounded concurrency for the local tools that take files (the inbox watcher, `npm run upload`):
 * many files in flight so that Pub/Sub publishes ride together and the worker is never idle, but
 * never more than a set number, so that a folder of 50,000 invoices is not read into memory at once.
 */

/** How many files the inbox and `npm run upload` take at once when nothing else is said. */
export const DEFAULT_UPLOAD_CONCURRENCY = 32;
/** The highest concurrency accepted: beyond it the emulator and the worker are the limit, not the uploads. */
export const MAX_UPLOAD_CONCURRENCY = 1024;

/**
 * Parses the concurrency setting (`--concurrency` or DOCLINE_UPLOAD_CONCURRENCY); undefined gives
 * the default. Throws with the setting's name when the value is not a whole number in range.
 */
export function uploadConcurrency(value: string | undefined, name = '--concurrency'): number {
  if (value === undefined || value === '') return DEFAULT_UPLOAD_CONCURRENCY;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > MAX_UPLOAD_CONCURRENCY)
    throw new Error(`${name} must be a whole number from 1 to ${MAX_UPLOAD_CONCURRENCY} (got "${value}")`);
  return n;
}

/**
 * The concurrency of a command: its `--concurrency` flag, else DOCLINE_UPLOAD_CONCURRENCY, else the
 * default. A wrong flag is a refused command line ({@link UsageError} with the usage); a wrong
 * variable is an error that names it.
 */
export function concurrencySetting(
  flag: string | undefined,
  envValue: string | undefined,
  usage: string,
): number {
  if (flag === undefined) return uploadConcurrency(envValue, 'DOCLINE_UPLOAD_CONCURRENCY');
  try {
    return uploadConcurrency(flag);
  } catch (error) {
    throw new UsageError(`${(error as Error).message}. ${usage}`);
  }
}

/** Thrown to tasks that were still waiting for a slot when the limiter closed. */
export class LimiterClosedError extends Error {
  readonly code = 'limiter_closed';
  constructor() {
    super('stopped before this task started');
  }
}

/** Runs tasks with at most `limit` running at once, first come first served. */
export interface Limiter {
  /** Runs `task` once a slot is free; rejects with {@link LimiterClosedError} if closed before it starts. */
  run<T>(task: () => Promise<T>): Promise<T>;
  /** Tasks running now. */
  readonly running: number;
  /** Tasks waiting for a slot. */
  readonly waiting: number;
  /** Starts nothing more (waiting tasks are refused) and resolves once the running tasks ended. */
  close(): Promise<void>;
}

export function createLimiter(limit: number): Limiter {
  if (!Number.isInteger(limit) || limit < 1) throw new Error(`a limit of ${limit} tasks at once is not one`);
  const queue: Array<{ start: () => void; refuse: () => void }> = [];
  let running = 0;
  let closed = false;
  let drained: (() => void) | undefined;

  const next = () => {
    while (!closed && running < limit && queue.length > 0) queue.shift()!.start();
    if (running === 0) drained?.();
  };

  return {
    run<T>(task: () => Promise<T>): Promise<T> {
      if (closed) return Promise.reject(new LimiterClosedError());
      return new Promise<T>((resolve, reject) => {
        queue.push({
          start: () => {
            running++;
            task()
              .then(resolve, reject)
              .finally(() => {
                running--;
                next();
              });
          },
          refuse: () => reject(new LimiterClosedError()),
        });
        next();
      });
    },
    get running() {
      return running;
    },
    get waiting() {
      return queue.length;
    },
    close() {
      closed = true;
      for (const waiting of queue.splice(0)) waiting.refuse();
      if (running === 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        drained = resolve;
      });
    },
  };
}

/**
 * Runs `task` for every item, at most `limit` at once; items that share a key run one after
 * another, in the order given (two generations of one object keep their order), while items with
 * distinct keys run in any order. Every item is tried; resolves with the errors of those that failed.
 */
export async function forEachBounded<T>(
  items: readonly T[],
  limit: number,
  keyOf: (item: T) => string,
  task: (item: T) => Promise<void>,
): Promise<Array<{ item: T; error: unknown }>> {
  const byKey = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const group = byKey.get(key);
    if (group) group.push(item);
    else byKey.set(key, [item]);
  }
  const limiter = createLimiter(limit);
  const failures: Array<{ item: T; error: unknown }> = [];
  await Promise.all(
    [...byKey.values()].map((group) =>
      limiter.run(async () => {
        for (const item of group) {
          try {
            await task(item);
          } catch (error) {
            failures.push({ item, error });
          }
        }
      }),
    ),
  );
  return failures;
}
