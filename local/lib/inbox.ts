import { mkdir, readdir, readFile, rename, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * Watches an inbox folder: every file placed there (at any depth) is handed to `onFile` once it
 * has stopped growing, then moved to `.uploaded/` inside the inbox so that it is taken once.
 * Polling, not fs.watch: it behaves the same on every file system, including network mounts.
 */
export interface InboxOptions {
  dir: string;
  /** Receives the object name (the path relative to the inbox, with `/`) and the bytes. */
  onFile: (name: string, bytes: Buffer) => Promise<void>;
  onError?: (name: string, error: unknown) => void;
  intervalMs?: number;
}

export interface InboxWatcher {
  /** Scans once; resolves when every stable file found has been handled. */
  scan(): Promise<void>;
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

export async function watchInbox(options: InboxOptions): Promise<InboxWatcher> {
  await mkdir(options.dir, { recursive: true });
  const lastSeen = new Map<string, string>();
  let running: Promise<void> | undefined;
  let stopped = false;

  const scanOnce = async () => {
    for (const name of await listFiles(options.dir)) {
      const file = path.join(options.dir, name);
      const info = await stat(file).catch(() => undefined);
      if (!info) continue;
      const signature = `${info.size}:${info.mtimeMs}`;
      // Taken only when unchanged since the previous scan: a file still being copied waits.
      if (lastSeen.get(name) !== signature) {
        lastSeen.set(name, signature);
        continue;
      }
      lastSeen.delete(name);
      try {
        await options.onFile(name, await readFile(file));
        const done = path.join(options.dir, DONE, name);
        await mkdir(path.dirname(done), { recursive: true });
        await rename(file, done);
      } catch (error) {
        options.onError?.(name, error);
      }
    }
  };
  const scan = () => {
    running ??= scanOnce().finally(() => {
      running = undefined;
    });
    return running;
  };

  const timer = setInterval(() => {
    if (!stopped) void scan();
  }, options.intervalMs ?? 500);
  return {
    scan,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
