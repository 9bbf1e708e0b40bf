import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { renderGrowthReport, replaceGrowthFigures, replaceVolumeTable } from './report';
import { runGrowthStage } from './stage';

/**
 * `npm run bench -- --stage growth`: runs the growth cells, merges the `growth` section into
 * bench/results.json (that key only), regenerates the growth block of docs/sweep.md and the volume
 * table of docs/deploy.md from it, and prints the report.
 */
export async function runGrowth(options: { progress: (text: string) => void }): Promise<void> {
  const started = Date.now();
  const growth = await runGrowthStage(options.progress);
  const benchDir = path.join(__dirname, '..');
  const file = path.join(benchDir, 'results.json');
  const previous = existsSync(file)
    ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>)
    : {};
  writeFileSync(file, `${JSON.stringify({ ...previous, growth }, null, 2)}\n`);
  const root = path.join(benchDir, '..');
  const sweepDoc = path.join(root, 'docs', 'sweep.md');
  writeFileSync(sweepDoc, replaceGrowthFigures(readFileSync(sweepDoc, 'utf8'), growth, 'docs/sweep.md'));
  const deployDoc = path.join(root, 'docs', 'deploy.md');
  writeFileSync(deployDoc, replaceVolumeTable(readFileSync(deployDoc, 'utf8'), growth));
  options.progress(
    `growth done in ${((Date.now() - started) / 1000).toFixed(0)} s; figures in ${path.relative(process.cwd(), file)}`,
  );
  process.stdout.write(renderGrowthReport(growth));
}
