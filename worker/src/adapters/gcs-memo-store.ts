import type { Storage } from '@google-cloud/storage';
import type { MemoEntry, MemoStore } from '../core/ports';

/**
 * The memo of paid analyses in a private Cloud Storage bucket of its own (the stack creates it with
 * uniform access, public access prevention, a lifecycle rule that deletes entries after the dedup
 * window, and no notification). Writes are create-only (`ifGenerationMatch: 0`): a second analysis
 * of the same key never replaces the first, and the worker needs no right to overwrite or delete.
 */
export interface GcsMemoStoreOptions {
  /** A client built by `createStorageClient` (no retries inside the library). */
  storage: Storage;
  bucket: string;
  /** Object name prefix. */
  prefix?: string;
}

export class GcsMemoStore implements MemoStore {
  private readonly prefix: string;

  constructor(private readonly options: GcsMemoStoreOptions) {
    this.prefix = options.prefix ?? 'analyses/';
  }

  async get(key: string): Promise<MemoEntry | undefined> {
    try {
      const [bytes] = await this.file(key).download();
      return JSON.parse(bytes.toString('utf8')) as MemoEntry;
    } catch (error) {
      if ((error as { code?: unknown }).code === 404) return undefined;
      throw error;
    }
  }

  async create(key: string, entry: MemoEntry): Promise<void> {
    try {
      await this.file(key).save(JSON.stringify(entry), {
        resumable: false,
        contentType: 'application/json',
        preconditionOpts: { ifGenerationMatch: 0 },
      });
    } catch (error) {
      // 412: the key exists already; the first entry stays, as create-only means.
      if ((error as { code?: unknown }).code === 412) return;
      throw error;
    }
  }

  /** A lease is an object of its own, created with `ifGenerationMatch: 0`, holding its expiry. */
  async lease(key: string, expiresAt: Date): Promise<Date | undefined> {
    const file = this.options.storage.bucket(this.options.bucket).file(`leases/${key}.json`);
    try {
      await file.save(JSON.stringify({ expiresAt: expiresAt.toISOString() }), {
        resumable: false,
        contentType: 'application/json',
        preconditionOpts: { ifGenerationMatch: 0 },
      });
      return undefined;
    } catch (error) {
      if ((error as { code?: unknown }).code !== 412) throw error;
      const [bytes] = await file.download();
      return new Date((JSON.parse(bytes.toString('utf8')) as { expiresAt: string }).expiresAt);
    }
  }

  private file(key: string) {
    return this.options.storage.bucket(this.options.bucket).file(`${this.prefix}${key}.json`);
  }
}
