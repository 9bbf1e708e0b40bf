import path from 'node:path';
import { mergeResults, resultsFile, rewrite } from '../results-file';
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
  const file = mergeResults(resultsFile(), { growth });
  const docs = path.join(__dirname, '..', '..', 'docs');
  rewrite(path.join(docs, 'sweep.md'), (text) => replaceGrowthFigures(text, growth, 'docs/sweep.md'));
  rewrite(path.join(docs, 'deploy.md'), (text) => replaceVolumeTable(text, growth));
  options.progress(
    `growth done in ${((Date.now() - started) / 1000).toFixed(0)} s; figures in ${path.relative(process.cwd(), file)}`,
  );
  process.stdout.write(renderGrowthReport(growth));
}
