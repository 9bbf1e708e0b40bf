/**
 * `npm run bench [-- --quick] [-- --floor R]`: what exactly-once costs, measured in one run and given as ratios.
 * Progress goes to stderr, the markdown table to stdout, every figure to bench/results.json; a full
 * run also regenerates the "Latest results" block of bench/README.md from what it wrote there.
 * Bounded: every loop has a count and a time cap, so the whole run stays under 5 minutes.
 *
 * 1. In process: parsePush + handle() with SQLite, the local bucket and the offline analyzer.
 * 2. Over HTTP, same load generator: (a) bare Express 204, (b) naive consumer, (c) docline worker.
 * 3. End to end through the Pub/Sub emulator, against the emulator's own push rate to a no-op.
 *    Then "inbox": files dropped into a running `npm start`, against stage 3's publish path.
 * 4. Analyses per unique document under 50% redeliveries.
 * 5. The worker's peak RSS under the HTTP load.
 * 6. The BigQuery/Gemini cost model (computed, not run).
 * 7. OCR: CPU per page of the offline analyzer's OCR (bench/ocr-stage.ts); also alone, `--stage ocr`.
 *
 * Alone only, `--stage memory`: one worker process handles a million deliveries, its RSS sampled
 * every 50,000 (bench/memory/); it takes longer than the whole run above.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalBucket } from '../local/lib/local-bucket';
import { runBurst } from './burst/run-burst';
import { costModel } from './cost-model';
import { storeInvoices } from './documents';
import { type EmulatorStageResult, runEmulatorStage } from './emulator-stage';
import { runGrowth } from './growth/run-growth';
import { httpStageDocuments, runHttpStage } from './http-stage';
import { runInProcess } from './in-process';
import { type InboxStageResult, runInboxStage } from './inbox-stage';
import { runMemory } from './memory/run-memory';
import { runOcrStage } from './ocr-stage';
import {
  type BenchResults,
  floorFailures,
  goals,
  inboxGoals,
  renderReport,
  replaceBenchFigures,
  replaceInboxFigures,
} from './report';
import { mergeResults, readResults, resultsFile, rewrite } from './results-file';
import { runSweep } from './sweep/run-sweep';

const quick = process.argv.includes('--quick');
const floorIndex = process.argv.indexOf('--floor');
/** `--floor R`: exit 1 when a docline/naive ratio of this run is under R (CI's regression guard). */
const floor = floorIndex >= 0 ? Number(process.argv[floorIndex + 1]) : undefined;
if (floor !== undefined && !(floor > 0)) throw new Error('--floor needs a ratio above 0, e.g. --floor 0.5');
const stageIndex = process.argv.indexOf('--stage');
/**
 * `--stage burst` / `--stage sweep` / `--stage growth` runs only that stage; `--stage inbox` only stage 3 and the inbox
 * stage (its ratio needs the publish path of the same run); without `--stage` the stages 1–6 and
 * inbox run.
 */
const stage = stageIndex >= 0 ? process.argv[stageIndex + 1] : undefined;
const jobsIndex = process.argv.indexOf('--jobs');
/**
 * `--jobs N` (the sweep): cells run at once, each in its own process. Default: the cores this
 * machine has (a cell's figures depend only on its spec, so they are the same with any N); 1 runs
 * the cells one after another in this process.
 */
const jobs = jobsIndex >= 0 ? Number(process.argv[jobsIndex + 1]) : os.availableParallelism();
if (!(Number.isInteger(jobs) && jobs >= 1)) throw new Error('--jobs needs a whole number ≥ 1, e.g. --jobs 2');

const cellsIndex = process.argv.indexOf('--cells');
/**
 * `--cells A,B` (the sweep): only the cells so named, into results.quick.json (the docs are left
 * alone: a few cells are not the sweep). With `--quick`, names from the tuning set.
 */
const cells = cellsIndex >= 0 ? (process.argv[cellsIndex + 1] ?? '').split(',').filter(Boolean) : undefined;
const skipIndex = process.argv.indexOf('--skip-cells');
/**
 * `--skip-cells A,B` (the sweep): the grid without the cells so named, into results.json as the
 * sweep, whose section and generated blocks say which cells were not run (a sweep cut for time says so).
 */
const skipCells = skipIndex >= 0 ? (process.argv[skipIndex + 1] ?? '').split(',').filter(Boolean) : undefined;
if (skipCells !== undefined && skipCells.length === 0)
  throw new Error('--skip-cells needs cell names separated by commas');
if (cells !== undefined && cells.length === 0)
  throw new Error(
    '--cells needs cell names separated by commas, e.g. --cells tiers-60rpm-fast-everyAck-1000',
  );

const RESULTS_FILE = resultsFile(quick);

/** Counts and bounds of the run; `--quick` is for trying the harness, not for figures. */
const SETTINGS = {
  inProcessDocuments: quick ? 300 : 2000,
  inProcessRedeliveryDocuments: quick ? 200 : 1000,
  overlapDocuments: quick ? 64 : 512,
  overlapBatch: 32,
  inProcessMaxMs: 8_000,
  concurrency: 32,
  warmupRequests: quick ? 100 : 300,
  requestsPerTrial: quick ? 300 : 2500,
  rounds: quick ? 3 : 5,
  maxTrialMs: 10_000,
  e2eMessagesPerRound: quick ? 100 : 1000,
  e2eRounds: quick ? 2 : 4,
  e2eWarmupMessages: quick ? 100 : 1500,
  publishBatch: 100,
  e2eMaxMeasureMs: 25_000,
  inboxDocuments: quick ? 300 : 2000,
  inboxWarmupDocuments: quick ? 100 : 2000,
  inboxMaxDropMs: 30_000,
};

/** The code being measured, so that a figure can be told from one about other code. */
function measuredCommit(): string | undefined {
  try {
    return execFileSync('git', ['describe', '--always', '--dirty'], {
      cwd: __dirname,
      encoding: 'utf8',
    }).trim();
  } catch {
    return undefined;
  }
}

const startedAt = performance.now();
const progress = (text: string) =>
  process.stderr.write(`[${((performance.now() - startedAt) / 1000).toFixed(1).padStart(5)} s] ${text}\n`);

async function main(): Promise<void> {
  const loadAverageStart = os.loadavg();
  const tmpRoot = mkdtempSync(path.join(os.tmpdir(), 'docline-bench-'));
  try {
    const bucketRoot = path.join(tmpRoot, 'bucket');
    mkdirSync(bucketRoot, { recursive: true });
    const poolSize = Math.max(SETTINGS.inProcessDocuments, httpStageDocuments(SETTINGS).total);
    progress(`storing ${poolSize} text invoices in a local bucket`);
    const resources = await storeInvoices(new LocalBucket(bucketRoot), poolSize);

    const inProcessRun = (name: string, documents: number, redeliveryShare: number, batchSize: number) => {
      progress(`stage 1/4: in process, ${name}`);
      return runInProcess({
        bucketRoot,
        databasePath: path.join(tmpRoot, `in-process-${name.replace(/\W+/g, '-')}.sqlite`),
        resources,
        first: 0,
        documents,
        redeliveryShare,
        batchSize,
        maxDurationMs: SETTINGS.inProcessMaxMs,
      });
    };
    // The first deliveries pay for JIT compilation and cold caches: a throwaway run first.
    await inProcessRun('warm-up', SETTINGS.warmupRequests, 0, 1);
    const inProcess = {
      sequential: await inProcessRun('0% redeliveries', SETTINGS.inProcessDocuments, 0, 1),
      sequentialRedeliveries: await inProcessRun(
        '50% redeliveries',
        SETTINGS.inProcessRedeliveryDocuments,
        0.5,
        1,
      ),
      concurrentRedeliveries: await inProcessRun(
        '50% redeliveries at once',
        SETTINGS.overlapDocuments,
        0.5,
        SETTINGS.overlapBatch,
      ),
    };
    progress(
      `stage 1: ${inProcess.sequential.perSecond.toFixed(0)} messages/s (0%), ` +
        `${inProcess.sequentialRedeliveries.perSecond.toFixed(0)} messages/s (50%), ` +
        `${inProcess.sequentialRedeliveries.analysesPerDocument.toFixed(2)} analyses per document sequentially, ` +
        `${inProcess.concurrentRedeliveries.analysesPerDocument.toFixed(2)} at once`,
    );

    const http = await runHttpStage({
      tmpRoot,
      bucketRoot,
      resources,
      concurrency: SETTINGS.concurrency,
      warmupRequests: SETTINGS.warmupRequests,
      requestsPerTrial: SETTINGS.requestsPerTrial,
      rounds: SETTINGS.rounds,
      maxTrialMs: SETTINGS.maxTrialMs,
      progress,
    });

    const emulator = await endToEndStage(tmpRoot);
    const inbox = await inboxStage(tmpRoot, emulator);
    const cpus = os.cpus();
    const results: BenchResults = {
      machine: {
        date: new Date().toISOString(),
        commit: measuredCommit(),
        node: process.version,
        platform: `${os.platform()} ${os.release()} ${os.arch()}`,
        cpus: cpus.length,
        cpuModel: cpus[0]?.model.trim() ?? 'unknown',
        totalMemoryBytes: os.totalmem(),
        loadAverageStart,
        loadAverageEnd: os.loadavg(),
      },
      settings: { ...SETTINGS, quick: quick ? 'yes' : 'no' },
      durationMs: performance.now() - startedAt,
      inProcess,
      http,
      emulator,
      inbox,
      costModel: costModel(),
      goals: goals(http, emulator, inbox),
    };
    // Sections written by other commands (the burst stage, the fault soak, the e-invoice eval)
    // keep their last figures: this run replaces only its own.
    const file = mergeResults(RESULTS_FILE, { ...results });
    // The docs' figures are generated from the file just written, never pasted by hand.
    if (!quick) writeFigures(results);
    progress(
      `done in ${(results.durationMs / 1000).toFixed(0)} s; every figure is in ${path.relative(process.cwd(), file)}`,
    );
    process.stdout.write(renderReport(results));
    progress('stage 7: OCR CPU per page');
    process.stdout.write(`${await runOcrStage({ file, quick })}\n`);
    if (floor !== undefined) {
      const failures = floorFailures(results, floor);
      for (const line of failures) progress(`floor: ${line}`);
      if (failures.length > 0) process.exitCode = 1;
      else progress(`floor: every docline/naive ratio is at least ${floor}`);
    }
  } finally {
    rmSync(tmpRoot, { recursive: true, force: true });
  }
}

/** Regenerates the figures of bench/README.md and docs/operations.md from `results`. */
function writeFigures(results: BenchResults): void {
  rewrite(path.join(__dirname, 'README.md'), (text) => replaceBenchFigures(text, results));
  rewrite(path.join(__dirname, '../docs/operations.md'), (text) => replaceInboxFigures(text, results));
}

/** Stage 3; an error (no emulator on this machine) is kept as the stage's result. */
async function endToEndStage(tmpRoot: string): Promise<EmulatorStageResult | { error: string }> {
  try {
    return await runEmulatorStage({
      tmpRoot,
      messagesPerRound: SETTINGS.e2eMessagesPerRound,
      rounds: SETTINGS.e2eRounds,
      warmupMessages: SETTINGS.e2eWarmupMessages,
      publishBatch: SETTINGS.publishBatch,
      maxMeasureMs: SETTINGS.e2eMaxMeasureMs,
      progress,
    });
  } catch (error) {
    // No emulator on this machine must not cost the other figures: say so in the table.
    const failed = { error: error instanceof Error ? error.message : String(error) };
    progress(`stage 3 failed: ${failed.error}`);
    return failed;
  }
}

/** The inbox stage, set against stage 3's publish path; an error is kept as its result. */
async function inboxStage(
  tmpRoot: string,
  emulator: EmulatorStageResult | { error: string },
): Promise<InboxStageResult | { error: string }> {
  if (!('ratio' in emulator)) return { error: `stage 3 did not run: ${emulator.error}` };
  try {
    return await runInboxStage({
      tmpRoot,
      documents: SETTINGS.inboxDocuments,
      warmupDocuments: SETTINGS.inboxWarmupDocuments,
      publishPathPerSecond: emulator.median.docline.perSecond,
      maxDropMs: SETTINGS.inboxMaxDropMs,
      progress,
    });
  } catch (error) {
    const failed = { error: error instanceof Error ? error.message : String(error) };
    progress(`stage inbox failed: ${failed.error}`);
    return failed;
  }
}

/**
 * `npm run bench -- --stage inbox`: stage 3 (for this run's publish path) and the inbox stage. Merges
 * the `inbox` section and its goals into results.json (the other sections stay, as the burst stage
 * does), regenerates the README's figures block from that file and prints it.
 */
async function inboxOnly(): Promise<void> {
  const tmpRoot = mkdtempSync(path.join(os.tmpdir(), 'docline-bench-'));
  try {
    const emulator = await endToEndStage(tmpRoot);
    const inbox = await inboxStage(tmpRoot, emulator);
    const file = RESULTS_FILE;
    const previous = readResults(file) as Partial<BenchResults>;
    if (!previous.http) {
      // No whole run to merge into (a first --quick try): the inbox section alone.
      writeFileSync(file, `${JSON.stringify({ inbox, goals: inboxGoals(inbox) }, null, 2)}\n`);
      process.stdout.write(`${JSON.stringify(inbox, null, 2)}\n`);
      return;
    }
    const results = {
      ...previous,
      inbox,
      goals: { ...previous.goals, ...inboxGoals(inbox) },
    } as BenchResults;
    writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
    if (!quick) writeFigures(results);
    progress(`inbox stage done; figures in ${path.relative(process.cwd(), file)}`);
    process.stdout.write(renderReport(results));
  } finally {
    rmSync(tmpRoot, { recursive: true, force: true });
  }
}

/** The stages that run alone, by their `--stage` name. */
const STAGES: Record<string, () => Promise<void>> = {
  burst: () => runBurst({ quick, progress }),
  inbox: inboxOnly,
  sweep: () =>
    runSweep({
      quick,
      progress,
      jobs,
      ...(cells ? { cells } : {}),
      ...(skipCells ? { skip: skipCells } : {}),
    }),
  ocr: async () => {
    process.stdout.write(`${await runOcrStage({ file: RESULTS_FILE, quick })}\n`);
  },
  growth: () => runGrowth({ progress }),
  memory: () => runMemory({ quick, progress }),
};

const run =
  stage === undefined
    ? main
    : Object.hasOwn(STAGES, stage)
      ? STAGES[stage]!
      : async () => {
          throw new Error(
            `unknown stage "${stage}": the stages that run alone are ${Object.keys(STAGES).join(', ')}`,
          );
        };

run().catch((error: unknown) => {
  progress(`benchmark failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
});
