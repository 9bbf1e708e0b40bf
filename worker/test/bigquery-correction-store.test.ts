import {
  BigQueryCorrectionStore,
  correctionMergeSql,
} from '../src/adapters/stores/bigquery-correction-store';
import { correctionOf } from '../src/contract/corrections';

const TABLE = 'acme-dev.docline.corrections';
const fix = (value: unknown, replaces: string | null = null) =>
  correctionOf(
    { dedupKey: 'gs://b/a.pdf#1', field: 'invoice_number', value, replaces, by: 'claire' },
    new Date('2026-11-30T12:00:00.000Z'),
  );

/** A store on a BigQuery client that holds the table in memory: reads filter it, the MERGE appends to it. */
function fakeBigQuery() {
  const table: Array<Record<string, unknown>> = [];
  const query = jest.fn(async (q: { query: string; params: Record<string, unknown> }) => {
    if (q.query.startsWith('MERGE')) {
      if (!table.some((r) => r.correction_id === q.params.correction_id)) table.push({ ...q.params });
      return [[]];
    }
    return [table.filter((r) => r.dedup_key === q.params.dedup_key)];
  });
  const store = new BigQueryCorrectionStore({ bigquery: { query } as never, table: TABLE });
  return { table, store, query };
}

describe('BigQueryCorrectionStore', () => {
  it('inserts by a MERGE on the correction id, with the row’s key day, and types its nulls', async () => {
    const { store, query, table } = fakeBigQuery();
    expect((await store.correct(fix('F-1'), '2026-11-30')).status).toBe('recorded');
    const merge = query.mock.calls[1]![0] as unknown as { query: string; types: Record<string, string> };
    expect(merge.query).toBe(correctionMergeSql(TABLE));
    expect(merge.query).toContain('ON t.correction_id = s.correction_id WHEN NOT MATCHED THEN INSERT');
    expect(merge.types).toEqual({ replaces: 'STRING', why: 'STRING', key_day: 'DATE' });
    expect(table).toEqual([expect.objectContaining({ key_day: '2026-11-30', value: '"F-1"' })]);
  });

  it('writes nothing for a correction already there or made over a state that changed', async () => {
    const { store, query } = fakeBigQuery();
    await store.correct(fix('F-1'), '2026-11-30');
    expect((await store.correct(fix('F-1'), '2026-11-30')).status).toBe('already');
    expect((await store.correct(fix('F-2'), '2026-11-30')).status).toBe('conflict');
    expect(query.mock.calls.filter(([q]) => (q as { query: string }).query.startsWith('MERGE'))).toHaveLength(
      1,
    );
    expect(await store.corrections('gs://b/a.pdf#1')).toHaveLength(1);
  });
});
