import { SqliteStore } from '../../src/adapters/stores/sqlite-store';
import { DEFAULT_CONTENT_TYPES } from '../../src/contract/settings';
import { TransientError } from '../../src/core/errors';
import { parsePush } from '../../src/core/event';
import { type HandlerDeps, handle } from '../../src/core/handle';
import type { Store } from '../../src/core/ports';
import { type ObjectSpec, pushBody } from './builders';
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

/**
 * Delivers `bytes` as the object `spec` through handle() on `built`'s dependencies, as message
 * `messageId` (by default the next of 1, 2, …): the outcome and the row stored under its key.
 */
export function deliverer({ reader, store, deps }: ReturnType<typeof handlerDeps>) {
  let messages = 0;
  return async (bytes: Buffer | string, spec: ObjectSpec, messageId = String(++messages)) => {
    const body = pushBody(messageId, { size: Buffer.from(bytes).length, ...spec });
    reader.putAnnounced(body, bytes);
    const outcome = await handle(parsePush(body), deps);
    return { outcome, row: store.rowsFor(outcome.dedupKey)[0] };
  };
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
