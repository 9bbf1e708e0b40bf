import type { MemoEntry, MemoStore } from '../../core/ports';

/** The memo in this process's memory: for tests and simulations. Create-only like the others. */
export class MemoryMemoStore implements MemoStore {
  readonly entries = new Map<string, MemoEntry>();
  readonly leases = new Map<string, Date>();

  async get(key: string): Promise<MemoEntry | undefined> {
    return this.entries.get(key);
  }

  async create(key: string, entry: MemoEntry): Promise<void> {
    if (!this.entries.has(key)) this.entries.set(key, entry);
  }

  async lease(key: string, expiresAt: Date): Promise<Date | undefined> {
    const held = this.leases.get(key);
    if (held) return held;
    this.leases.set(key, expiresAt);
    return undefined;
  }

  async renew(key: string, expiresAt: Date): Promise<void> {
    this.leases.set(key, expiresAt);
  }

  async hasLease(key: string): Promise<boolean> {
    return this.leases.has(key);
  }
}
