import type { Wiring } from './scenario';

/**
 * The groupCommit scenario's wiring: GroupCommitStore over BigQueryStore, and AnalysisMemo over one
 * MemoryMemoStore shared by every instance (the memo bucket is one for the whole service).
 * Undefined until both exist in worker/src.
 */
export const groupCommitWiring: Wiring | undefined = undefined;
