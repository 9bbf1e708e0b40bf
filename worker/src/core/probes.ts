/**
 * Coverage probes: the rare, risky branches of a delivery, counted where they run (FoundationDB's
 * code probes). The fault simulator's soak reports how often its seeds reached each one and falls
 * short of its bar when one is never reached: a branch no seed takes is a branch no invariant
 * checks. In a deployed worker they are counters nobody reads.
 */
export const PROBES = {
  'memo.replayed': 'an analysis an earlier delivery kept answered this one',
  'memo.keptWhileQueued': 'a concurrent delivery kept the analysis while this one waited its turn',
  'memo.callPassedBy': 'a memo call failed or ran out of time, and the delivery went on without it',
  'lease.holderKept': "the lease's holder kept the analysis while this delivery waited for the lease",
  'lease.afterEarlierHolder':
    'the lease was taken after an earlier holder (ended, or expired and taken over)',
  'lease.writtenMeanwhile': 'the holder this delivery waited for wrote the row',
  'analysis.cutKeptLate': 'an analysis cut at the deadline ran on, and its answer was kept late',
  'write.outcomeUnknown': "a write's outcome was unknown, so its key's lease was held to the write's bound",
  'batch.rowRefused': 'a batch was refused for one of its rows, and split to find it',
  'batch.fewerInserted': 'a MERGE inserted fewer rows than it carried, and the winners were read',
} as const;

export type ProbeName = keyof typeof PROBES;

const counts = new Map<ProbeName, number>();

/** Counts one pass through the branch `name`. */
export function probe(name: ProbeName): void {
  counts.set(name, (counts.get(name) ?? 0) + 1);
}

/** Every probe with its count since the last {@link resetProbes}, unreached ones at 0. */
export function probeCounts(): Record<ProbeName, number> {
  return Object.fromEntries(
    (Object.keys(PROBES) as ProbeName[]).map((name) => [name, counts.get(name) ?? 0]),
  ) as Record<ProbeName, number>;
}

export function resetProbes(): void {
  counts.clear();
}
