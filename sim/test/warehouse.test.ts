import { JOB_INSERT_ALLOWANCE_MS } from '../../worker/src/adapters/stores/bigquery-store';
import { Deadline } from '../../worker/src/core/deadline';
import { realTimers } from '../../worker/src/core/ports';
import { FaultLog } from '../faults/schedule';
import { VirtualTime } from '../faults/virtual-time';
import { Warehouse } from '../faults/warehouse';

describe('the warehouse model', () => {
  it('stops a queued statement at its jobTimeoutMs, as a running one: it leaves the queue then, not when a slot frees (soak I6, seed 517)', async () => {
    const time = new VirtualTime();
    time.install();
    try {
      // Two MERGEs of 60 s fill BigQuery's running DML slots; a third, bounded at 5 s, queues.
      const slow = { latencyMs: 60_000, fault: 'slow' as const };
      const warehouse = new Warehouse(
        time,
        { statements: [slow, slow, { latencyMs: 500 }] },
        new Set(),
        new FaultLog(() => time.nowMs()),
      );
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
});
