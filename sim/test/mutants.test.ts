import { execFile } from 'node:child_process';
import path from 'node:path';
import { INVARIANT_IDS } from '../faults/invariants';
import { MUTANT_SEED_BOUND, MUTANTS, UNCAUGHT_MUTANTS } from '../faults/mutants';

/**
 * The checker's power, measured: every named bug, injected into the real worker at run time, is
 * caught by some invariant within the first MUTANT_SEED_BOUND seeds of the soak. A mutant that
 * runs them all and breaks nothing fails here: either the invariants went blind to it, or the
 * mutant no longer changes what the world sees (then it goes, with a word in docs/testing.md).
 *
 * Each hunt runs in a process of its own (`npm run sim -- --mutant NAME`, the command a developer
 * runs): one jest worker running every hunt in turn ran out of memory, and a process that exits
 * gives back all a hunt held.
 */

const ROOT = path.join(__dirname, '..', '..');
/** A hunt of up to 150 seeds takes minutes on a shared 2-core machine: more than the suite's 300 s. */
const HUNT_TIMEOUT_MS = 20 * 60_000;

/** What `npm run sim -- --mutant NAME` printed, and its exit status. */
function huntAlone(name: string): Promise<{ status: number; output: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', '--import', 'tsx', 'sim/commands/sim.ts', '--mutant', name],
      { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const status = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ status, output: `${stdout}${stderr}` });
      },
    );
  });
}

describe('the mutants', () => {
  it('are at least twelve, with distinct names, each with a bound of at most 150 seeds', () => {
    expect(MUTANTS.length).toBeGreaterThanOrEqual(12);
    expect(MUTANTS.filter((m) => (m.seeds ?? MUTANT_SEED_BOUND) > 150).map((m) => m.name)).toEqual([]);
    expect(new Set(MUTANTS.map((m) => m.name)).size).toBe(MUTANTS.length);
  });

  it.each(MUTANTS.filter((m) => !(m.name in UNCAUGHT_MUTANTS)).map((m) => [m.name]))(
    `%s is caught by an invariant within its bound of seeds (${MUTANT_SEED_BOUND} unless it names more)`,
    async (name) => {
      const { status, output } = await huntAlone(name);
      const verdict = output.split('\n').find((line) => line.startsWith(`mutant ${name}: `)) ?? output;
      expect(verdict).toMatch(
        new RegExp(`^mutant ${name}: caught by (${INVARIANT_IDS.join('|')}) on seed \\d+`),
      );
      // The worker as it is keeps every seed it was hunted on (its world's, for a mutant with rates).
      expect(output).not.toContain(`mutant ${name}: the worker as it is breaks an invariant`);
      expect(status).toBe(0);
    },
    HUNT_TIMEOUT_MS,
  );

  // A listed blind spot stays a blind spot until the checker sees it: then this fails, and the
  // entry leaves UNCAUGHT_MUTANTS.
  const uncaught = Object.keys(UNCAUGHT_MUTANTS).map((name) => [name]);
  (uncaught.length > 0 ? it.each(uncaught) : it.skip.each([['(none listed)']]))(
    '%s is listed as not caught, and is still not caught within its bound',
    async (name) => {
      const { output } = await huntAlone(name);
      expect(output).toContain(`mutant ${name}: NOT CAUGHT`);
    },
    HUNT_TIMEOUT_MS,
  );
});
