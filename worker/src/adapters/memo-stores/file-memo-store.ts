import { randomUUID } from 'node:crypto';
import { link, mkdir, readdir, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { LeaseTaken, MemoEntry, MemoStore } from '../../core/ports';
import { type LeaseState, renewLease, takeLease } from './memory-memo-store';

/** A lease's lock older than this was left by a process that died mid-change: it is broken. */
export const STALE_LOCK_MS = 5_000;

/**
 * The memo of paid analyses in a local folder (`<data dir>/memo`), one JSON file per entry. It lives
 * apart from the SQLite table file on purpose: a busy or locked table must not take the memo down
 * with it, since the memo is what saves a retry from paying again.
 *
 * Create-only and atomic: the entry is written to a private temporary file, then hard-linked to its
 * name, which fails when the name exists; a reader never sees half an entry.
 */
export class FileMemoStore implements MemoStore {
  constructor(private readonly root: string) {}

  async get(key: string): Promise<MemoEntry | undefined> {
    const text = await unlessMissing(readFile(this.file(key), 'utf8'), undefined);
    return text === undefined ? undefined : (JSON.parse(text) as MemoEntry);
  }

  async create(key: string, entry: MemoEntry): Promise<void> {
    const file = this.file(key);
    await mkdir(path.dirname(file), { recursive: true });
    const temporary = `${file}.${randomUUID()}.tmp`;
    await writeFile(temporary, JSON.stringify(entry), { flag: 'wx' });
    try {
      await link(temporary, file);
    } catch (error) {
      // Another delivery kept the same analysis first: the first entry stays.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    } finally {
      await unlink(temporary);
    }
  }

  /**
   * A lease is a file beside the entry's, holding its expiry and holder, read and rewritten
   * whole (a private file renamed over it) under a lock file taken with 'wx': two processes sharing
   * the folder take turns, and a lock left by a process that died is broken after
   * {@link STALE_LOCK_MS}.
   */
  async lease(key: string, expiresAt: Date, now: Date): Promise<LeaseTaken | { heldUntil: Date }> {
    return this.underLock(key, (leases) => takeLease(leases, key, expiresAt, now, randomUUID));
  }

  async renew(key: string, token: string, expiresAt: Date, release = false): Promise<string | undefined> {
    return this.underLock(key, (leases) => renewLease(leases, key, token, expiresAt, release));
  }

  async hasLease(key: string): Promise<boolean> {
    return unlessMissing(
      stat(this.leaseFile(key)).then(() => true),
      false,
    );
  }

  /** Reads the key's lease, applies `change` to it and writes it back, all under the key's lock. */
  private async underLock<T>(key: string, change: (leases: Map<string, LeaseState>) => T): Promise<T> {
    const file = this.leaseFile(key);
    await mkdir(path.dirname(file), { recursive: true });
    const lock = `${file}.lock`;
    await takeLock(lock);
    try {
      const leases = new Map<string, LeaseState>();
      const held = await readLease(file);
      if (held) leases.set(key, held);
      const result = change(leases);
      const after = leases.get(key);
      if (after && after !== held) {
        const temporary = `${file}.${randomUUID()}.tmp`;
        await writeFile(temporary, JSON.stringify(after), { flag: 'wx' });
        await rename(temporary, file);
      }
      return result;
    } finally {
      await rm(lock, { force: true });
    }
  }

  private leaseFile(key: string): string {
    return this.file(key).replace(/\.json$/, '.lease');
  }

  /** Deletes entries (and leases) last written before `cutoff` (the redelivery window); returns how many. */
  async prune(cutoff: Date): Promise<number> {
    let removed = 0;
    for (const version of await unlessMissing(readdir(this.root), [])) {
      const folder = path.join(this.root, version);
      for (const name of await readdir(folder)) {
        const file = path.join(folder, name);
        if ((await stat(file)).mtime < cutoff) {
          await rm(file, { force: true });
          removed += 1;
        }
      }
    }
    return removed;
  }

  private file(key: string): string {
    // Keys are `namespace/sha256` (`analysis/…`, `lease/…`, `progress/…`): two safe path segments.
    // Anything else is a programming error.
    if (!/^[a-z0-9-]+\/[a-f0-9]{64}$/.test(key)) throw new Error(`not a memo key: ${key}`);
    return path.join(this.root, `${key}.json`);
  }
}

/** Takes the lock file `lock` ('wx'), waiting while another holds it; a stale one is broken. */
async function takeLock(lock: string): Promise<void> {
  for (;;) {
    try {
      await writeFile(lock, String(process.pid), { flag: 'wx' });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const since = await stat(lock).then(
      (s) => Date.now() - s.mtimeMs,
      () => 0,
    );
    if (since > STALE_LOCK_MS) await rm(lock, { force: true });
    else await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** The lease a lease file holds; undefined when there is none. */
async function readLease(file: string): Promise<LeaseState | undefined> {
  const text = await unlessMissing(readFile(file, 'utf8'), undefined);
  if (text === undefined) return undefined;
  // An earlier layout's lease file holds its expiry alone, and no holder: nobody renews it.
  const held = text.startsWith('{')
    ? (JSON.parse(text) as { expiresAt: string; holder: string; released: boolean })
    : { expiresAt: text.trim(), holder: '', released: false };
  return { expiresAt: new Date(held.expiresAt), holder: held.holder, released: held.released };
}

/** What `reading` answers, or `missing` when the file it reads does not exist. */
async function unlessMissing<T, M>(reading: Promise<T>, missing: M): Promise<T | M> {
  try {
    return await reading;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return missing;
    throw error;
  }
}
