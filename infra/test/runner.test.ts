/**
 * The program compiles under the Pulumi CLI exactly as `npm run typecheck` compiles it.
 * The engine runs `main: infra/` with infra/ as its working directory, and the SDK's runner reads
 * tsconfig.json from there; infra/tsconfig.json extends the root one, so the CLI and `tsc` agree.
 * This runs the real runner module (support/runner.ts), not the mocks.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { stackConfig } from './harness';
import { runUnderRunner } from './support/runner';

const REPO = path.resolve(__dirname, '../..');
const RUNS_MS = 300_000;

describe('infra/ under the SDK runner, from the directory the engine gives it', () => {
  it('infra/tsconfig.json takes its compiler options from the root tsconfig.json', () => {
    const own = JSON.parse(readFileSync(path.join(REPO, 'infra/tsconfig.json'), 'utf8'));
    const root = JSON.parse(readFileSync(path.join(REPO, 'tsconfig.json'), 'utf8'));
    expect(own.extends).toBe('../tsconfig.json');
    // The runner reads infra/tsconfig.json's own compilerOptions without following `extends` and
    // sets target/module/moduleResolution itself where they are missing: they must be stated here.
    for (const key of ['target', 'module', 'moduleResolution']) {
      expect(own.compilerOptions[key]).toBe(root.compilerOptions[key]);
    }
  });

  it(
    'compiles the program and reaches its first resource registration',
    async () => {
      const outcome = await runUnderRunner(stackConfig('dev'));
      expect(outcome.output).not.toMatch(/Unable to compile TypeScript/);
      expect(outcome.firstResourceType).toBeDefined();
    },
    RUNS_MS,
  );

  it(
    'without infra/tsconfig.json the same run fails to compile (TS2550: the default lib of ts-node has no replaceAll)',
    async () => {
      // A copy of infra/ beside the real one, so relative imports (../worker) still resolve, with
      // the tsconfig.json removed: what every `pulumi preview` met before the fix.
      const dir = mkdtempSync(path.join(REPO, '.infra-no-tsconfig-'));
      try {
        cpSync(path.join(REPO, 'infra'), dir, {
          recursive: true,
          filter: (src) => !src.includes(`${path.sep}test`),
        });
        rmSync(path.join(dir, 'tsconfig.json'));
        const outcome = await runUnderRunner(stackConfig('dev'), { programDir: dir });
        expect(outcome.output).toMatch(/Unable to compile TypeScript/);
        expect(outcome.output).toMatch(/TS2550/);
        expect(outcome.firstResourceType).toBeUndefined();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    RUNS_MS,
  );
});
