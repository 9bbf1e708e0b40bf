import type { Row } from '../worker/src/contract/row';
import type { Deadline } from '../worker/src/core/deadline';
import type { BatchStore } from '../worker/src/core/ports';

/**
 * A simulated warehouse seen through the worker's `BatchStore` port: the single-key calls are the
 * batched ones with one key, as group commit would send them.
 */
export function batchStoreOf(
  seenMany: (keys: readonly string[], deadline?: Deadline) => Promise<Set<string>>,
  recordMany: (rows: readonly Row[], deadline?: Deadline) => Promise<Set<string>>,
): BatchStore {
  return {
    seenMany,
    recordMany,
    seen: async (key, deadline) => (await seenMany([key], deadline)).has(key),
    record: async (row, deadline) => (await recordMany([row], deadline)).has(row.dedup_key),
    ping: async () => {},
  };
}
