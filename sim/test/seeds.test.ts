import { FAULT_KINDS, type FaultKind } from '../faults/schedule';
import { broken, runSeed } from '../faults/soak';

/**
 * A fixed set of small seeds that together inject every kind of fault, each run through the real
 * worker and checked against I1–I6. Picked by `npm run sim -- --cover 300` (seeds that hold the
 * invariants and cover the fault kinds greedily); when the schedule generator changes, pick again.
 */
export const SUITE_SEEDS: readonly number[] = [];

describe('a fixed set of seeds', () => {
  const injected = new Map<FaultKind, number>(FAULT_KINDS.map((k) => [k, 0]));

  it.each(SUITE_SEEDS.map((seed) => [seed]))('seed %i keeps I1–I6', async (seed) => {
    const { result, verdict } = await runSeed(seed);
    for (const k of FAULT_KINDS) injected.set(k, injected.get(k)! + result.faults.counts[k]);
    expect(result.record.end).toMatch(/^drained/);
    expect(broken(verdict)).toEqual([]);
  });

  it('injects every fault kind at least once', () => {
    expect(FAULT_KINDS.filter((k) => injected.get(k) === 0)).toEqual([]);
  });
});
