import { BigQueryStore, JOB_INSERT_ALLOWANCE_MS } from '../../worker/src/adapters/stores/bigquery-store';
import { MIN_STATEMENT_MS } from '../../worker/src/contract/settings';
import { Deadline, DeadlineError } from '../../worker/src/core/deadline';
import { RowRefusalError } from '../../worker/src/core/errors';
import { realTimers } from '../../worker/src/core/ports';
import { testRow } from '../../worker/test/support/builders';
import { BigQueryClients } from '../faults/bigquery-client';
import { FaultLog, type FaultSchedule } from '../faults/schedule';
import { VirtualTime } from '../faults/virtual-time';
import { mergeRequestBytes, REQUEST_LIMIT_BYTES, Warehouse } from '../models/warehouse';

/** Rows of ~1 MB each (an analysis with long line items): ten of them pass the request limit. */
const largeRows = (count: number) =>
  Array.from({ length: count }, () =>
    testRow({
      analysis: {
        document_type: 'invoice',
        line_items: Array.from({ length: 500 }, (_, i) => ({ description: `${i} ${'x'.repeat(2_000)}` })),
      },
    }),
  );

/** The fault simulator's warehouse, its statements following `statements`, with no poison document. */
const faultWarehouse = (time: VirtualTime, statements: FaultSchedule['bigquery']['statements']) =>
  new Warehouse(time, {
    table: 'docline-sim:docline.documents',
    faults: { schedule: { statements }, poisonKeys: new Set(), log: new FaultLog(() => time.nowMs()) },
  });

describe('the warehouse model', () => {
  it('does not send a statement the delivery has too little time left for, as BigQueryStore does not (a write sent 0.5 ms before its deadline ran past it)', async () => {
    const time = new VirtualTime();
    time.install();
    try {
      const warehouse = faultWarehouse(time, [{ latencyMs: 500 }]);
      const store = warehouse.store(0, () => true);
      const late = store.recordMany(
        [{ dedup_key: 'a' } as never],
        Deadline.after(MIN_STATEMENT_MS - 1, time.clock, realTimers),
      );
      await expect(late).rejects.toBeInstanceOf(DeadlineError);
      expect(warehouse.statements).toEqual([]);
      const inTime = store.recordMany(
        [{ dedup_key: 'a' } as never],
        Deadline.after(60_000, time.clock, realTimers),
      );
      await time.run(
        () => warehouse.statements.length > 0 && warehouse.statements[0]!.outcome !== undefined,
        time.nowMs() + 10_000,
      );
      await expect(inTime).resolves.toEqual(new Set(['a']));
    } finally {
      time.uninstall();
    }
  });

  it('stops a queued statement at its jobTimeoutMs, as a running one: it leaves the queue then, not when a slot frees (soak I6, seed 517)', async () => {
    const time = new VirtualTime();
    time.install();
    try {
      // Two MERGEs of 60 s fill BigQuery's running DML slots; a third, bounded at 5 s, queues.
      const slow = { latencyMs: 60_000, fault: 'slow' as const };
      const warehouse = faultWarehouse(time, [slow, slow, { latencyMs: 500 }]);
      const store = warehouse.store(0, () => true);
      const row = (key: string) => ({ dedup_key: key }) as never;
      const results: string[] = [];
      for (const [key, ms] of [
        ['a', 120_000],
        ['b', 120_000],
        ['c', 5_000],
      ] as const)
        store.recordMany([row(key)], Deadline.after(ms, time.clock, realTimers)).then(
          () => results.push(`${key} ok`),
          () => results.push(`${key} failed at ${time.nowMs()}`),
        );
      await time.run(() => results.length === 3, time.nowMs() + 300_000);
      const queued = warehouse.statements[2]!;
      expect(queued.outcome).toMatch(/timed out/);
      // Ended within a second of its bound (the store's margin), not at 60 s when a slot freed.
      expect(queued.endedAtMs! - queued.startedAtMs).toBeLessThanOrEqual(5_000);
      // It failed first, at its bound (the time left less the jobs.insert allowance), then a and b.
      expect(results).toEqual([`c failed at ${5_000 - JOB_INSERT_ALLOWANCE_MS}`, 'a ok', 'b ok']);
    } finally {
      time.uninstall();
    }
  });

  it('refuses a MERGE request over 10 MB with the 400 BigQuery answers, which the store takes for a refusal of its rows; one under it goes in', async () => {
    const time = new VirtualTime();
    time.install();
    try {
      const warehouse = faultWarehouse(time, [{ latencyMs: 500 }]);
      const over = largeRows(11);
      expect(mergeRequestBytes(over, time.clock.now())).toBeGreaterThan(REQUEST_LIMIT_BYTES);
      expect(mergeRequestBytes(over.slice(0, 9), time.clock.now())).toBeLessThan(REQUEST_LIMIT_BYTES);
      // At the port: the adapter's own mapping of BigQuery's answer.
      const store = warehouse.store(0, () => true);
      const refused = store.recordMany(over).catch((error: unknown) => error);
      await time.run(() => warehouse.statements.length > 0, time.nowMs() + 10_000);
      const error = await refused;
      expect(error).toBeInstanceOf(RowRefusalError);
      expect((error as RowRefusalError).code).toBe('bigquery_request_too_large');
      expect(warehouse.statements[0]!.outcome).toBe('refused: request too large');
      // Through the real BigQueryStore over the client model: jobs.insert itself refuses it.
      const clients = new BigQueryClients(time, warehouse, 'docline-sim.docline.documents');
      const adapter = new BigQueryStore({
        bigquery: clients.client(0, () => true),
        table: 'docline-sim.docline.documents',
      });
      const viaClient = adapter
        .recordMany(over, Deadline.after(60_000, time.clock, realTimers))
        .catch((error: unknown) => error);
      let settled = false;
      void viaClient.finally(() => {
        settled = true;
      });
      await time.run(() => settled, time.nowMs() + 60_000);
      expect(await viaClient).toBeInstanceOf(RowRefusalError);
      expect(warehouse.raw).toHaveLength(0);
      // Under the limit, the schedule's first statement runs and commits.
      const inserted = store.recordMany(over.slice(0, 9));
      let done = false;
      void inserted.finally(() => {
        done = true;
      });
      await time.run(() => done, time.nowMs() + 10_000);
      expect((await inserted).size).toBe(9);
    } finally {
      time.uninstall();
    }
  });
});
