import { hunt, MUTANT_SEED_BOUND, MUTANTS } from '../faults/mutants';

/**
 * The checker's power, measured: every named bug, injected into the real worker at run time, is
 * caught by some invariant within the first MUTANT_SEED_BOUND seeds of the soak. A mutant that
 * runs them all and breaks nothing fails here: either the invariants went blind to it, or the
 * mutant no longer changes what the world sees (then it goes, with a word in docs/testing.md).
 */
describe('the mutants', () => {
  it('are at least twelve, with distinct names, each with a bound of at most 150 seeds', () => {
    expect(MUTANTS.length).toBeGreaterThanOrEqual(12);
    expect(MUTANTS.filter((m) => (m.seeds ?? MUTANT_SEED_BOUND) > 150).map((m) => m.name)).toEqual([]);
    expect(new Set(MUTANTS.map((m) => m.name)).size).toBe(MUTANTS.length);
  });

  it.each(MUTANTS.map((m) => [m.name, m]))(
    `%s is caught by an invariant within its bound of seeds (${MUTANT_SEED_BOUND} unless it names more)`,
    async (_name, mutant) => {
      const result = await hunt(mutant);
      expect(result.caught ? 'caught' : `not caught in ${result.seedsRun} seeds`).toBe('caught');
    },
  );
});
