import { checkInvariants } from '../faults/invariants';
import { runSchedule } from '../faults/run';
import { SCENARIOS, scenarioProblems } from '../faults/scenarios';

/**
 * The named interleavings, kept as regression cases: each scenario drives the real
 * worker into its interleaving, and passes only when every invariant (and its own check) holds.
 */
describe('the named interleavings', () => {
  it('are all here, each with at least one scenario', () => {
    expect([...new Set(SCENARIOS.map((s) => s.interleaving))].sort((a, b) => a - b)).toEqual([
      1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
    ]);
  });

  const run = async (scenario: (typeof SCENARIOS)[number]) => {
    const result = scenario.schedule ? await runSchedule(scenario.schedule) : undefined;
    const verdict = result ? checkInvariants(result.record) : undefined;
    if (result) expect(result.record.end).toMatch(/^drained/);
    return scenarioProblems(scenario, verdict, result?.record);
  };

  for (const scenario of SCENARIOS.filter((s) => !s.open)) {
    it(`${scenario.interleaving}. ${scenario.name}: ${scenario.title}`, async () => {
      expect(await run(scenario)).toEqual([]);
    });
  }

  // Open: the worker still lets these happen. They must still fail here; once one passes, its
  // `open` mark goes (sim/faults/scenarios.ts) and it joins the regression cases above.
  for (const scenario of SCENARIOS.filter((s) => s.open)) {
    it(`${scenario.interleaving}. ${scenario.name} is still open: ${scenario.open}`, async () => {
      expect(await run(scenario)).not.toEqual([]);
    });
  }
});
