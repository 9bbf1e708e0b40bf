import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { tsxArgs } from '../../local/lib/worker-process';
import { mergeResults, resultsFile, rewrite } from '../results-file';
import {
  MEMORY_GOAL,
  type MemorySection,
  memoryGrowth,
  renderMemoryReport,
  replaceMemoryFigures,
} from './report';
import type { MemoryRunSummary, MemorySample } from './stage';

/**
 * `npm run bench -- --stage memory [--quick]`: one worker process (bench/memory/child.ts, started
 * with --expose-gc and the environment the worker image sets) handles a million deliveries; its RSS is sampled every 50,000. The `memory`
 * section of bench/results.json is replaced (that key only) and the memory block of
 * bench/README.md generated from it; `--quick` runs 100,000 deliveries into results.quick.json and
 * leaves the docs alone.
 */

export const MEMORY_SETTINGS = Object.freeze({
  deliveries: MEMORY_GOAL.toDeliveries,
  sampleEvery: 50_000,
  concurrency: 32,
  redeliveryEvery: 10,
});

export async function runMemory(options: {
  quick: boolean;
  progress: (text: string) => void;
}): Promise<void> {
  const settings = options.quick
    ? { ...MEMORY_SETTINGS, deliveries: 100_000, sampleEvery: 10_000 }
    : { ...MEMORY_SETTINGS };
  options.progress(
    `memory: ${settings.deliveries.toLocaleString('en-US')} deliveries in one worker process, RSS every ${settings.sampleEvery.toLocaleString('en-US')}`,
  );
  const { samples, summary } = await runChild(settings, (sample) =>
    options.progress(
      `memory: ${sample.deliveries.toLocaleString('en-US')} deliveries, RSS ${(sample.rssBytes / 1024 / 1024).toFixed(1)} MiB, ` +
        `heap ${(sample.heapUsedBytes / 1024 / 1024).toFixed(1)} MiB, memo ${JSON.stringify(sample.memo)}`,
    ),
  );
  const memory: MemorySection = {
    date: new Date().toISOString(),
    ...commit(),
    node: process.version,
    environment: imageEnvironment(),
    deliveries: summary.deliveries,
    documents: summary.documents,
    concurrency: settings.concurrency,
    redeliveryEvery: settings.redeliveryEvery,
    sampleEvery: settings.sampleEvery,
    seconds: summary.seconds,
    samples,
    outcomes: summary.outcomes,
    ...memoryGrowth(
      samples,
      options.quick ? { ...MEMORY_GOAL, fromDeliveries: 10_000, toDeliveries: 100_000 } : MEMORY_GOAL,
    ),
  };
  const file = mergeResults(resultsFile(options.quick), { memory });
  if (!options.quick)
    rewrite(path.join(__dirname, '..', 'README.md'), (text) => replaceMemoryFigures(text, memory));
  options.progress(`memory done; figures in ${path.relative(process.cwd(), file)}`);
  process.stdout.write(renderMemoryReport(memory));
  if (!memory.goal.met) process.exitCode = 1;
}

/**
 * The environment the worker image sets (the `ENV` lines of worker/Dockerfile's runtime stage), so
 * that the stage measures the process as Cloud Run runs it: the allocator's settings are part of
 * its memory.
 */
export function imageEnvironment(
  dockerfile = readFileSync(path.join(__dirname, '..', '..', 'worker', 'Dockerfile'), 'utf8'),
): Record<string, string> {
  const stages = dockerfile.split(/^FROM\s/m);
  const runtime = stages.find((stage) => /^\S+\s+AS\s+runtime\b/i.test(stage));
  if (!runtime) throw new Error('worker/Dockerfile has no runtime stage');
  const environment: Record<string, string> = {};
  for (const line of runtime.split('\n')) {
    const env = /^ENV\s+(.*)$/.exec(line.trim());
    if (!env) continue;
    for (const pair of env[1]!.trim().split(/\s+/)) {
      const at = pair.indexOf('=');
      if (at > 0) environment[pair.slice(0, at)] = pair.slice(at + 1);
    }
  }
  return environment;
}

function runChild(
  settings: { deliveries: number; sampleEvery: number; concurrency: number; redeliveryEvery: number },
  onSample: (sample: MemorySample) => void,
): Promise<{ samples: MemorySample[]; summary: MemoryRunSummary }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        '--expose-gc',
        ...tsxArgs(
          path.join(__dirname, 'child.ts'),
          [settings.deliveries, settings.sampleEvery, settings.concurrency, settings.redeliveryEvery].map(
            String,
          ),
        ),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...imageEnvironment() } },
    );
    const samples: MemorySample[] = [];
    let summary: MemoryRunSummary | undefined;
    createInterface({ input: child.stdout }).on('line', (line) => {
      const message = JSON.parse(line) as { sample?: MemorySample; summary?: MemoryRunSummary };
      if (message.sample) {
        samples.push(message.sample);
        onSample(message.sample);
      }
      if (message.summary) summary = message.summary;
    });
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0 && summary) resolve({ samples, summary });
      else reject(new Error(`the memory stage's worker process ended with ${signal ?? `code ${code}`}`));
    });
  });
}

function commit(): { commit?: string } {
  try {
    return {
      commit: execFileSync('git', ['describe', '--always', '--dirty'], {
        cwd: __dirname,
        encoding: 'utf8',
      }).trim(),
    };
  } catch {
    return {};
  }
}
