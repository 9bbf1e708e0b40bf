import { replaceBlock } from '../sim/doc-blocks';
import type { BurstFigures } from './burst/stage';
import type { CostModel } from './cost-model';
import type { EmulatorStageResult } from './emulator-stage';
import type { HttpStageResult } from './http-stage';
import type { InProcessRun } from './in-process';
import type { InboxStageResult } from './inbox-stage';
import { figuresBlock } from './results-file';

/**
 * Renders the benchmark's results as the markdown tables the README shows. Measured figures come
 * from the run; the goals are the project's targets.
 */

export interface BenchResults {
  machine: {
    date: string;
    /** The commit measured (`git describe --always --dirty`): a figure is about this code only. */
    commit?: string;
    node: string;
    platform: string;
    cpus: number;
    cpuModel: string;
    totalMemoryBytes: number;
    loadAverageStart: number[];
    loadAverageEnd: number[];
  };
  settings: Record<string, number | string>;
  durationMs: number;
  inProcess: {
    sequential: InProcessRun;
    sequentialRedeliveries: InProcessRun;
    concurrentRedeliveries: InProcessRun;
  };
  http: HttpStageResult;
  emulator: EmulatorStageResult | { error: string };
  /** The inbox stage; absent in results written before it existed. */
  inbox?: InboxStageResult | { error: string };
  costModel: CostModel;
  goals: Record<string, { value: number; goal: string; met: boolean }>;
}

export const GOALS = {
  doclineOverNaive: 0.95,
  doclineOverNaiveByCpu: 0.95,
  doclineOverBare: 0.5,
  endToEndOverNaive: 0.95,
  endToEndRatio: 0.8,
  peakRssBytes: 256 * 1024 * 1024,
  /** Files dropped into `npm start`'s inbox against the publish path (stage 3), documents/s. */
  inboxOverPublishPath: 0.5,
  /** One invoice copied N times (one duplicate group) against N distinct invoices, documents/s. */
  inboxCopiesOverDistinct: 0.9,
} as const;

/** The three docline/naive ratios: over HTTP, in CPU per message, and end to end. */
export function doclineOverNaiveRatios(
  results: Pick<BenchResults, 'http' | 'emulator'>,
): Record<'http' | 'cpu' | 'endToEnd', number> {
  return {
    http: results.http.doclineOverNaive,
    cpu: results.http.doclineOverNaiveByCpu,
    endToEnd: 'ratio' in results.emulator ? results.emulator.doclineOverNaive : Number.NaN,
  };
}

/**
 * The docline/naive ratios under `floor`, each as a line that says which and by how much; empty
 * when all hold. A ratio that could not be measured (no emulator) is under every floor.
 */
export function floorFailures(results: Pick<BenchResults, 'http' | 'emulator'>, floor: number): string[] {
  return Object.entries(doclineOverNaiveRatios(results))
    .filter(([, value]) => !(value >= floor))
    .map(([name, value]) => `docline/naive (${name}) is ${two(value)}, under the floor of ${floor}`);
}

const int = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a');
const ms = (n: number) => (Number.isFinite(n) ? `${n < 10 ? n.toFixed(2) : n.toFixed(1)} ms` : 'n/a');
const two = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : 'n/a');
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MiB`;
const usd = (n: number) => (n < 0.01 ? `$${n.toFixed(5)}` : `$${n.toFixed(3)}`);
const bytes = (n: number) =>
  n >= 1024 ** 4
    ? `${(n / 1024 ** 4).toFixed(2)} TiB`
    : n >= 1024 ** 3
      ? `${(n / 1024 ** 3).toFixed(1)} GiB`
      : n >= 1024 ** 2
        ? `${(n / 1024 ** 2).toFixed(1)} MiB`
        : `${(n / 1024).toFixed(1)} KiB`;
const verdict = (met: boolean) => (met ? 'met' : '**missed**');
/** A goal of at least `goal`, met by `value` when the run was `complete`. */
const atLeast = (value: number, goal: number, complete = true) => ({
  value,
  goal: `>= ${goal}`,
  met: complete && value >= goal,
});

/** Whether each goal is met, from the measured figures. */
export function goals(
  http: HttpStageResult,
  emulator: EmulatorStageResult | { error: string },
  inbox?: InboxStageResult | { error: string },
): BenchResults['goals'] {
  const peak = http.memory.docline?.peakRssBytes ?? Number.NaN;
  const result: BenchResults['goals'] = {
    doclineOverNaive: atLeast(http.doclineOverNaive, GOALS.doclineOverNaive),
    doclineOverNaiveByCpu: atLeast(http.doclineOverNaiveByCpu, GOALS.doclineOverNaiveByCpu),
    doclineOverBare: atLeast(http.doclineOverBare, GOALS.doclineOverBare),
    peakRssBytes: { value: peak, goal: `< ${mib(GOALS.peakRssBytes)}`, met: peak < GOALS.peakRssBytes },
  };
  if ('ratio' in emulator) {
    result.endToEndOverNaive = atLeast(emulator.doclineOverNaive, GOALS.endToEndOverNaive);
    result.endToEndRatio = atLeast(emulator.ratio, GOALS.endToEndRatio);
  }
  return { ...result, ...inboxGoals(inbox) };
}

/** The inbox stage's goals (none when it did not run). */
export function inboxGoals(inbox: InboxStageResult | { error: string } | undefined): BenchResults['goals'] {
  if (!inbox || !('overPublishPath' in inbox)) return {};
  return {
    inboxOverPublishPath: atLeast(inbox.overPublishPath, GOALS.inboxOverPublishPath, inbox.complete),
    inboxCopiesOverDistinct: atLeast(
      inbox.copies.overDistinct,
      GOALS.inboxCopiesOverDistinct,
      inbox.copies.complete,
    ),
  };
}

/** The inbox stage's rows of the results table. */
function inboxRows(results: BenchResults): string[] {
  const inbox = results.inbox;
  if (inbox === undefined)
    return [
      '| 3i | Inbox: files dropped into a running `npm start` | not run yet | >= 0.5 × the publish path |',
    ];
  if (!('overPublishPath' in inbox))
    return [
      `| 3i | Inbox: files dropped into a running \`npm start\` | not run: ${inbox.error.split('\n')[0]} | — |`,
    ];
  const g = results.goals;
  const drop = (d: { documents: number; dropSeconds: number[]; perSecond: number; complete: boolean }) =>
    `${int(d.perSecond)}/s (${d.dropSeconds.length} drops of ${int(d.documents)} files: ${d.dropSeconds.map((x) => `${x.toFixed(1)} s`).join(', ')}${d.complete ? '' : '; **stopped at the bound**'})`;
  return [
    `| 3i | Inbox: ${int(inbox.documents)} distinct invoices a drop written into the inbox of a running \`npm start\` (${inbox.concurrency} files at once), until every row exists | ${drop(inbox)} | — |`,
    `| 3i | Inbox / end-to-end publish path (docline, ${int(inbox.publishPathPerSecond)}/s in this run) | **${two(inbox.overPublishPath)}** | >= ${GOALS.inboxOverPublishPath}: ${verdict(g.inboxOverPublishPath?.met ?? false)} |`,
    `| 3i | Inbox: one invoice copied ${int(inbox.copies.documents)} times a drop (one duplicate group, ${int(inbox.copies.warnings)} warnings printed) | ${drop(inbox.copies)} | — |`,
    `| 3i | Inbox, copies / distinct | **${two(inbox.copies.overDistinct)}** | >= ${GOALS.inboxCopiesOverDistinct}: ${verdict(g.inboxCopiesOverDistinct?.met ?? false)} |`,
  ];
}

export function renderReport(results: BenchResults): string {
  const { http, inProcess: ip, emulator, costModel: cost, machine } = results;
  const g = results.goals;
  const run = (r: { perSecond: number; p50Ms: number; p99Ms: number; cpuMsPerRequest?: number }) =>
    `${int(r.perSecond)}/s · p50 ${ms(r.p50Ms)} · p99 ${ms(r.p99Ms)}` +
    (r.cpuMsPerRequest === undefined ? '' : ` · ${r.cpuMsPerRequest.toFixed(2)} CPU ms each`);
  const lines: string[] = [];
  lines.push(
    `### Measured (${machine.date.slice(0, 10)}${machine.commit ? `, commit ${machine.commit}` : ''}, Node ${machine.node}, ${machine.cpus} × ${machine.cpuModel}, load average ${machine.loadAverageStart.map((l) => l.toFixed(1)).join(' ')} at start)`,
    '',
    '| # | What | Result | Goal |',
    '|---|---|---|---|',
    `| 1 | In process: parsePush + handle(), SQLite, local bucket, offline analyzer, 0% redeliveries | ${run(ip.sequential)} | — |`,
    `| 1 | In process, 50% redeliveries | ${run(ip.sequentialRedeliveries)} | — |`,
    `| 2a | HTTP, bare Express answering 204 (the ceiling) | ${run(http.median.bare)} | — |`,
    `| 2b | HTTP, naive consumer (same parse + read + analysis, plain INSERT, no dedup) | ${run(http.median.naive)} | — |`,
    `| 2c | HTTP, docline worker | ${run(http.median.docline)} | — |`,
    `| 2c | HTTP, docline worker, 50% redeliveries | ${run(http.redelivery.docline)} | — |`,
    `| 2 | (c)/(b): what exactly-once costs against no dedup | **${two(http.doclineOverNaive)}** | >= ${GOALS.doclineOverNaive}: ${verdict(g.doclineOverNaive!.met)} |`,
    `| 2 | (c)/(a): the worker against the bare HTTP ceiling | **${two(http.doclineOverBare)}** | >= ${GOALS.doclineOverBare}: ${verdict(g.doclineOverBare!.met)} |`,
    `| 2 | (c)/(b) in CPU time per message (steadier on a shared machine) | **${two(http.doclineOverNaiveByCpu)}** | >= ${GOALS.doclineOverNaiveByCpu}: ${verdict(g.doclineOverNaiveByCpu?.met ?? false)} |`,
    `| 2 | (b)/(a), for reading (c)/(a): the same work without dedup against the ceiling | ${two(http.naiveOverBare)} | — |`,
  );
  if ('ratio' in emulator) {
    const busy = (share: number) => `${(share * 100).toFixed(0)}% of all cores busy`;
    const e2e = (target: 'noop' | 'naive' | 'docline', what: string) => {
      const m = emulator.median[target];
      const cpu = target === 'noop' ? '' : `, ${m.endpointCpuMsPerMessage.toFixed(2)} CPU ms each`;
      return `| 3 | ${what} | ${int(m.perSecond)}/s (${busy(m.machineBusyShare)}${cpu}) | — |`;
    };
    lines.push(
      e2e('noop', 'Emulator push rate to a no-op endpoint (bare Express 204)'),
      e2e('naive', 'End to end, naive consumer: publish → push → row'),
      e2e('docline', 'End to end, docline worker (the local pipeline): publish → push → row'),
      `| 3 | End to end, docline / naive | **${two(emulator.doclineOverNaive)}** | >= ${GOALS.endToEndOverNaive}: ${verdict(g.endToEndOverNaive?.met ?? false)} |`,
      `| 3 | End to end / emulator no-op | **${two(emulator.ratio)}** | >= ${GOALS.endToEndRatio}: ${verdict(g.endToEndRatio!.met)} |`,
    );
  } else {
    lines.push(
      `| 3 | End to end through the emulator | not run: ${emulator.error.split('\n')[0]} | >= ${GOALS.endToEndRatio} |`,
    );
  }
  lines.push(...inboxRows(results));
  const red = http.redelivery;
  lines.push(
    `| 4 | Analyses per unique document, 50% redeliveries, sequential (in process) | **${two(ip.sequentialRedeliveries.analysesPerDocument)}** | 1.00 |`,
    `| 4 | … both deliveries at once (in process, batches of ${results.settings.overlapBatch}) | ${two(ip.concurrentRedeliveries.analysesPerDocument)} (${ip.concurrentRedeliveries.overlaps} overlaps, ${ip.concurrentRedeliveries.rows} rows for ${ip.concurrentRedeliveries.documents} documents) | report |`,
    `| 4 | … over HTTP, ${http.concurrency} in flight, redelivery ${2 * http.concurrency} requests later | docline ${two(red.docline.analysesPerDocument)} (${red.docline.overlaps} overlaps, ${red.docline.rowsAdded} rows for ${red.docline.documents} documents); naive ${two(red.naive.analysesPerDocument)} (${red.naive.rowsAdded} rows) | report |`,
    `| 4 | … over HTTP, redelivery right behind the first delivery (both in flight) | docline ${two(http.overlapping.analysesPerDocument)} (${http.overlapping.overlaps} overlaps, ${http.overlapping.rowsAdded} rows for ${http.overlapping.documents} documents) | report |`,
    `| 5 | Worker peak RSS under the HTTP load (VmHWM) | **${mib(http.memory.docline?.peakRssBytes ?? Number.NaN)}** (naive ${mib(http.memory.naive?.peakRssBytes ?? Number.NaN)}, bare ${mib(http.memory.bare?.peakRssBytes ?? Number.NaN)}) | < ${mib(GOALS.peakRssBytes)}: ${verdict(g.peakRssBytes!.met)} |`,
    '',
    `Rows after stage 2: docline ${int(http.rows.docline)} for ${int(http.rows.uniqueDocuments)} unique documents; naive ${int(http.rows.naive)} for ${int(http.rows.deliveries)} deliveries. ` +
      `Stage 2 ran ${http.trials.docline.length} rounds of ${int(http.trials.docline[0]?.count ?? Number.NaN)} requests per server, ${http.concurrency} in flight; ratios are medians of per-round ratios.` +
      ('ratio' in emulator
        ? ` Stage 3 ran ${emulator.runs.docline.length} rounds of ${int(emulator.runs.docline[0]?.messages ?? Number.NaN)} messages per endpoint after a warm-up; ` +
          `the emulator opened ${two(emulator.noopConnectionsPerPush)} TCP connections per push; ${int(emulator.okRows)} of ${int(emulator.documents)} documents became ok rows.`
        : ''),
    '',
    `### Cost model per ${int(cost.params.documents)} documents (computed, not measured)`,
    '',
    '| Write path | Bytes billed | $ | Pre-run estimate per statement | Refused by the default cap? |',
    '|---|---|---|---|---|',
  );
  for (const s of cost.merge) {
    const billed =
      s.billedBytesLow === s.billedBytesHigh
        ? bytes(s.billedBytesHigh)
        : `${bytes(s.billedBytesLow)} – ${bytes(s.billedBytesHigh)}`;
    const dollars = s.usdLow === s.usdHigh ? usd(s.usdHigh) : `${usd(s.usdLow)} – ${usd(s.usdHigh)}`;
    lines.push(
      `| MERGE, ${s.name} | ${billed} | ${dollars} | ${bytes(s.estimateBytesPerQuery)} | ${s.refusedByCap ? '**yes**' : 'no'} |`,
    );
  }
  lines.push(
    `| the plain sample (no dedup): Storage Write only | ${bytes(cost.noDedup.ingestedBytes)} ingested | ${usd(cost.noDedup.usd)} | — | — |`,
    `| each redelivery caught by seen() | ${bytes(cost.redelivery.billedBytes)} | ${usd(cost.redelivery.usd)} | — | — |`,
    `| Gemini ${cost.gemini.model ?? '2.5 Flash'} | ${int(cost.gemini.promptTokens)} in + ${int(cost.gemini.outputTokens)} out tokens | ${usd(cost.gemini.usd)} | — | — |`,
    '',
    `MERGE throughput per table: ${two(cost.dml.documentsPerSecondLow)}–${two(cost.dml.documentsPerSecondHigh)} new documents/s sustained ` +
      `(${int(cost.dml.documentsPerDayLow)}+ a day, ${int(cost.dml.headroomLow)}× the ${cost.params.documentsPerDay} a day assumed); ` +
      `arriving at twice that rate, the 20-statement queue is full after ~${int(cost.dml.queueFullSecondsAtDoubleRate)} s and BigQuery answers ` +
      '"Too many DML statements outstanding" (503, Pub/Sub retries later).',
    '',
    'Assumptions:',
    ...cost.assumptions.map((a) => `- ${a}`),
  );
  return `${lines.join('\n')}\n`;
}

/** The part of the `burst` section of results.json that the README table shows. */
export interface BurstReportInput {
  cell: string;
  documents: number;
  analyzerBoundSeconds: number;
  perDelivery: BurstFigures;
  groupCommit?: BurstFigures;
  details?: Record<string, { drained: boolean }>;
}

/** The burst goals for groupCommit; undefined where the figure is only reported. */
export function burstGoals(
  b: BurstReportInput,
): Record<keyof BurstFigures, { goal: string; met: (g: BurstFigures) => boolean } | undefined> {
  const tenth = b.perDelivery.bytesBilledPerDocument / 10;
  return {
    simulatedSeconds: {
      goal: `≤ 1.25 × ${b.analyzerBoundSeconds} s = ${int(1.25 * b.analyzerBoundSeconds)} s`,
      met: (g) => g.simulatedSeconds <= 1.25 * b.analyzerBoundSeconds,
    },
    analysesPerDocument: { goal: '≤ 1.01', met: (g) => g.analysesPerDocument <= 1.01 },
    mergeStatements: undefined,
    lookupStatements: undefined,
    bytesBilledPerDocument: {
      goal: `≤ a tenth of perDelivery's (${bytes(tenth)})`,
      met: (g) => g.bytesBilledPerDocument <= tenth,
    },
    nacks: undefined,
    deadLetters: { goal: '0', met: (g) => g.deadLetters === 0 },
    tableRows: undefined,
    viewRows: { goal: int(b.documents), met: (g) => g.viewRows === b.documents },
    lost: { goal: '0', met: (g) => g.lost === 0 },
  };
}

const BURST_ROWS: Array<[keyof BurstFigures, string, (n: number) => string]> = [
  ['simulatedSeconds', 'Simulated seconds until every message is acked or dead-lettered', int],
  ['analysesPerDocument', 'Paid analyses per document', (n) => n.toFixed(3)],
  ['mergeStatements', 'MERGE statements run', int],
  ['lookupStatements', 'Lookups run', int],
  ['bytesBilledPerDocument', 'Bytes billed per document', (n) => bytes(n)],
  ['nacks', 'Pushes nacked (503, 429, no answer in time)', int],
  ['deadLetters', 'Dead letters', int],
  ['tableRows', 'Rows in the table', int],
  ['viewRows', 'Rows in the `documents` view', int],
  ['lost', 'Documents without a row', int],
];

/** The burst figures as the markdown block of bench/README.md, generated from results.json. */
export function renderBurstReport(b: BurstReportInput): string {
  const goals = burstGoals(b);
  const g = b.groupCommit;
  const undrained = (name: 'perDelivery' | 'groupCommit') =>
    b.details?.[name]?.drained === false ? ' (not drained at the 7-day bound)' : '';
  const lines = [
    `${int(b.documents)} documents uploaded within 60 simulated seconds, 5 % announced twice (the sweep's cell ` +
      `\`${b.cell}\`, in virtual time); the analyzer's quota alone needs ${int(b.analyzerBoundSeconds)} s.`,
    '',
    `| Figure | perDelivery${undrained('perDelivery')} | groupCommit${g ? undrained('groupCommit') : ''} | Goal for groupCommit |`,
    '|---|---|---|---|',
  ];
  for (const [key, label, format] of BURST_ROWS) {
    const goal = goals[key];
    const verdictText = goal && g ? `${goal.goal}: ${verdict(goal.met(g))}` : (goal?.goal ?? 'report');
    lines.push(
      `| ${label} (\`${key}\`) | ${format(b.perDelivery[key])} | ${g ? format(g[key]) : 'not run yet'} | ${verdictText} |`,
    );
  }
  if (g) {
    lines.push(
      '',
      `groupCommit / perDelivery: ${two(g.simulatedSeconds / b.perDelivery.simulatedSeconds)} × the simulated time, ` +
        `${two(g.bytesBilledPerDocument / b.perDelivery.bytesBilledPerDocument)} × the bytes billed per document, ` +
        `${two(g.analysesPerDocument / b.perDelivery.analysesPerDocument)} × the paid analyses.`,
      '',
      `groupCommit against the analyzer's bound: ${two(g.simulatedSeconds / b.analyzerBoundSeconds)} × ${int(b.analyzerBoundSeconds)} s.`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/**
 * How fast a drop goes, for docs/operations.md: the inbox stage's figures in a sentence or two,
 * generated from results.json like the README's tables.
 */
export function renderInboxSummary(results: BenchResults): string {
  const inbox = results.inbox;
  if (inbox === undefined || !('overPublishPath' in inbox))
    return 'No inbox figures yet: `npm run bench -- --stage inbox` measures them.\n';
  const { machine } = results;
  const drop = (d: { documents: number; seconds: number; perSecond: number }) =>
    `${int(d.documents)} files became rows in ${d.seconds.toFixed(1)} s on average (${int(d.perSecond)} a second)`;
  return (
    `Measured by the benchmark's inbox stage (${inbox.date.slice(0, 10)}, ${machine.cpus} × ${machine.cpuModel} shared with ` +
    `other work, load average ${inbox.loadAverageStart[0]!.toFixed(1)} at the start), \`npm start\` on its defaults ` +
    `(${inbox.concurrency} files at once), two drops of each kind: ${drop(inbox)} when they were distinct invoices, ` +
    `${two(inbox.overPublishPath)} × the ${int(inbox.publishPathPerSecond)} documents a second of the publish path in the same ` +
    `run (messages published in batches straight to the topic, objects stored beforehand); ${drop(inbox.copies)} when they ` +
    `were one invoice copied ${int(inbox.copies.documents)} times (one duplicate group, a warning per row), ` +
    `${two(inbox.copies.overDistinct)} × the distinct drop. Figures on an idle machine are higher; the ratios move less.\n`
  );
}

export const INBOX_FIGURES = figuresBlock('inbox-figures', 'npm run bench', 'docs/operations.md');
export const BENCH_FIGURES = figuresBlock('bench-figures', 'npm run bench');
export const BURST_FIGURES = figuresBlock('burst-figures', 'npm run bench -- --stage burst');

export { replaceBlock };

/** The README with its "Latest results" block replaced by the tables generated from `results`. */
export const replaceBenchFigures = (readme: string, results: BenchResults): string =>
  BENCH_FIGURES.replace(readme, renderReport(results));

/** docs/operations.md with its "how fast a drop goes" block replaced by the sentence generated from `results`. */
export const replaceInboxFigures = (doc: string, results: BenchResults): string =>
  INBOX_FIGURES.replace(doc, renderInboxSummary(results));

/** The README with its burst block replaced by the table generated from `burst`. */
export const replaceBurstFigures = (readme: string, burst: BurstReportInput): string =>
  BURST_FIGURES.replace(readme, renderBurstReport(burst));
