import type { Analyzer, BatchStore, MemoStore, Reader, Store } from '../../worker/src/core/ports';
import type { SimClock } from '../time';

/** What a mutant's changes may use: the simulated clock. */
export interface MutantContext {
  time: SimClock;
}

/**
 * A named bug, injected into the real worker at run time by wrapping one of its ports (or its
 * answer on the way out): the worker's code is not touched. The invariants prove their power by
 * catching every one (sim/test/mutants.test.ts).
 */
export interface Mutant {
  name: string;
  /** The bug, in words. */
  bug: string;
  store?: (store: Store, context: MutantContext) => Store;
  batchStore?: (store: BatchStore, context: MutantContext) => BatchStore;
  memo?: (memo: MemoStore, context: MutantContext) => MemoStore;
  analyzer?: (analyzer: Analyzer, context: MutantContext) => Analyzer;
  reader?: (reader: Reader, context: MutantContext) => Reader;
  /** The worker's HTTP answer as it leaves the instance. */
  answer?: (status: number) => number;
}

export const MUTANTS: readonly Mutant[] = [];
