import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { SqliteStore } from '../src/adapters/stores/sqlite-store';
import { COLUMNS } from '../src/contract/row';
import { testRow } from './support/builders';

describe('a SQLite file made before a column was added', () => {
  it('gets the new NULLABLE column, keeps its rows, and its views show it', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'docline-sqlite-columns-'));
    try {
      const file = path.join(dir, 'docline.sqlite');
      // The table as it was before e_invoice_validation, with one row and the old views.
      const old = COLUMNS.filter((c) => c.name !== 'e_invoice_validation');
      const db = new DatabaseSync(file);
      db.exec(
        `CREATE TABLE rows (${old.map((c) => `${c.name} ${c.type === 'INT64' ? 'INTEGER' : 'TEXT'}`).join(', ')}, UNIQUE (dedup_key))`,
      );
      db.exec('CREATE VIEW documents AS SELECT * FROM rows');
      db.prepare(
        `INSERT INTO rows (message_id, dedup_key, status, processed_at, worker_version) VALUES ('1', 'k-old', 'ok', '2026-11-01T00:00:00.000Z', 'v0')`,
      ).run();
      db.close();

      const store = new SqliteStore({ path: file });
      await store.record(testRow({ dedup_key: 'k-new', e_invoice_validation: { verdict: 'valid' } }));
      expect(store.rowsFor('k-old')[0]).toMatchObject({ e_invoice_validation: null, worker_version: 'v0' });
      expect(store.documents().map((r) => [r.dedup_key, r.e_invoice_validation])).toEqual([
        ['k-old', null],
        ['k-new', { verdict: 'valid' }],
      ]);
      await store.close();
      // A second store on the same file finds the column there.
      const again = new SqliteStore({ path: file });
      expect(again.documents()).toHaveLength(2);
      await again.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
