import type { Storage } from '@google-cloud/storage';
import { type Clock, type MemoEntry, type MemoStore, systemClock } from '../../core/ports';

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
  /**
   * Pauses before a create-only write refused by Cloud Storage's rate limit on one object (429) is
   * tried again (default {@link OBJECT_RATE_RETRY_MS}); each pause is jittered over its upper half.
   */
  rateLimitRetryMs?: readonly number[];
  /** Waits `ms` (injectable for tests). */
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  /** Stamps each renewal with the time it is issued (see {@link GcsMemoStore.renew}). */
  clock?: Clock;
}

/**
 * Cloud Storage takes about one write per second to one object name and answers 429 past it, even
 * to a create-only write that would have failed its precondition. Two notifications of one upload
 * reach two instances at the same moment and both create the key's lease: the second is refused by
 * the rate, not by the precondition. Its retry a second later gets the documented answer (412: the
 * other delivery holds the lease), instead of the memo "failing" and the document being paid twice.
 * Two retries fit well inside one memo call's bound (`MEMO_CALL_TIMEOUT_MS`, 5 s).
 */
export const OBJECT_RATE_RETRY_MS: readonly number[] = Object.freeze([1_000, 2_000]);

export class GcsMemoStore implements MemoStore {
  private readonly prefix: string;

  private readonly retryMs: readonly number[];
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  private readonly clock: Clock;
  /** The issue stamp of this store's last renewal: the next one is stamped later. */
  private lastIssuedMs = 0;

  constructor(private readonly options: GcsMemoStoreOptions) {
    this.prefix = options.prefix ?? 'analyses/';
    this.retryMs = options.rateLimitRetryMs ?? OBJECT_RATE_RETRY_MS;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.random = options.random ?? Math.random;
    this.clock = options.clock ?? systemClock;
  }

  async get(key: string): Promise<MemoEntry | undefined> {
    return this.readJson<MemoEntry>(this.objectName(key));
  }

  async create(key: string, entry: MemoEntry): Promise<void> {
    // false: the key exists already; the first entry stays, as create-only means.
    await this.createOnly(this.objectName(key), JSON.stringify(entry));
  }

  /**
   * A lease is an object of its own, created with `ifGenerationMatch: 0`, holding its expiry. When
   * it exists, its expiry is the one its last renewal (below) moved it to, else its own.
   */
  async lease(key: string, expiresAt: Date): Promise<Date | undefined> {
    if (await this.createOnly(`leases/${key}.json`, expiryBody(expiresAt))) return undefined;
    return (await this.lastRenewal(key)) ?? (await this.readExpiry(`leases/${key}.json`)) ?? expiresAt;
  }

  /**
   * A renewal is one more create-only object under the lease's folder, named after the moment it was
   * issued and the expiry it moves the lease to (so the worker needs no right to overwrite, and a
   * reader needs no download): a few small objects per long analysis, deleted by the bucket's
   * lifecycle rule with the rest. The renewal issued last counts, so a renewal may move the lease
   * far ahead (a write's bound) or back to now (its work is over).
   *
   * Issued, not landed: a heartbeat's renewal that is slow to land after a later one (the write's
   * bound, or the end of the lease) must not take the lease back to its older expiry. And each
   * renewal has a name of its own: were it named after its expiry alone, every renewal to the same
   * bound would meet the first one's object and be refused (412) without a word.
   */
  async renew(key: string, expiresAt: Date): Promise<void> {
    // Stamped as it is issued, before any await: strictly increasing within this store.
    const issuedMs = Math.max(this.lastIssuedMs + 1, this.clock.now().getTime());
    this.lastIssuedMs = issuedMs;
    await this.createOnly(`leases/${key}/${issuedMs}-${expiresAt.getTime()}.json`, expiryBody(expiresAt));
  }

  /** Whether the lease object of `key` exists: one metadata read. */
  async hasLease(key: string): Promise<boolean> {
    const [exists] = await this.options.storage
      .bucket(this.options.bucket)
      .file(`leases/${key}.json`)
      .exists();
    return exists;
  }

  /**
   * The expiry the renewal of `key` issued last set: one listing of its folder (listings are
   * strongly consistent), the renewal with the latest issue stamp. A renewal named after its expiry
   * only (written before renewals were stamped) counts as issued when it was created.
   */
  private async lastRenewal(key: string): Promise<Date | undefined> {
    const [files] = await this.options.storage
      .bucket(this.options.bucket)
      .getFiles({ prefix: `leases/${key}/` });
    let last: { issuedMs: number; generation: bigint; expiresAtMs: number } | undefined;
    for (const file of files) {
      const stamped = /\/(\d+)-(\d+)\.json$/.exec(file.name);
      const unstamped = /\/(\d+)\.json$/.exec(file.name);
      const expiresAtMs = Number(stamped?.[2] ?? unstamped?.[1]);
      const issuedMs = stamped ? Number(stamped[1]) : Date.parse(String(file.metadata.timeCreated ?? ''));
      const generation = BigInt(file.metadata.generation ?? 0);
      if (!Number.isFinite(expiresAtMs)) continue;
      const issued = Number.isFinite(issuedMs) ? issuedMs : 0;
      if (!last || issued > last.issuedMs || (issued === last.issuedMs && generation > last.generation))
        last = { issuedMs: issued, generation, expiresAtMs };
    }
    return last ? new Date(last.expiresAtMs) : undefined;
  }

  /** Creates the object `name` holding `body`; false when it exists already (412). */
  private async createOnly(name: string, body: string): Promise<boolean> {
    try {
      await this.retryingObjectRate(() =>
        this.options.storage
          .bucket(this.options.bucket)
          .file(name)
          .save(body, {
            resumable: false,
            contentType: 'application/json',
            preconditionOpts: { ifGenerationMatch: 0 },
          }),
      );
      return true;
    } catch (error) {
      if ((error as { code?: unknown }).code === 412) return false;
      throw error;
    }
  }

  /** A create-only write, tried again after the per-object rate limit's 429 (see {@link OBJECT_RATE_RETRY_MS}). */
  private async retryingObjectRate(write: () => Promise<unknown>): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await write();
        return;
      } catch (error) {
        const pauseMs = this.retryMs[attempt];
        if ((error as { code?: unknown }).code !== 429 || pauseMs === undefined) throw error;
        await this.sleep(Math.round(pauseMs * (0.5 + this.random() / 2)));
      }
    }
  }

  private async readExpiry(name: string): Promise<Date | undefined> {
    const held = await this.readJson<{ expiresAt: string }>(name);
    const expiry = held ? new Date(held.expiresAt) : undefined;
    return expiry && !Number.isNaN(expiry.getTime()) ? expiry : undefined;
  }

  /** The JSON object `name` holds; undefined when there is none (404). */
  private async readJson<T>(name: string): Promise<T | undefined> {
    try {
      const [bytes] = await this.options.storage.bucket(this.options.bucket).file(name).download();
      return JSON.parse(bytes.toString('utf8')) as T;
    } catch (error) {
      if ((error as { code?: unknown }).code === 404) return undefined;
      throw error;
    }
  }

  private objectName(key: string): string {
    return `${this.prefix}${key}.json`;
  }
}

/** What a lease or renewal object holds. */
function expiryBody(expiresAt: Date): string {
  return JSON.stringify({ expiresAt: expiresAt.toISOString() });
}
