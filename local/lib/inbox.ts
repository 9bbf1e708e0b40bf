import { mkdir, readdir, readFile, rename, stat } from 'node:fs/promises';
import path from 'node:path';
import { createLimiter, DEFAULT_UPLOAD_CONCURRENCY, LimiterClosedError } from './bounded';

/**
 * Watches an inbox folder: every file placed there (at any depth) is handed to `onFile` once it
 * has stopped growing, and moved to `.uploaded/` inside the inbox once `onFile` says its row exists,
 * so that it is taken once. A file whose row does not exist when the watcher stops (not read yet,
 * not uploaded yet, or announced but not yet processed) stays in the inbox and is taken again by the
 * next run. Polling, not fs.watch: it behaves the same on every file system, including network mounts.
 *
 * Files are taken concurrently, at most `concurrency` being read, stored and announced at once; in
 * which order distinct files go does not matter. One name is never in flight twice: a file dropped
 * again under the same name (a second generation of that object) is taken only once the first one
 * has left the inbox, so the two generations are stored and announced in the order they were dropped.
 */
export interface InboxOptions {
  dir: string;
  /**
   * Stores and announces one file (its object name is the path relative to the inbox, with `/`).
   * Resolves once that is done, which frees its slot for the next file, with `recorded`: a promise
   * that resolves `true` once the file's row exists (the file then leaves the inbox) or `false`
   * when it will not be known in this run (the file stays).
   */
  onFile: (name: string, bytes: Buffer) => Promise<{ recorded: Promise<boolean> }>;
  onError?: (name: string, error: unknown) => void;
  /** Called whenever one of the counts changes (a progress line). */
  onProgress?: (counts: InboxCounts) => void;
  /** Files read, stored and announced at once ({@link DEFAULT_UPLOAD_CONCURRENCY} by default). */
  concurrency?: number;
  intervalMs?: number;
}

/** Where the files the watcher has seen are. */
export interface InboxCounts {
  /** Stable files waiting for a free slot. */
  queued: number;
  /** Files being read, stored and announced. */
  uploading: number;
  /** Files announced whose row does not exist yet. */
  awaitingRow: number;
  /** Files moved to `.uploaded/` (their row exists) since the watcher started. */
  done: number;
  /** Uploads that failed (the file stays and is tried again). */
  failed: number;
}

export interface InboxWatcher {
  /** Lists the inbox once and queues the files found stable; resolves when the listing is done. */
  scan(): Promise<void>;
  /** The counts now. */
  counts(): InboxCounts;
  /**
   * Takes no more files: queued files stay in the inbox; resolves once the uploads in flight ended.
   * Files announced meanwhile still leave the inbox when their row comes.
   */
  pause(): Promise<void>;
  /** {@link pause}, then waits until every announced file has left the inbox or been told to stay. */
  stop(): Promise<void>;
}

const DONE = '.uploaded';

async function listFiles(dir: string, prefix = ''): Promise<string[]> {
  const entries = await readdir(path.join(dir, prefix), { withFileTypes: true }).catch(() => []);
  const files: string[] = [];
  for (const entry of entries) {
    if (entry.name.startsWith('.')) continue; // .uploaded, editors' temporary files
    const relative = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) files.push(...(await listFiles(dir, relative)));
    else if (entry.isFile()) files.push(relative);
  }
  return files;
}

const signatureOf = async (file: string) => {
  const info = await stat(file).catch(() => undefined);
  return info ? `${info.size}:${info.mtimeMs}` : undefined;
};

export async function watchInbox(options: InboxOptions): Promise<InboxWatcher> {
  await mkdir(options.dir, { recursive: true });
  const limiter = createLimiter(options.concurrency ?? DEFAULT_UPLOAD_CONCURRENCY);
  const lastSeen = new Map<string, string>();
  /** Names taken and not yet settled: never taken twice at once (two generations keep their order). */
  const busy = new Set<string>();
  /** Every taken file until it has settled (moved, or left in place). */
  const settling = new Set<Promise<void>>();
  let awaitingRow = 0;
  let done = 0;
  let failed = 0;
  let scanning: Promise<void> | undefined;
  let paused = false;

  const counts = (): InboxCounts => ({
    queued: limiter.waiting,
    uploading: limiter.running,
    awaitingRow,
    done,
    failed,
  });
  const changed = () => options.onProgress?.(counts());

  /** Moves the file to `.uploaded/` unless it changed since it was read (then it is a new generation). */
  const moveIfUnchanged = async (name: string, signature: string) => {
    const file = path.join(options.dir, name);
    if ((await signatureOf(file)) !== signature) return false;
    const target = path.join(options.dir, DONE, name);
    await mkdir(path.dirname(target), { recursive: true });
    await rename(file, target);
    return true;
  };

  const take = (name: string, signature: string) => {
    busy.add(name);
    const file = path.join(options.dir, name);
    const settled = limiter
      .run(async () => {
        changed();
        return options.onFile(name, await readFile(file));
      })
      .then(
        async ({ recorded }) => {
          awaitingRow++;
          changed();
          try {
            if (await recorded) {
              if (await moveIfUnchanged(name, signature)) done++;
            }
          } finally {
            awaitingRow--;
          }
        },
        (error: unknown) => {
          // Not started before the pause: the file just stays.
          if (error instanceof LimiterClosedError) return;
          failed++;
          options.onError?.(name, error);
        },
      )
      .catch((error: unknown) => options.onError?.(name, error))
      .finally(() => {
        busy.delete(name);
        settling.delete(settled);
        changed();
      });
    settling.add(settled);
  };

  const scanOnce = async () => {
    const names = await listFiles(options.dir);
    const present = new Set(names);
    for (const name of lastSeen.keys()) if (!present.has(name)) lastSeen.delete(name);
    for (const name of names) {
      if (paused) return;
      if (busy.has(name)) continue;
      const signature = await signatureOf(path.join(options.dir, name));
      if (!signature) continue;
      // Taken only when unchanged since the previous scan: a file still being copied waits.
      if (lastSeen.get(name) !== signature) {
        lastSeen.set(name, signature);
        continue;
      }
      lastSeen.delete(name);
      take(name, signature);
    }
    changed();
  };
  const scan = () => {
    scanning ??= scanOnce().finally(() => {
      scanning = undefined;
    });
    return scanning;
  };

  const timer = setInterval(() => {
    if (!paused) void scan();
  }, options.intervalMs ?? 500);
  const pause = async () => {
    paused = true;
    clearInterval(timer);
    await scanning;
    await limiter.close();
  };
  return {
    scan,
    counts,
    pause,
    async stop() {
      await pause();
      while (settling.size > 0) await Promise.all([...settling]);
    },
  };
}
