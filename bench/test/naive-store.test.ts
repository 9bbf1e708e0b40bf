import { testRow } from '../../worker/test/support/builders';
import { NaiveSqliteStore, naiveTableDdl } from '../servers/naive-store';

describe('NaiveSqliteStore', () => {
  it('never reports a key as seen and records every delivery, duplicates included', async () => {
    const store = new NaiveSqliteStore({ path: ':memory:' });
    const row = testRow();
    expect(await store.record(row)).toBe(true);
    expect(await store.seen(row.dedup_key)).toBe(false);
    expect(await store.record(row)).toBe(true);
    expect(store.count()).toBe(2);
    await store.close();
  });

  it('creates the worker table without its unique key', () => {
    expect(naiveTableDdl('rows')).toContain('dedup_key TEXT NOT NULL');
    expect(naiveTableDdl('rows')).not.toContain('UNIQUE');
  });
});
