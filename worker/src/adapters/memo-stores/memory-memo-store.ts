import type { LeaseTaken, MemoEntry, MemoStore } from '../../core/ports';

/**
 * One key's lease: its expiry, its holder (a new id each time it is taken: the holder's token),
 * whether it was released.
 */
export interface LeaseState {
  expiresAt: Date;
  holder: string;
  released: boolean;
}

/** The memo in this process's memory: for tests and simulations. Create-only like the others. */
export class MemoryMemoStore implements MemoStore {
  readonly entries = new Map<string, MemoEntry>();
  readonly leases = new Map<string, LeaseState>();
  private nextHolder = 1;

  async get(key: string): Promise<MemoEntry | undefined> {
    return this.entries.get(key);
  }

  async create(key: string, entry: MemoEntry): Promise<void> {
    if (!this.entries.has(key)) this.entries.set(key, entry);
  }

  async lease(key: string, expiresAt: Date, now: Date): Promise<LeaseTaken | { heldUntil: Date }> {
    return takeLease(this.leases, key, expiresAt, now, () => String(this.nextHolder++));
  }

  async renew(key: string, token: string, expiresAt: Date, release = false): Promise<string | undefined> {
    return renewLease(this.leases, key, token, expiresAt, release);
  }

  async hasLease(key: string): Promise<boolean> {
    return this.leases.has(key);
  }
}

/**
 * The lease rules every store follows, over a map of leases read and written in one step (a
 * process's memory, or a folder under its lock, so the holder's id alone is a compare-and-swap):
 * one lease per key, taken when there is none or when it ended before `now` (a new holder), else
 * its expiry answered.
 */
export function takeLease(
  leases: Map<string, LeaseState>,
  key: string,
  expiresAt: Date,
  now: Date,
  newHolder: () => string,
): LeaseTaken | { heldUntil: Date } {
  const held = leases.get(key);
  if (held && isLive(held, now)) return { heldUntil: held.expiresAt };
  const holder = newHolder();
  leases.set(key, { expiresAt, holder, released: false });
  return { token: holder, earlier: held !== undefined };
}

/** Whether a lease still holds at `now`: neither released nor expired. Every store reads it so. */
export function isLive(lease: Pick<LeaseState, 'expiresAt' | 'released'>, now: Date): boolean {
  return !lease.released && lease.expiresAt > now;
}

/**
 * A renewal: by the holder whose token it is only, never shorter unless `release`, and a lease
 * released stays released.
 */
export function renewLease(
  leases: Map<string, LeaseState>,
  key: string,
  token: string,
  expiresAt: Date,
  release: boolean,
): string | undefined {
  const held = leases.get(key);
  if (!held || held.holder !== token || held.released) return undefined;
  if (release || held.expiresAt < expiresAt) leases.set(key, { expiresAt, holder: token, released: release });
  return token;
}
