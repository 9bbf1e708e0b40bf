import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import {
  duplicateInvoiceLookupSql,
  SQLITE_TABLE,
  SqliteStore,
} from '../../worker/src/adapters/stores/sqlite-store';
import { correctionOf } from '../../worker/src/contract/corrections';
import type { Row } from '../../worker/src/contract/row';
import { CANARY_PREFIX, DUPLICATE_KEY_FIELDS, duplicateInvoiceKeySql } from '../../worker/src/contract/views';
import { testRow } from '../../worker/test/support/builders';
import { INVOICE_FIXTURE } from '../../worker/test/support/view-fixture';
import {
  DUPLICATE_WARNING_NAMES,
  type DuplicateInvoice,
  duplicateGroupOf,
  duplicateWarning,
} from '../lib/format';

/** One invoice (the same supplier, number and total) stored as `count` objects. */
const copies = (count: number, prefix: string): Row[] =>
  Array.from({ length: count }, (_, i) => {
    const name = `${prefix}/${String(i).padStart(5, '0')}.txt`;
    return testRow({
      dedup_key: `gs://b/${name}#1`,
      object_uri: `gs://b/${name}#1`,
      bucket: 'b',
      object_name: name,
      generation: '1',
      analysis: { supplier_vat_id: 'FR12345678901', invoice_number: `${prefix}-1`, total_amount: 99.5 },
    });
  });

describe("npm start's duplicate-invoice lookup (SqliteStore.duplicateInvoiceOthers)", () => {
  let dir: string;
  let store: SqliteStore;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'docline-duplicates-'));
    store = new SqliteStore({ path: path.join(dir, 'docline.sqlite') });
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Every ok row's answer against the view's group (the view applies corrections, leaves the canary out). */
  const expectTheViewsGroups = () => {
    const view = store.view('duplicate_invoices') as unknown as DuplicateInvoice[];
    for (const row of store.documents().filter((r) => r.status === 'ok' && r.object_uri)) {
      const expected = duplicateGroupOf(view, row.object_uri!)
        .map((d) => d.object_uri)
        .filter((uri) => uri !== row.object_uri)
        .sort();
      expect({ row: row.object_uri, others: store.duplicateInvoiceOthers(row.dedup_key, 100) }).toEqual({
        row: row.object_uri,
        others: expected,
      });
    }
  };

  it('finds, for every ok row, exactly the other objects of its duplicate_invoices group', async () => {
    for (const row of INVOICE_FIXTURE) await store.record(row);
    const view = store.view('duplicate_invoices') as unknown as DuplicateInvoice[];
    const stored = store.documents().filter((r) => r.status === 'ok' && r.object_uri);
    const inGroups = stored.filter((r) => duplicateGroupOf(view, r.object_uri!).length > 0);
    // The fixture has groups and rows outside any group, so both answers are checked.
    expect(inGroups.length).toBeGreaterThanOrEqual(4);
    expect(stored.length).toBeGreaterThan(inGroups.length);
    expectTheViewsGroups();
  });

  it("follows the accountant's corrections: a corrected number leaves its group, and another joins one", async () => {
    const pair = copies(3, 'pair');
    const other = copies(1, 'other');
    await store.recordMany([...pair, ...other]);
    const correct = (row: Row, field: string, value: unknown) =>
      store.correct(
        correctionOf(
          { dedupKey: row.dedup_key, field, value, replaces: null, by: 'test@example.com' },
          new Date(),
        ),
      );
    // pair/00000 becomes another invoice; other/00000 becomes a copy of pair's.
    await correct(pair[0]!, 'invoice_number', 'PAIR-2');
    await correct(other[0]!, 'invoice_number', 'pair-1');
    expect(store.duplicateInvoiceOthers(pair[0]!.dedup_key, 100)).toEqual([]);
    expect(store.duplicateInvoiceOthers(pair[1]!.dedup_key, 100)).toEqual(
      [other[0]!, pair[2]!].map((r) => r.object_uri),
    );
    expectTheViewsGroups();
  });

  it("leaves the deploy canary's rows out, as the view does", async () => {
    const [row] = copies(1, 'canary');
    const canary = testRow({
      ...row!,
      dedup_key: `gs://b/${CANARY_PREFIX}x.txt#1`,
      object_uri: `gs://b/${CANARY_PREFIX}x.txt#1`,
      object_name: `${CANARY_PREFIX}x.txt`,
    });
    await store.recordMany([row!, canary]);
    expect(store.duplicateInvoiceOthers(row!.dedup_key, 100)).toEqual([]);
    expectTheViewsGroups();
  });

  it('keys on exactly the fields a correction of which moves a row (DUPLICATE_KEY_FIELDS)', () => {
    const keys = duplicateInvoiceKeySql('sqlite');
    const read = new Set(
      [
        ...Object.values(keys)
          .join(' ')
          .matchAll(/\$\.(\w+)/g),
      ].map((m) => m[1]),
    );
    expect([...read].sort()).toEqual([...DUPLICATE_KEY_FIELDS].sort());
  });

  it('answers nothing for a rejected row or an unknown key', async () => {
    for (const row of INVOICE_FIXTURE) await store.record(row);
    const rejected = INVOICE_FIXTURE.find((r) => r.status === 'rejected')!;
    expect(store.duplicateInvoiceOthers(rejected.dedup_key, 10)).toEqual([]);
    expect(store.duplicateInvoiceOthers('gs://b/never#1', 10)).toEqual([]);
  });

  it('reads a page of a 5,000-object group, never the whole group', async () => {
    const big = copies(5000, 'big');
    await store.recordMany(big);
    const newest = big.at(-1)!;
    expect(store.duplicateInvoiceOthers(newest.dedup_key, DUPLICATE_WARNING_NAMES + 1)).toEqual(
      big.slice(0, DUPLICATE_WARNING_NAMES + 1).map((r) => r.object_uri),
    );
  });

  it('finds the row by its key, then searches the index on the view’s group keys, with no sort', async () => {
    await store.recordMany(copies(50, 'small'));
    const db = new DatabaseSync(path.join(dir, 'docline.sqlite'), { readOnly: true });
    try {
      const plan = (sql: string, params: Record<string, string | number>) =>
        (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(params) as Array<{ detail: string }>).map(
          (s) => s.detail,
        );
      const lookup = duplicateInvoiceLookupSql(SQLITE_TABLE);
      expect(plan(lookup.keysOf.replace('?', ':key'), { key: 'k' })).toEqual([
        expect.stringMatching(/^SEARCH rows USING INDEX sqlite_autoindex_rows_1 \(dedup_key=\?\)$/),
      ]);
      const page = plan(lookup.groupPage, {
        supplier_key: 'vat:FR12345678901',
        invoice_number_key: 'SMALL1',
        total_amount: 99.5,
        object_uri: 'gs://b/x#1',
        limit: 4,
      });
      expect(page).toEqual([
        expect.stringMatching(
          /^SEARCH rows USING INDEX rows_duplicate_invoices \(<expr>=\? AND <expr>=\? AND <expr>=\?/,
        ),
      ]);
      // No sort of the group: the index gives its objects in order, so LIMIT stops the search early.
      expect(page.join('\n')).not.toMatch(/TEMP B-TREE|SCAN/);
    } finally {
      db.close();
    }
  });
});

describe('the duplicate-invoice warning line', () => {
  const uri = (name: string) => `gs://docline-local/${name}#1`;

  it('names the one other object of a pair, as before', () => {
    expect(duplicateWarning(uri('b.txt'), [uri('a.txt')])).toBe(
      'warning    duplicate invoice: b.txt#1 has the supplier, number and total of a.txt#1 (npm run rows -- --duplicates)',
    );
  });

  it(`names ${DUPLICATE_WARNING_NAMES} objects of a larger group and says there are others`, () => {
    const others = ['a', 'b', 'c', 'd'].map((n) => uri(`${n}.txt`));
    expect(duplicateWarning(uri('z.txt'), others)).toBe(
      'warning    duplicate invoice: z.txt#1 has the supplier, number and total of a.txt#1, b.txt#1, c.txt#1 and others (npm run rows -- --duplicates)',
    );
  });

  it('is not printed for a row in no group', () => {
    expect(duplicateWarning(uri('a.txt'), [])).toBeUndefined();
    expect(duplicateWarning(uri('a.txt'), [uri('a.txt')])).toBeUndefined();
  });
});
