import type { AddressInfo } from 'node:net';
import { testRow } from '../../worker/test/support/builders';
import { cloudReviewBackend, documentRowOf } from '../lib/review-cloud';
import { createReviewServer } from '../lib/review-server';

/*
 * The review page over a deployed stack: the same server, its documents and corrections read from
 * BigQuery (a client that answers as @google-cloud/bigquery does: JSON as text, timestamps as
 * objects), its corrections written by the same rule as locally.
 */

const row = testRow({
  dedup_key: 'gs://b/a.pdf#1',
  analysis: { document_type: 'invoice', invoice_number: 'F-1' },
  review: 'low_confidence:invoice_number',
});
const answered = {
  ...row,
  analysis: JSON.stringify(row.analysis),
  original_analysis: JSON.stringify(row.analysis),
  corrected_fields: null,
  processed_at: { value: row.processed_at },
  event_time: { value: row.event_time },
};

function fakeBigQuery() {
  const merges: Array<Record<string, unknown>> = [];
  const query = jest.fn(async (q: { query: string; params: Record<string, unknown> }) => {
    if (q.query.startsWith('MERGE')) merges.push(q.params);
    if (q.query.includes('.documents`')) return [[answered]];
    return [merges.filter((m) => m.dedup_key === q.params.dedup_key)];
  });
  return { merges, query };
}

describe('the review page against a deployed stack', () => {
  it('reads the documents view as the client answers it', () => {
    expect(documentRowOf(answered)).toMatchObject({
      analysis: row.analysis,
      processed_at: row.processed_at,
      corrected_fields: [],
    });
  });

  it('lists the rows to review and writes a correction to the corrections table, with the row’s key day', async () => {
    const bigquery = fakeBigQuery();
    const backend = cloudReviewBackend({
      dataset: 'acme-dev.docline',
      bigquery: bigquery as never,
      storage: {} as never,
    });
    const server = createReviewServer({ backend, who: 'claire' });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const queue = (await (await fetch(`${base}/api/queue`)).json()) as { items: Array<{ open: string[] }> };
      expect(queue.items).toEqual([expect.objectContaining({ open: ['low_confidence:invoice_number'] })]);
      const post = (value: string) =>
        fetch(`${base}/api/corrections`, {
          method: 'POST',
          body: JSON.stringify({ dedup_key: row.dedup_key, field: 'invoice_number', value, replaces: null }),
        });
      expect((await post('F-2')).status).toBe(200);
      expect((await post('F-2')).status).toBe(200);
      expect((await post('F-3')).status).toBe(409);
      expect(bigquery.merges).toEqual([
        expect.objectContaining({
          field: 'invoice_number',
          value: '"F-2"',
          corrected_by: 'claire',
          key_day: '2026-11-30',
        }),
      ]);
      expect(
        bigquery.query.mock.calls.some(([q]) => q.query.includes('`acme-dev.docline.corrections`')),
      ).toBe(true);
    } finally {
      server.close();
    }
  });
});
