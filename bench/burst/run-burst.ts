import path from 'node:path';
import { renderBurstReport, replaceBurstFigures } from '../report';
import { mergeResults, resultsFile, rewrite } from '../results-file';
import { type BurstSection, runBurstStage } from './stage';

/**
 * `npm run bench -- --stage burst`: runs the burst stage alone, merges its `burst` section into
 * bench/results.json (the other sections stay), regenerates the figures block of bench/README.md
 * from that file and prints it. `--quick` runs 1,000 documents into results.quick.json, README untouched.
 */
export async function runBurst(options: { quick: boolean; progress: (text: string) => void }): Promise<void> {
  const started = performance.now();
  const burst: BurstSection = await runBurstStage({
    documents: options.quick ? 1_000 : undefined,
    progress: options.progress,
  });
  const file = mergeResults(resultsFile(options.quick), { burst });
  if (!options.quick)
    rewrite(path.join(__dirname, '..', 'README.md'), (text) => replaceBurstFigures(text, burst));
  options.progress(
    `burst stage done in ${((performance.now() - started) / 1000).toFixed(0)} s; figures in ${path.relative(process.cwd(), file)}`,
  );
  process.stdout.write(renderBurstReport(burst));
}
