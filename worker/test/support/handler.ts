import { SqliteStore } from '../../src/adapters/stores/sqlite-store';
import { DEFAULT_CONTENT_TYPES } from '../../src/contract/settings';
import { TransientError } from '../../src/core/errors';
import type { HandlerDeps } from '../../src/core/handle';
import type { Store } from '../../src/core/ports';
import { fixedClock, MemoryReader, ScriptedAnalyzer } from './fakes';

/**
 * The handler's dependencies as the core tests use them: SQLite in memory, a bucket in memory, a
 * scripted analyzer, object keys, a 1 KiB object limit. `overrides` replaces any of them.
 */
export function handlerDeps(overrides: Partial<HandlerDeps> = {}) {
  const store = new SqliteStore({ path: ':memory:', clock: overrides.clock ?? fixedClock() });
  const reader = new MemoryReader();
  const analyzer = new ScriptedAnalyzer();
  const deps: HandlerDeps = {
    store,
    reader,
    analyzer,
    clock: fixedClock(),
    dedupKeyMode: 'object',
    limits: { maxObjectBytes: 1024, allowedContentTypes: DEFAULT_CONTENT_TYPES },
    workerVersion: 'test',
    ...overrides,
  };
  return { store, reader, analyzer, deps };
}

/** Makes the next `times` writes of `store` fail with `error` (by default a busy SQLite database). */
export function failWrites(
  store: Pick<Store, 'record'>,
  times: number,
  error = new TransientError('store_busy', 'the SQLite database is busy'),
): void {
  const record = store.record.bind(store);
  let failures = times;
  store.record = async (row) => {
    if (failures-- > 0) throw error;
    return record(row);
  };
}
