import type { Row } from '../../src/contract/row';
import type { BatchStore, Store } from '../../src/core/ports';
import { testRow } from './builders';

/** A row without `processed_at`, which the store stamps with its commit time. */
export function exceptCommitTime(row: Row | undefined): Omit<Row, 'processed_at'> | undefined {
  if (!row) return row;
  const { processed_at: _, ...rest } = row;
  return rest;
}

/** What an adapter's test gives the contract suite. */
export interface StoreHarness {
  store: Store;
  /** Reads back the rows stored under a dedup key (for the round-trip cases). */
  rowsFor(dedupKey: string): Promise<Row[]>;
  cleanup(): Promise<void>;
}

export interface ContractOptions {
  /**
   * Cases a stand-in cannot honour, with the reason; listed in the adapter's test file.
   * Names are the `it` titles below.
   */
  unsupported?: Record<string, string>;
  /** A stand-in that cannot record at all, with the reason: every case that records is reported so. */
  cannotRecord?: string;
}

/** The cases that only read (every other case records). */
const READ_ONLY = new Set(['does not see a key it never recorded', 'answers ping when reachable']);

/**
 * The Store contract, written once and run against every adapter (SQLite, BigQuery through its
 * local server, the bigquery-emulator).
 */
export function describeStoreContract(
  adapter: string,
  makeHarness: () => Promise<StoreHarness>,
  options: ContractOptions = {},
): void {
  describe(`Store contract: ${adapter}`, () => {
    let h: StoreHarness;
    beforeEach(async () => {
      h = await makeHarness();
    });
    afterEach(async () => {
      await h.cleanup();
    });

    // A case a stand-in cannot honour is reported as such instead of silently passing.
    const test = (title: string, body: () => Promise<void>) => {
      const why = options.unsupported?.[title] ?? (READ_ONLY.has(title) ? undefined : options.cannotRecord);
      if (why) it.todo(`${title} — not run here: ${why}`);
      else it(title, body);
    };

    test('does not see a key it never recorded', async () => {
      expect(await h.store.seen('gs://b/never#1')).toBe(false);
    });

    test('records a new key once and then sees it', async () => {
      const row = testRow();
      expect(await h.store.record(row)).toBe(true);
      expect(await h.store.seen(row.dedup_key)).toBe(true);
      expect(await h.rowsFor(row.dedup_key)).toHaveLength(1);
    });

    test('refuses a second row for the same key and keeps the first', async () => {
      const first = testRow({ message_id: '101' });
      const second = testRow({ message_id: '102', dedup_key: first.dedup_key });
      expect(await h.store.record(first)).toBe(true);
      expect(await h.store.record(second)).toBe(false);
      const rows = await h.rowsFor(first.dedup_key);
      expect(rows.map((r) => r.message_id)).toEqual(['101']);
    });

    test('records different keys independently', async () => {
      const a = testRow();
      const b = testRow();
      expect(await h.store.record(a)).toBe(true);
      expect(await h.store.record(b)).toBe(true);
      expect(await h.store.seen(a.dedup_key)).toBe(true);
      expect(await h.store.seen(b.dedup_key)).toBe(true);
    });

    test('lets exactly one of two concurrent records of one key insert', async () => {
      const row = testRow();
      const results = await Promise.all([
        h.store.record({ ...row, message_id: '201' }),
        h.store.record({ ...row, message_id: '202' }),
      ]);
      expect(results.filter(Boolean)).toHaveLength(1);
      expect(await h.rowsFor(row.dedup_key)).toHaveLength(1);
    });

    test('stores hostile values verbatim and finds them by key', async () => {
      const hostile = 'gs://b/\'; DROP TABLE x; --"`#1';
      const row = testRow({
        dedup_key: hostile,
        object_name: "'; DROP TABLE x; --",
        reason: "it's \\ odd",
      });
      expect(await h.store.record(row)).toBe(true);
      expect(await h.store.seen(hostile)).toBe(true);
      expect(await h.store.seen("gs://b/' OR '1'='1#1")).toBe(false);
      const [stored] = await h.rowsFor(hostile);
      expect(stored?.object_name).toBe("'; DROP TABLE x; --");
      expect(stored?.reason).toBe("it's \\ odd");
    });

    test('round-trips every column: generations beyond 2^53 as strings, nulls, JSON analysis', async () => {
      const row = testRow({
        generation: '9223372036854775807',
        reason: null,
        delivery_attempt: null,
        analysis: {
          supplier_name: 'Société Générale d’Équipement',
          total_amount: 1234.56,
          line_items: [],
        },
      });
      expect(await h.store.record(row)).toBe(true);
      const [stored] = await h.rowsFor(row.dedup_key);
      expect(exceptCommitTime(stored)).toEqual(exceptCommitTime(row));
    });

    test('interleaving 7: stamps processed_at with the time of its commit, not the time the row was built', async () => {
      // A row built long before its commit (it waited for a batch, a lease, a turn).
      const row = testRow({ processed_at: '2026-11-29T00:00:00.000Z' });
      const before = Date.now();
      expect(await h.store.record(row)).toBe(true);
      const after = Date.now();
      const [stored] = await h.rowsFor(row.dedup_key);
      const committedAt = Date.parse(stored!.processed_at);
      expect(committedAt).toBeGreaterThanOrEqual(before);
      expect(committedAt).toBeLessThanOrEqual(after);
    });

    test('records a rejected row with its reason and no analysis', async () => {
      const row = testRow({ status: 'rejected', reason: 'too_large', analysis: null, model: null });
      expect(await h.store.record(row)).toBe(true);
      const [stored] = await h.rowsFor(row.dedup_key);
      expect(stored?.status).toBe('rejected');
      expect(stored?.reason).toBe('too_large');
      expect(stored?.analysis).toBeNull();
    });

    test('answers ping when reachable', async () => {
      await expect(h.store.ping()).resolves.toBeUndefined();
    });
  });
}

/** What a batch-capable adapter's test gives the batch contract suite. */
export interface BatchStoreHarness extends Omit<StoreHarness, 'store'> {
  store: BatchStore;
}

/**
 * The BatchStore contract (the calls group commit makes), written once and run against every store
 * that takes batches: SQLite, and BigQuery through its local server.
 */
export function describeBatchStoreContract(
  adapter: string,
  makeHarness: () => Promise<BatchStoreHarness>,
): void {
  describe(`BatchStore contract: ${adapter}`, () => {
    let h: BatchStoreHarness;
    beforeEach(async () => {
      h = await makeHarness();
    });
    afterEach(async () => {
      await h.cleanup();
    });

    it('inserts a batch of new rows and answers every key as inserted', async () => {
      const rows = [testRow(), testRow(), testRow()];
      const inserted = await h.store.recordMany(rows);
      expect([...inserted].sort()).toEqual(rows.map((r) => r.dedup_key).sort());
      for (const row of rows) expect(await h.rowsFor(row.dedup_key)).toHaveLength(1);
    });

    it('skips the keys already recorded, keeps their first row, and answers only the new ones', async () => {
      const old = testRow({ message_id: 'old-1' });
      expect(await h.store.recordMany([old])).toEqual(new Set([old.dedup_key]));
      const fresh = testRow();
      const inserted = await h.store.recordMany([{ ...old, message_id: 'new-1' }, fresh]);
      expect([...inserted]).toEqual([fresh.dedup_key]);
      expect((await h.rowsFor(old.dedup_key)).map((r) => r.message_id)).toEqual(['old-1']);
    });

    it('finds exactly the recorded keys among many in one lookup', async () => {
      const recorded = [testRow(), testRow()];
      await h.store.recordMany(recorded);
      const hostile = "gs://b/' OR '1'='1#1";
      const found = await h.store.seenMany([
        recorded[0]!.dedup_key,
        'gs://b/never#1',
        hostile,
        recorded[1]!.dedup_key,
      ]);
      expect([...found].sort()).toEqual(recorded.map((r) => r.dedup_key).sort());
    });

    it('round-trips every column of every row of a batch, hostile values included', async () => {
      const rows = [
        testRow({ generation: '9223372036854775807', object_name: "'; DROP TABLE x; --", reason: null }),
        testRow({
          status: 'rejected',
          reason: 'too_large',
          analysis: null,
          model: null,
          delivery_attempt: null,
        }),
      ];
      await h.store.recordMany(rows);
      for (const row of rows) {
        expect((await h.rowsFor(row.dedup_key)).map(exceptCommitTime)).toEqual([exceptCommitTime(row)]);
      }
    });

    it('answers an empty batch without a statement', async () => {
      expect((await h.store.recordMany([])).size).toBe(0);
      expect((await h.store.seenMany([])).size).toBe(0);
    });
  });
}
