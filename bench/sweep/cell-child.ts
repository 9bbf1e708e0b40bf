import { writeFileSync } from 'node:fs';
import { sweepGrid } from './grid';
import { runCell } from './stage';

/**
 * `node --import tsx bench/sweep/cell-child.ts NAME FILE`: runs the sweep cell NAME (of the full
 * grid) and writes `{ cell, details }` to FILE as JSON. The sweep's `--jobs` runs cells this way,
 * one child per cell.
 */
async function main(): Promise<void> {
  const [name, file] = process.argv.slice(2);
  const spec = sweepGrid(false).find((c) => c.name === name);
  if (!spec || !file) throw new Error(`usage: cell-child.ts NAME FILE (no grid cell is named "${name}")`);
  writeFileSync(file, JSON.stringify(await runCell(spec)));
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
