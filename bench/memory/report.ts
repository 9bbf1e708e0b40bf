import { figuresBlock } from '../results-file';
import type { MemorySample } from './stage';

/**
 * The memory stage's figures: the `memory` section of bench/results.json, its goal, and the block
 * of bench/README.md generated from it.
 */

/** The goal: RSS may grow by less than this share between the two deliveries named. */
export const MEMORY_GOAL = Object.freeze({
  fromDeliveries: 100_000,
  toDeliveries: 1_000_000,
  maxGrowth: 0.1,
});

export interface MemorySection {
  date: string;
  commit?: string;
  node: string;
  /** The environment the worker image sets, which the stage's worker process ran with. */
  environment?: Record<string, string>;
  deliveries: number;
  documents: number;
  concurrency: number;
  redeliveryEvery: number;
  sampleEvery: number;
  seconds: number;
  samples: MemorySample[];
  outcomes: Record<string, number>;
  /** RSS at `toDeliveries` over RSS at `fromDeliveries`, less 1 (NaN when a sample is missing). */
  rssGrowth: number;
  heapGrowth: number;
  goal: { value: number; goal: string; met: boolean };
}

/** RSS and heap growth between the goal's two samples, and the goal's verdict. */
export function memoryGrowth(
  samples: readonly MemorySample[],
  goal: { fromDeliveries: number; toDeliveries: number; maxGrowth: number } = MEMORY_GOAL,
): Pick<MemorySection, 'rssGrowth' | 'heapGrowth' | 'goal'> {
  const at = (n: number) => samples.find((s) => s.deliveries === n);
  const from = at(goal.fromDeliveries);
  const to = at(goal.toDeliveries);
  const rssGrowth = from && to ? to.rssBytes / from.rssBytes - 1 : Number.NaN;
  const heapGrowth = from && to ? to.heapUsedBytes / from.heapUsedBytes - 1 : Number.NaN;
  return {
    rssGrowth,
    heapGrowth,
    goal: {
      value: rssGrowth,
      goal: `< ${(goal.maxGrowth * 100).toFixed(0)} % from ${goal.fromDeliveries.toLocaleString('en-US')} to ${goal.toDeliveries.toLocaleString('en-US')} deliveries`,
      met: rssGrowth < goal.maxGrowth,
    },
  };
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
const percent = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(1)} %` : 'n/a');

/** The README block: how the stage ran, the samples, and the goal's verdict. */
export function renderMemoryReport(m: MemorySection): string {
  const lines = [
    `Measured ${m.date.slice(0, 10)}${m.commit ? `, commit ${m.commit}` : ''}, Node ${m.node}: one worker process, ` +
      `${int(m.deliveries)} deliveries (${int(m.documents)} documents, every ${m.redeliveryEvery}th delivery a ` +
      `redelivery), ${m.concurrency} in flight, in ${int(m.seconds)} s (${int(m.deliveries / m.seconds)} a second). ` +
      'RSS and heap are read after a full garbage collection.' +
      (m.environment && Object.keys(m.environment).length > 0
        ? ` The process ran with the environment the worker image sets (worker/Dockerfile): ${Object.entries(
            m.environment,
          )
            .map(([k, v]) => `\`${k}=${v}\``)
            .join(', ')}.`
        : ''),
    '',
    '| Deliveries | RSS | Heap used | Memo: analyses in flight · write turns |',
    '|---|---|---|---|',
    ...m.samples.map(
      (s) =>
        `| ${int(s.deliveries)} | ${mib(s.rssBytes)} | ${mib(s.heapUsedBytes)} | ${int(s.memo.inFlight)} · ${int(s.memo.writing)} |`,
    ),
    '',
    `RSS growth: **${percent(m.rssGrowth)}** (heap ${percent(m.heapGrowth)}); goal ${m.goal.goal}: ${m.goal.met ? 'met' : '**missed**'}.`,
    '',
    `Outcomes: ${Object.entries(m.outcomes)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k} ${int(v)}`)
      .join(', ')}.`,
  ];
  return `${lines.join('\n')}\n`;
}

const MEMORY_FIGURES = figuresBlock('memory-figures', 'npm run bench -- --stage memory');

/** bench/README.md with its memory block replaced by the one generated from `memory`. */
export const replaceMemoryFigures = (readme: string, memory: MemorySection): string =>
  MEMORY_FIGURES.replace(readme, renderMemoryReport(memory));
