import { existsSync } from 'node:fs';
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
  /**
   * Takes no more files and resolves once every announced file has left the inbox or been told to
   * stay. Uploads still in flight are not waited for: their files have no row and stay.
   */
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
  /** Every announced file until it has settled (moved, or left in place). */
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

  /** Folders of `.uploaded/` made by this watcher: a drop of thousands makes each once. */
  const madeDirs = new Set<string>();
  /** Moves the file to `.uploaded/` unless it changed since it was read (then it is a new generation). */
  const moveIfUnchanged = async (name: string, signature: string) => {
    const file = path.join(options.dir, name);
    if ((await signatureOf(file)) !== signature) return false;
    const target = path.join(options.dir, DONE, name);
    const folder = path.dirname(target);
    if (!madeDirs.has(folder)) {
      await mkdir(folder, { recursive: true });
      madeDirs.add(folder);
    }
    try {
      await rename(file, target);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      // Deleted by someone meanwhile: nothing is left to move (its row exists all the same).
      if (!existsSync(file)) return false;
      // The folder went away meanwhile (someone emptied .uploaded/): make it again, once.
      await mkdir(folder, { recursive: true });
      await rename(file, target);
    }
    return true;
  };

  /** After the upload: waits for the row, then moves the file (unless it changed meanwhile). */
  const settle = async (name: string, signature: string, recorded: Promise<boolean>) => {
    awaitingRow++;
    changed();
    try {
      if ((await recorded) && (await moveIfUnchanged(name, signature))) done++;
    } finally {
      awaitingRow--;
    }
  };

  const take = (name: string, signature: string) => {
    busy.add(name);
    const file = path.join(options.dir, name);
    void limiter
      .run(async () => {
        changed();
        return options.onFile(name, await readFile(file));
      })
      .then(
        ({ recorded }) => {
          const settled = settle(name, signature, recorded);
          settling.add(settled);
          return settled.finally(() => settling.delete(settled));
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
        changed();
      });
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
  /** Stops the scans and the queue; `closed` resolves once the uploads in flight ended. */
  const stopTaking = async () => {
    paused = true;
    clearInterval(timer);
    await scanning;
    return { closed: limiter.close() };
  };
  const pause = async () => {
    await (await stopTaking()).closed;
  };
  return {
    scan,
    counts,
    pause,
    async stop() {
      // Uploads still in flight are not waited for: their files have no row and stay in the inbox.
      await stopTaking();
      while (settling.size > 0) await Promise.all([...settling]);
    },
  };
}
