import type { AnalysisProgress, AnalysisResult } from '../../src/contract/analysis';
import { Deadline } from '../../src/core/deadline';
import { paidAnalysis } from '../../src/core/handle';
import type { AnalysisMemo, MemoPeek } from '../../src/core/memo';
import { type Admission, admitAtOnce, type Store } from '../../src/core/ports';

/**
 * One delivery's analysis of `key` as `handle` takes it (core/handle.ts, paidAnalysis: cached? →
 * admitted → the lease → read and analyse → kept), with `work` standing for reading the document
 * and paying for its analysis (`resume`: the attempts an earlier delivery paid for). `store`: asked
 * whether the row was written meanwhile, after a holder that kept no analysis (by default, never).
 */
export function analyse(
  memo: AnalysisMemo,
  key: string,
  work: (resume?: AnalysisProgress) => Promise<AnalysisResult>,
  admission: Admission = admitAtOnce,
  deadline: Deadline = Deadline.none(),
  peeked?: MemoPeek,
  store: Pick<Store, 'seen'> = { seen: async () => false },
) {
  return paidAnalysis(key, { memo, store, admission, readAndAnalyse: work }, peeked, deadline);
}
