import { MemoryMemoStore } from '../../worker/src/adapters/memo-stores/memory-memo-store';
import { QuotaGate } from '../../worker/src/adapters/quota-gate';
import { BigQueryStore } from '../../worker/src/adapters/stores/bigquery-store';
import { GroupCommitStore } from '../../worker/src/adapters/stores/group-commit-store';
import { AnalysisMemo } from '../../worker/src/core/memo';
import type { BatchStore, Store } from '../../worker/src/core/ports';
import type { InstanceContext, Wiring } from './scenario';

const DAY_MS = 24 * 60 * 60 * 1000;

/** The store every instance puts under group commit: the production BigQuery store. */
export function bigQueryStoreFor({ bigquery, table, clock, settings }: InstanceContext): BigQueryStore {
  return new BigQueryStore({
    bigquery,
    table,
    location: 'EU',
    clock,
    maximumBytesBilled: settings.maximumBytesBilled,
  });
}

/**
 * The seed's design as a baseline: each delivery's lookup and MERGE are a statement of their own,
 * sent at once, as many at a time as deliveries run (no batching, no pacing). The statements are
 * the store's batched ones, carrying one key or one row.
 */
export function statementPerDelivery(store: BatchStore): Store {
  return {
    seen: async (key, deadline) => (await store.seenMany([key], deadline)).has(key),
    record: async (row, deadline) => (await store.recordMany([row], deadline)).has(row.dedup_key),
    ping: () => store.ping(),
  };
}

/**
 * The groupCommit scenario's wiring, made fresh for each run: GroupCommitStore over BigQueryStore
 * in every instance, and an AnalysisMemo per instance (single flight is per instance) over one
 * MemoryMemoStore that every instance shares (the memo bucket is one for the whole service).
 *
 * The batcher's timers are real `setTimeout`s: its knobs are given in real milliseconds (the
 * simulated ones ÷ the scale), and its clock is the simulated clock in the same unit, so a timer
 * that fires while the simulated clock was held back re-checks and waits on (never early in
 * simulated time: the 25 DML statements per 10 s stay honoured).
 */
export const groupCommitWiring = (): Wiring => {
  const memoStore = new MemoryMemoStore();
  return {
    store: (context) => {
      const { time, settings } = context;
      return new GroupCommitStore(
        bigQueryStoreFor(context),
        {
          maxRows: settings.batchMaxRows,
          maxWaitMs: time.realMs(settings.batchMaxWaitMs),
          minIntervalMs: time.realMs(settings.mergeMinIntervalMs),
        },
        () => time.realMs(time.nowMs()),
      );
    },
    extraDeps: ({ time, settings }) => ({
      memo: new AnalysisMemo(memoStore, {
        ttlMs: settings.redeliveryWindowDays * DAY_MS,
        clock: time.clock,
        // The lease's wait runs on the simulated clock, like every other delay here.
        sleep: (ms) => time.sleep(ms),
        // BigQuery, as the composition root has it.
        writesOutliveInstance: true,
      }),
      // Deliveries wait their turn at the analyzer inside the request, as the composition root has them.
      admission: new QuotaGate({
        maxInFlight: settings.analyzerMaxInFlight,
        maxBytesInFlight: settings.analyzerMaxInFlight * settings.maxObjectBytes,
        maxWaitMs: settings.analyzerQuotaWaitMs,
        clock: time.clock,
        timers: time,
      }),
    }),
  };
};
