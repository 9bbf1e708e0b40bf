/**
 * `npm run bench [-- --quick]`: what exactly-once costs, measured in one run and given as ratios.
 * Progress goes to stderr, the markdown table to stdout, every figure to bench/results.json; a full
 * run also regenerates the "Latest results" block of bench/README.md from what it wrote there.
 * Bounded: every loop has a count and a time cap, so the whole run stays under 5 minutes.
 *
 * 1. In process: parsePush + handle() with SQLite, the local bucket and the offline analyzer.
 * 2. Over HTTP, same load generator: (a) bare Express 204, (b) naive consumer, (c) docline worker.
 * 3. End to end through the Pub/Sub emulator, against the emulator's own push rate to a no-op.
 * 4. Analyses per unique document under 50% redeliveries.
 * 5. The worker's peak RSS under the HTTP load.
 * 6. The BigQuery/Gemini cost model (computed, not run).
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalBucket } from '../local/lib/local-bucket';
import { runBurst } from './burst/run-burst';
import { costModel } from './cost-model';
import { storeInvoices } from './documents';
import { type EmulatorStageResult, runEmulatorStage } from './emulator-stage';
import { httpStageDocuments, runHttpStage } from './http-stage';
import { runInProcess } from './in-process';
import { type BenchResults, goals, renderReport, replaceBenchFigures } from './report';
import { runSweep } from './sweep/run-sweep';

const quick = process.argv.includes('--quick');
const stageIndex = process.argv.indexOf('--stage');
/** `--stage burst` / `--stage sweep` runs only that stage; without `--stage` the stages 1–6 run. */
const stage = stageIndex >= 0 ? process.argv[stageIndex + 1] : undefined;
const STAGES = ['burst', 'sweep'];

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
};

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

    let emulator: EmulatorStageResult | { error: string };
    try {
      emulator = await runEmulatorStage({
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
      emulator = { error: error instanceof Error ? error.message : String(error) };
      progress(`stage 3 failed: ${emulator.error}`);
    }

    const cpus = os.cpus();
    const results: BenchResults = {
      machine: {
        date: new Date().toISOString(),
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
      costModel: costModel(),
      goals: goals(http, emulator),
    };
    // A quick run only tries the harness: its figures must not replace the last real ones.
    const file = path.join(__dirname, quick ? 'results.quick.json' : 'results.json');
    // The burst section is written by its own stage: keep the last one.
    const previous = existsSync(file)
      ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>)
      : {};
    const merged = previous.burst === undefined ? results : { ...results, burst: previous.burst };
    writeFileSync(file, `${JSON.stringify(merged, null, 2)}\n`);
    if (!quick) {
      // The README's figures are generated from the file just written, never pasted by hand.
      const readme = path.join(__dirname, 'README.md');
      writeFileSync(readme, replaceBenchFigures(readFileSync(readme, 'utf8'), results));
    }
    progress(
      `done in ${(results.durationMs / 1000).toFixed(0)} s; every figure is in ${path.relative(process.cwd(), file)}`,
    );
    process.stdout.write(renderReport(results));
  } finally {
    rmSync(tmpRoot, { recursive: true, force: true });
  }
}

const run =
  stage === undefined
    ? main
    : stage === 'sweep'
      ? () => runSweep({ quick, progress })
      : STAGES.includes(stage)
        ? () => runBurst({ quick, progress })
        : async () => {
            throw new Error(`unknown stage "${stage}": the stages that run alone are ${STAGES.join(', ')}`);
          };

run().catch((error: unknown) => {
  progress(`benchmark failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
});
