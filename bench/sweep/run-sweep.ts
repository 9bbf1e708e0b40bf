import path from 'node:path';
import { mergeResults, resultsFile, rewrite } from '../results-file';
import { renderSweepReport, replaceSweepFigures } from './report';
import { runSweepStage } from './stage';

/**
 * `npm run bench -- --stage sweep`: runs the sweep's grid, merges its `sweep` section into
 * bench/results.json (read-modify-write of that key only), regenerates the sweep block of
 * bench/README.md and docs/sweep.md from that file and prints it. `--quick` runs the tuning set only
 * (bench/sweep/grid.ts) into results.quick.json and leaves the docs alone: the run defaults are
 * chosen on. `--cells A,B` runs just those cells, also into results.quick.json (a part is not the
 * sweep); `--skip-cells A,B` the grid without them, into results.json, the section and the blocks
 * naming them.
 */
export async function runSweep(options: Parameters<typeof runSweepStage>[0]): Promise<void> {
  const sweep = await runSweepStage(options);
  const benchDir = path.join(__dirname, '..');
  const partial = options.quick || options.cells !== undefined;
  const file = mergeResults(resultsFile(partial), { sweep });
  if (!partial) {
    for (const doc of [path.join(benchDir, 'README.md'), path.join(benchDir, '..', 'docs', 'sweep.md')])
      rewrite(doc, (text) => replaceSweepFigures(text, sweep, path.relative(path.join(benchDir, '..'), doc)));
  }
  options.progress(
    `sweep done in ${sweep.runtimeSeconds.toFixed(0)} s; figures in ${path.relative(process.cwd(), file)}`,
  );
  process.stdout.write(renderSweepReport(sweep));
}
