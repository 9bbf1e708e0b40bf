/**
 * The deploy canary's verdict (local/lib/canary.ts): which stage it names when one does not answer,
 * read against fake probes and a fake clock. `npm run e2e` runs the same check on the real local
 * pipeline; `npm run canary -- --target cloud` after every deploy.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SqliteStore } from '../../worker/src/adapters/stores/sqlite-store';
import { testRow } from '../../worker/test/support/builders';
import { CANARY_PREFIX, type CanaryProbes, canaryObjectName, runCanary } from '../lib/canary';
import { canaryOutputs } from '../lib/canary-cloud';

/** A pipeline that gets as far as `upTo` (the stages before it answer, it and the ones after do not). */
function pipeline(
  upTo: 'notification' | 'push' | 'worker' | 'table' | 'all',
  overrides: Partial<CanaryProbes> = {},
): CanaryProbes {
  const order = ['notification', 'push', 'worker', 'table', 'all'];
  const passes = (stage: string) => order.indexOf(stage) < order.indexOf(upTo);
  return {
    description: 'fake',
    upload: async (name) => `gs://b/${name}#1`,
    notification: async () => (passes('notification') ? 'm-1' : undefined),
    push: async () => passes('push'),
    worker: async () =>
      passes('worker')
        ? { status: 'ok' }
        : passes('push')
          ? { status: 'error', detail: 'analyzer_unavailable' }
          : undefined,
    row: async () => (passes('table') ? { status: 'ok' } : undefined),
    ...overrides,
  };
}

function clock() {
  let t = 0;
  return {
    now: () => t,
    sleep: async (ms: number) => {
      t += ms;
    },
  };
}

describe('runCanary', () => {
  it('passes when the row is in the documents view, timing every stage', async () => {
    const result = await runCanary(pipeline('all'), { timeoutMs: 60_000, runId: 'r1', ...clock() });
    expect(result).toMatchObject({
      ok: true,
      objectUri: `gs://b/${CANARY_PREFIX}r1/en-02-invoice-hosting.txt#1`,
    });
    expect(result.ok && Object.values(result.seconds).every((s) => typeof s === 'number')).toBe(true);
  });

  it.each(['notification', 'push', 'worker', 'table'] as const)(
    'names the %s when it is the first stage that does not answer, after the bound',
    async (stage) => {
      const c = clock();
      const result = await runCanary(pipeline(stage), { timeoutMs: 60_000, pollMs: 1_000, ...c });
      expect(result).toMatchObject({ ok: false, stage });
      expect(!result.ok && result.message).toMatch(
        new RegExp(`^canary FAILED at the ${stage}: .* no row after 60 s`),
      );
      // Bounded: it gave up at the deadline, not before and not long after.
      expect(c.now()).toBeGreaterThanOrEqual(60_000);
      expect(c.now()).toBeLessThan(62_000);
    },
  );

  it('says the worker’s last answer when it never answered ok', async () => {
    const result = await runCanary(pipeline('worker'), { timeoutMs: 10_000, ...clock() });
    expect(!result.ok && result.message).toMatch(/Its last answer: error \(analyzer_unavailable\)/);
  });

  it('fails at the worker on a row that is not ok (a canary invoice must be read)', async () => {
    const result = await runCanary(
      pipeline('all', { row: async () => ({ status: 'rejected', reason: 'analysis_refused' }) }),
      {
        timeoutMs: 10_000,
        ...clock(),
      },
    );
    expect(result).toMatchObject({ ok: false, stage: 'worker' });
    expect(!result.ok && result.message).toMatch(/got a rejected row \(analysis_refused\)/);
  });

  it('reports push and worker together with the table where the worker’s lines cannot be read', async () => {
    const result = await runCanary(pipeline('push', { observes: () => false }), {
      timeoutMs: 10_000,
      ...clock(),
    });
    expect(result).toMatchObject({ ok: false, stage: 'table' });
    expect(!result.ok && result.message).toMatch(/cannot observe push and worker/);
  });

  it('puts every canary under its own prefix', () => {
    expect(canaryObjectName('abc')).toBe(`${CANARY_PREFIX}abc/en-02-invoice-hosting.txt`);
  });
});

describe('canaryOutputs', () => {
  it('names every output the canary needs that the stack did not export', () => {
    expect(() => canaryOutputs({ bucketName: 'b' })).toThrow(/lack topicName, tableId, viewIds\.documents/);
  });

  it('reads them from `pulumi stack output --json`', () => {
    expect(
      canaryOutputs({
        bucketName: 'b',
        topicName: 't',
        tableId: 'p.d.t',
        viewIds: { documents: 'p.d.documents' },
        workerServiceName: 's',
        logBucket: 'projects/p/locations/europe-west1/buckets/docline-dev-logs',
      }),
    ).toEqual({
      bucketName: 'b',
      topicName: 't',
      tableId: 'p.d.t',
      documentsView: 'p.d.documents',
      workerServiceName: 's',
      logBucketName: 'projects/p/locations/europe-west1/buckets/docline-dev-logs',
    });
  });
});

describe('canary rows in the views', () => {
  it('are documents (the documents view) but not business (delivery_stats, duplicate_invoices)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'docline-canary-views-'));
    const store = new SqliteStore({ path: path.join(dir, 'rows.sqlite') });
    try {
      const invoice = {
        document_type: 'invoice',
        supplier_vat_id: 'FR12345678901',
        invoice_number: 'C-1',
        total_amount: 10,
      };
      const canary = (run: string) =>
        testRow({
          object_name: `${CANARY_PREFIX}${run}/invoice.txt`,
          object_uri: `gs://b/${CANARY_PREFIX}${run}/invoice.txt#1`,
          dedup_key: `gs://b/${CANARY_PREFIX}${run}/invoice.txt#1`,
          analysis: invoice,
        });
      await store.record(canary('r1'));
      await store.record(canary('r2'));
      await store.record(testRow());
      await store.record(
        testRow({ object_name: null, object_uri: null, status: 'rejected', dedup_key: 'not-work' }),
      );
      expect(store.documents()).toHaveLength(4);
      expect(store.view('delivery_stats')).toEqual([
        expect.objectContaining({ row_count: 2, ok_rows: 1, rejected_rows: 1 }),
      ]);
      // The same canary invoice every deploy is not an invoice found twice.
      expect(store.view('duplicate_invoices')).toEqual([]);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
