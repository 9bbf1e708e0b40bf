import { FAULT_KINDS, type FaultKind } from '../faults/schedule';
import { broken, runSeed } from '../faults/soak';

/**
 * A fixed set of small seeds that together inject every kind of fault, each run through the real
 * worker and checked against I1–I8: the seeds 1–22, and 53, 65, 233 and 246, which
 * `npm run sim -- --cover 250` picks so that every kind is injected (greedily, among seeds that
 * hold the invariants). When the schedule generator changes, pick again; a seed here that starts
 * failing after a change to the worker is a finding: replay it with `npm run sim -- --seed N`.
 * Seeds 159 and 1259 stay as regression cases of the simulator itself: an instance whose clock is
 * skewed read its drain's deadline on the true clock, and its requests' on its own (159); its batch
 * timers read the true clock, so a MERGE started in a batch timer was bounded by a deadline set on
 * the skewed clock and ran past the true one (1259, I6). Seed 62 adds an operator's actions (a
 * reconcile --apply while a poison document is at work, and the replay of its dead letters), drawn
 * from the seed's fifth stream after the others, so the seeds above kept their faults.
 */
const SUITE_SEEDS: readonly number[] = [
  1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 53, 62, 65, 159, 233, 246,
  1259,
];

describe('a fixed set of seeds', () => {
  const injected = new Map<FaultKind, number>(FAULT_KINDS.map((k) => [k, 0]));

  it.each(SUITE_SEEDS.map((seed) => [seed]))('seed %i keeps I1–I8', async (seed) => {
    const { result, verdict } = await runSeed(seed);
    for (const k of FAULT_KINDS) injected.set(k, injected.get(k)! + result.faults.counts[k]);
    expect(result.record.end).toMatch(/^drained/);
    expect(broken(verdict)).toEqual([]);
  });

  it('injects every fault kind at least once', () => {
    expect(FAULT_KINDS.filter((k) => injected.get(k) === 0)).toEqual([]);
  });
});
