import type { Storage } from '@google-cloud/storage';
import { MEMO_LEASE_PREFIX } from '../../contract/storage';
import type { LeaseTaken, MemoEntry, MemoStore } from '../../core/ports';
import { isLive } from './memory-memo-store';

/**
 * The memo of paid analyses in a private Cloud Storage bucket of its own (the stack creates it with
 * uniform access, public access prevention, a lifecycle rule that deletes entries after the dedup
 * window, and no notification). Entries are create-only (`ifGenerationMatch: 0`): a second analysis
 * of the same key never replaces the first. A lease is one object under `leases/`, rewritten in
 * place by compare-and-swap (`ifGenerationMatch` its generation): overwriting needs the delete
 * permission, which the stack grants on that prefix only (an IAM condition), so an entry can never
 * be overwritten or deleted by the worker.
 */
export interface GcsMemoStoreOptions {
  /** A client built by `createStorageClient` (no retries inside the library). */
  storage: Storage;
  bucket: string;
  /** Waits `ms` (injectable for tests). */
  sleep?: (ms: number) => Promise<void>;
  /** Draws the pauses' jitter and each holder's id (seeded in simulations). */
  random?: () => number;
  /** The time in epoch ms that spaces writes of one object (injectable for tests). */
  now?: () => number;
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

/**
 * How far apart this store sends two writes of one object: Cloud Storage's one write a second to
 * an object name. A lease's heartbeat renews it every third of the lease and a write's bound moves
 * it once more as the analysis ends, often within that second: sent at once, the second write is
 * refused (429), and a refused write counts too, so its retry half a second later is refused
 * again; about two seconds of every delivery. Waiting out the rest of the second costs less than
 * one refusal.
 */
export const OBJECT_WRITE_SPACING_MS = 1_000;

export class GcsMemoStore implements MemoStore {
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  private readonly now: () => number;
  /** When this store last sent (or will send) a write of each object written within the last second. */
  private readonly lastWriteMs = new Map<string, number>();

  constructor(private readonly options: GcsMemoStoreOptions) {
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.random = options.random ?? Math.random;
    this.now = options.now ?? Date.now;
  }

  async get(key: string): Promise<MemoEntry | undefined> {
    try {
      const [bytes] = await this.file(this.objectName(key)).download();
      return JSON.parse(bytes.toString('utf8')) as MemoEntry;
    } catch (error) {
      if (codeOf(error) === 404) return undefined;
      throw error;
    }
  }

  async create(key: string, entry: MemoEntry): Promise<void> {
    // undefined: the key exists already; the first entry stays, as create-only means.
    await this.write(this.objectName(key), JSON.stringify(entry), 0);
  }

  /**
   * Read first (one metadata call gives its holder, expiry and generation): a live lease is
   * answered without a write, since every write to the object, refused or not, counts against its
   * one write a second, which its holder's renewals need. None: created with `ifGenerationMatch: 0`;
   * ended: rewritten for this holder with `ifGenerationMatch` its generation. Another delivery that
   * got there first (412) is read again: it holds the lease now.
   */
  async lease(key: string, expiresAt: Date, now: Date): Promise<LeaseTaken | { heldUntil: Date }> {
    const name = leaseName(key);
    const holder = Math.floor(this.random() * 2 ** 48).toString(36);
    const body: LeaseBody = { expiresAt: expiresAt.toISOString(), holder };
    for (let attempt = 0; attempt < 3; attempt++) {
      const held = await this.readLease(name);
      if (held && isLive(held, now)) return { heldUntil: held.expiresAt };
      const taken = await this.write(name, body, held?.generation ?? 0);
      if (taken) return { token: tokenOf(taken, holder), earlier: held !== undefined };
    }
    // Three deliveries in a row took it first: it is held, for as long as it says.
    const held = await this.readLease(name);
    return { heldUntil: held?.expiresAt ?? expiresAt };
  }

  /**
   * A compare-and-swap rewrite of the lease object for the same holder. Refused (412) when the
   * object changed: by another delivery that took the lease over (it is no longer this holder's),
   * or by this holder's own renewal whose answer was lost; then the rewrite is tried again on the
   * generation it made, unless the lease already lasts as long (a late renewal never shortens it)
   * or was released.
   */
  async renew(key: string, token: string, expiresAt: Date, release = false): Promise<string | undefined> {
    const name = leaseName(key);
    const { generation, holder } = parseToken(token);
    const body: LeaseBody = {
      expiresAt: expiresAt.toISOString(),
      holder,
      ...(release ? { released: 'true' as const } : {}),
    };
    let expected = generation;
    for (let attempt = 0; attempt < 3; attempt++) {
      const written = await this.write(name, body, expected);
      if (written) return tokenOf(written, holder);
      const held = await this.readLease(name);
      if (!held || held.holder !== holder || held.released) return undefined;
      if (!release && held.expiresAt >= expiresAt) return tokenOf(held.generation, holder);
      expected = held.generation;
    }
    return undefined;
  }

  /** Whether the lease object of `key` exists: one metadata read. */
  async hasLease(key: string): Promise<boolean> {
    const [exists] = await this.file(leaseName(key)).exists();
    return exists;
  }

  /** The lease object `name` as it is now (holder, expiry, generation); undefined when there is none. */
  private async readLease(name: string): Promise<LeaseObject | undefined> {
    try {
      const [metadata] = await this.file(name).getMetadata();
      const fields = (metadata.metadata ?? {}) as Record<string, unknown>;
      // A lease object without a readable expiry (one an earlier layout wrote, whose renewals were
      // objects of their own) counts as ended: taken over, never waited for without a bound.
      const expiresAtMs = Date.parse(String(fields.expiresAt ?? ''));
      const released = fields.released === 'true';
      const expiresAt = new Date(Number.isNaN(expiresAtMs) ? 0 : expiresAtMs);
      return {
        generation: String(metadata.generation),
        holder: String(fields.holder ?? ''),
        expiresAt,
        released,
      };
    } catch (error) {
      if (codeOf(error) === 404) return undefined;
      throw error;
    }
  }

  /**
   * Writes `body` to `name` if its generation is `ifGenerationMatch` (0: it does not exist): the
   * generation written, or undefined when the precondition failed (412).
   */
  private async write(name: string, body: LeaseBody | string, ifGenerationMatch: number | string) {
    const file = this.file(name);
    const fields = typeof body === 'string' ? undefined : body;
    try {
      await this.retryingObjectRate(name, () =>
        file.save(fields ? JSON.stringify(fields) : (body as string), {
          resumable: false,
          contentType: 'application/json',
          ...(fields ? { metadata: { metadata: fields } } : {}),
          preconditionOpts: { ifGenerationMatch: Number(ifGenerationMatch) },
        }),
      );
      return String(file.metadata.generation ?? '');
    } catch (error) {
      if (codeOf(error) === 412) return undefined;
      throw error;
    }
  }

  /**
   * A write of `name`, sent {@link OBJECT_WRITE_SPACING_MS} after this store's last one, and tried
   * again after the per-object rate limit's 429 (another instance wrote it: {@link OBJECT_RATE_RETRY_MS},
   * each pause jittered over its upper half).
   */
  private async retryingObjectRate(name: string, write: () => Promise<unknown>): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.spaced(name);
        try {
          await write();
        } finally {
          // The second is counted from the answer: Cloud Storage stamped the write before it.
          this.lastWriteMs.set(name, Math.max(this.lastWriteMs.get(name) ?? 0, this.now()));
        }
        return;
      } catch (error) {
        const pauseMs = OBJECT_RATE_RETRY_MS[attempt];
        if (codeOf(error) !== 429 || pauseMs === undefined) throw error;
        await this.sleep(Math.round(pauseMs * (0.5 + this.random() / 2)));
      }
    }
  }

  /**
   * Waits until this store's last write of `name` is a second old, and takes the moment it writes
   * (so that two writes of one object started together go a second apart). Entries older than a
   * second say nothing and are dropped as the map grows: it holds about a second of writes.
   */
  private async spaced(name: string): Promise<void> {
    const now = this.now();
    if (this.lastWriteMs.size >= 1_024)
      for (const [written, atMs] of this.lastWriteMs)
        if (now - atMs >= OBJECT_WRITE_SPACING_MS) this.lastWriteMs.delete(written);
    const last = this.lastWriteMs.get(name);
    const atMs = last === undefined ? now : Math.max(now, last + OBJECT_WRITE_SPACING_MS);
    this.lastWriteMs.set(name, atMs);
    if (atMs > now) await this.sleep(atMs - now);
  }

  private file(name: string) {
    return this.options.storage.bucket(this.options.bucket).file(name);
  }

  private objectName(key: string): string {
    return `analyses/${key}.json`;
  }
}

/**
 * What a lease object says, in its custom metadata (read with its generation in one call) and its
 * body (for a person reading the bucket). Custom metadata values are strings.
 */
type LeaseBody = { expiresAt: string; holder: string; released?: 'true' };

interface LeaseObject {
  generation: string;
  holder: string;
  expiresAt: Date;
  released: boolean;
}

/** The one lease object of a key. */
function leaseName(key: string): string {
  return `${MEMO_LEASE_PREFIX}${key}.json`;
}

/** A holder's token: the generation it wrote and its id (which tells its own lost renewal from a takeover). */
function tokenOf(generation: string, holder: string): string {
  return `${generation}:${holder}`;
}

function parseToken(token: string): { generation: string; holder: string } {
  const at = token.indexOf(':');
  return { generation: token.slice(0, at), holder: token.slice(at + 1) };
}

function codeOf(error: unknown): unknown {
  return (error as { code?: unknown }).code;
}
