import type { Row } from '../worker/src/contract/row';
import type { BatchStore } from '../worker/src/core/ports';

/**
 * A simulated warehouse seen through the worker's `BatchStore` port: the single-key calls are the
 * batched ones with one key, as group commit would send them.
 */
export function batchStoreOf(
  seenMany: (keys: readonly string[]) => Promise<Set<string>>,
  recordMany: (rows: readonly Row[]) => Promise<Set<string>>,
): BatchStore {
  return {
    seenMany,
    recordMany,
    seen: async (key) => (await seenMany([key])).has(key),
    record: async (row) => (await recordMany([row])).has(row.dedup_key),
    ping: async () => {},
  };
}
