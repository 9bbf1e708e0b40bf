import { randomUUID } from 'node:crypto';
import { link, mkdir, readdir, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { MemoEntry, MemoStore } from '../../core/ports';

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
    try {
      return JSON.parse(await readFile(this.file(key), 'utf8')) as MemoEntry;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
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

  /** A lease is a file beside the entry's, created with 'wx' (exclusive), holding its expiry. */
  async lease(key: string, expiresAt: Date): Promise<Date | undefined> {
    const file = this.leaseFile(key);
    await mkdir(path.dirname(file), { recursive: true });
    try {
      await writeFile(file, expiresAt.toISOString(), { flag: 'wx' });
      return undefined;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const held = new Date((await readFile(file, 'utf8')).trim());
      // A lease being written right now reads empty: treat it as held for the full time asked.
      return Number.isNaN(held.getTime()) ? expiresAt : held;
    }
  }

  /** Renews by replacing the lease file whole (a private file renamed over it): never half written. */
  async renew(key: string, expiresAt: Date): Promise<void> {
    const file = this.leaseFile(key);
    const temporary = `${file}.${randomUUID()}.tmp`;
    await writeFile(temporary, expiresAt.toISOString(), { flag: 'wx' });
    await rename(temporary, file);
  }

  async hasLease(key: string): Promise<boolean> {
    try {
      await stat(this.leaseFile(key));
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw error;
    }
  }

  private leaseFile(key: string): string {
    return this.file(key).replace(/\.json$/, '.lease');
  }

  /** Deletes entries (and leases) last written before `cutoff` (the redelivery window); returns how many. */
  async prune(cutoff: Date): Promise<number> {
    let removed = 0;
    let versions: string[];
    try {
      versions = await readdir(this.root);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw error;
    }
    for (const version of versions) {
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
    // Keys are `version/sha256`, leases `lease/sha256` (a round after the first `lease/sha256~N`):
    // two safe path segments. Anything else is a programming error.
    if (!/^[a-z0-9-]+\/[a-f0-9]{64}(~\d{1,3})?$/.test(key)) throw new Error(`not a memo key: ${key}`);
    return path.join(this.root, `${key}.json`);
  }
}
