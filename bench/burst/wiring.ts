import type { Wiring } from './scenario';

/**
 * The groupCommit scenario's wiring, made fresh for each run: GroupCommitStore over BigQueryStore
 * in every instance, and AnalysisMemo over one MemoryMemoStore that every instance shares (the memo
 * bucket is one for the whole service). Undefined until both exist in worker/src.
 */
export const groupCommitWiring: (() => Wiring) | undefined = undefined;
