import { checkInvariants } from '../faults/invariants';
import { runSchedule } from '../faults/run';
import { SCENARIOS, scenarioProblems } from '../faults/scenarios';

/**
 * The eight interleavings of issue 20, kept as regression cases: each scenario drives the real
 * worker into its interleaving, and passes only when every invariant (and its own check) holds.
 */
describe('the eight interleavings of issue 20', () => {
  it('are all here, one scenario each', () => {
    expect(SCENARIOS.map((s) => s.interleaving).sort()).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  for (const scenario of SCENARIOS) {
    it(`${scenario.interleaving}. ${scenario.name}: ${scenario.title}`, async () => {
      const result = scenario.schedule ? await runSchedule(scenario.schedule) : undefined;
      const verdict = result ? checkInvariants(result.record, result.faults) : undefined;
      if (result) expect(result.record.end).toMatch(/^drained/);
      expect(scenarioProblems(scenario, verdict, result?.record)).toEqual([]);
    });
  }
});
