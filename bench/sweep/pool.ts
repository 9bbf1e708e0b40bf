import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { runCell } from './stage';

/**
 * Runs `run` on every item, at most `jobs` at once, and gives the results in the items' order
 * (not the order they finished in), so a sweep's section does not depend on how many jobs ran it.
 */
export async function inOrderPool<T, R>(
  items: readonly T[],
  jobs: number,
  run: (item: T, index: number) => Promise<R>,
  done: (result: R, item: T, index: number) => void = () => {},
): Promise<R[]> {
  if (!(Number.isInteger(jobs) && jobs >= 1))
    throw new Error(`jobs must be a whole number ≥ 1 (got ${jobs})`);
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) {
      results[i] = await run(items[i]!, i);
      done(results[i]!, items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, items.length) }, worker));
  return results;
}

/** What a child process gives back for one cell (see cell-child.ts): what `runCell` gives here. */
export type CellRun = Awaited<ReturnType<typeof runCell>>;

/**
 * Runs one grid cell in a child process (`node --import tsx cell-child.ts NAME FILE`): the same
 * code and seeds as in this process (a cell's figures depend only on its spec: virtual time and
 * seeded models), on another core. The result comes back through a file, as JSON (numbers
 * round-trip exactly), and the child's own output goes to this process's stderr.
 */
export function runCellInChild(name: string): Promise<CellRun> {
  const dir = mkdtempSync(path.join(tmpdir(), 'docline-sweep-'));
  const file = path.join(dir, 'cell.json');
  return new Promise<CellRun>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        '--disable-warning=ExperimentalWarning',
        '--import',
        'tsx',
        path.join(__dirname, 'cell-child.ts'),
        name,
        file,
      ],
      { stdio: ['ignore', 'inherit', 'inherit'] },
    );
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      try {
        if (code !== 0)
          throw new Error(`sweep cell ${name}: its process ended with ${signal ?? `code ${code}`}`);
        resolve(JSON.parse(readFileSync(file, 'utf8')) as CellRun);
      } catch (error) {
        reject(error);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
