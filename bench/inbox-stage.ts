import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { DatabaseSync } from 'node:sqlite';
import { stopProcess } from '../local/lib/lifecycle';
import { REPO_ROOT, tsxArgs } from '../local/lib/worker-process';
import { SQLITE_TABLE } from '../worker/src/adapters/stores/sqlite-store';
import { dataDirLayout } from '../worker/src/contract/data-dir';
import { busyShare, cpuTimeMs, machineCpu } from './processes';
import { ratio } from './stats';

/**
 * Stage "inbox": the user's path. `npm start` (local/commands/start.ts, run as a user runs it, on
 * its defaults: its own emulator, worker and inbox watcher) is given a warm-up drop, then drops of N
 * invoice files written into its inbox; the clock runs from the first file written until every row
 * exists. Two variants, two drops each, in the order distinct, copies, copies, distinct: N distinct
 * invoices (one sample, its invoice number made unique per file), and the very same sample copied N
 * times under N names, which puts every new row in one duplicate_invoices group (the "same supplier,
 * same template" case) and makes `npm start` print a duplicate warning for each.
 * Both are set against the end-to-end stage's publish path, measured in the same run.
 */

export interface InboxStageOptions {
  tmpRoot: string;
  /** Files per measured drop (N). */
  documents: number;
  /** Files dropped first, unmeasured: the emulator's JVM and the worker warm up as in stage 3. */
  warmupDocuments: number;
  /** The end-to-end stage's docline documents/s (publish → row), this run's. */
  publishPathPerSecond: number;
  /** Bound of one drop, ms. */
  maxDropMs: number;
  progress: (text: string) => void;
}

/** One measured drop. */
export interface InboxDrop {
  /** Files per drop (N). */
  documents: number;
  /** Seconds from the first file written until every row existed, per drop (the mean of the drops). */
  seconds: number;
  /** Rows per second over the drops. */
  perSecond: number;
  /** Each drop's seconds, in the order they ran. */
  dropSeconds: number[];
  /** Whether every row existed before the bound. */
  complete: boolean;
  /** CPU time per document of the `npm start` process (inbox, uploads, outcome lines), ms. */
  commandCpuMsPerDocument: number;
  /** CPU time per document of its worker process, ms. */
  workerCpuMsPerDocument: number;
  /** Share of all cores busy meanwhile (emulator, worker, `npm start`, any neighbour). */
  machineBusyShare: number;
}

/** The `inbox` section of bench/results.json. */
export interface InboxStageResult extends InboxDrop {
  /** inbox documents/s over the end-to-end stage's publish path (docline, publish → row). */
  overPublishPath: number;
  /** The publish path's documents/s it is set against. */
  publishPathPerSecond: number;
  /** Files `npm start` takes at once (its default). */
  concurrency: number;
  /** When the stage ran, and the machine's load average then (1, 5, 15 minutes): it shares the cores. */
  date: string;
  loadAverageStart: number[];
  copies: InboxDrop & {
    /** copies documents/s over distinct documents/s. */
    overDistinct: number;
    /** Duplicate-invoice warnings `npm start` printed during the drop. */
    warnings: number;
  };
}

/** The sample every drop is made of: one text invoice with a labelled invoice number. */
const SAMPLE = 'samples/invoices/en-02-invoice-hosting.txt';
const SAMPLE_NUMBER = 'CRH-10293';

/** The sample with its invoice number made unique (`CRH-10293-<i>`): a distinct invoice. */
function distinctInvoice(template: string, i: number): Buffer {
  if (!template.includes(SAMPLE_NUMBER)) throw new Error(`${SAMPLE} no longer holds ${SAMPLE_NUMBER}`);
  return Buffer.from(template.replaceAll(SAMPLE_NUMBER, `${SAMPLE_NUMBER}-${i}`));
}

/**
 * The caller's environment without what would make `npm start` run elsewhere than on its defaults:
 * another emulator, a cloud table, Gemini, a concurrency set by hand.
 */
function userEnvironment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, DOCLINE_ANALYZER: 'offline' };
  for (const name of [
    'PUBSUB_EMULATOR_HOST',
    'BIGQUERY_TABLE',
    'GEMINI_API_KEY',
    'DOCLINE_UPLOAD_CONCURRENCY',
    'DOCLINE_DATA_DIR',
    'DOCLINE_INBOX',
  ])
    delete env[name];
  return env;
}

/** `npm start` as a user runs it, with its stdout read line by line (as a terminal would take it). */
function startCommand(dataDir: string, inbox: string) {
  const child: ChildProcess = spawn(
    process.execPath,
    tsxArgs('local/commands/start.ts', ['--data-dir', dataDir, '--inbox', inbox]),
    { cwd: REPO_ROOT, env: userEnvironment(), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const counts = { warnings: 0, lines: 0 };
  let ready: () => void = () => {};
  const isReady = new Promise<void>((resolve) => {
    ready = resolve;
  });
  let concurrency = Number.NaN;
  createInterface({ input: child.stdout! }).on('line', (line) => {
    counts.lines++;
    if (line.startsWith('warning ')) counts.warnings++;
    const announced = /\((\d+) files at once/.exec(line);
    if (announced) concurrency = Number(announced[1]);
    if (line.startsWith('docline: ready.')) ready();
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    child,
    counts,
    concurrency: () => concurrency,
    ready: Promise.race([
      isReady,
      exited.then(() => {
        throw new Error(`npm start exited before it was ready:\n${stderr}`);
      }),
    ]),
    stop: () => stopProcess(child, exited, { graceMs: 20_000 }),
  };
}

/** The Node child processes of a process (its worker), from /proc; empty where that is missing. */
function nodeChildren(pid: number | undefined): number[] {
  if (pid === undefined) return [];
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number)
      .filter((child) => readFileSync(`/proc/${child}/cmdline`, 'utf8').includes('worker/src/main.ts'));
  } catch {
    return [];
  }
}

/** Two drops of one variant as one figure: rows over the seconds of both, means of the rest. */
export function combine(a: InboxDrop, b: InboxDrop): InboxDrop {
  const mean = (x: number, y: number) => (x + y) / 2;
  return {
    documents: a.documents,
    seconds: mean(a.seconds, b.seconds),
    perSecond: (a.perSecond * a.seconds + b.perSecond * b.seconds) / (a.seconds + b.seconds),
    dropSeconds: [...a.dropSeconds, ...b.dropSeconds],
    complete: a.complete && b.complete,
    commandCpuMsPerDocument: mean(a.commandCpuMsPerDocument, b.commandCpuMsPerDocument),
    workerCpuMsPerDocument: mean(a.workerCpuMsPerDocument, b.workerCpuMsPerDocument),
    machineBusyShare: mean(a.machineBusyShare, b.machineBusyShare),
  };
}

/** Polls `check` every 20 ms until it is true or `maxMs` has passed since `started`. */
async function until(check: () => boolean, maxMs: number, started: number): Promise<boolean> {
  while (!check()) {
    if (performance.now() - started > maxMs) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

/** Files left under a folder of the inbox (its `.uploaded/` aside). */
function filesUnder(dir: string): number {
  try {
    return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).length;
  } catch {
    return 0;
  }
}

export async function runInboxStage(options: InboxStageOptions): Promise<InboxStageResult> {
  const { progress, documents } = options;
  const date = new Date().toISOString();
  const loadAverageStart = os.loadavg();
  const root = path.join(options.tmpRoot, 'inbox-stage');
  const dataDir = path.join(root, 'data');
  const inbox = path.join(root, 'inbox');
  mkdirSync(inbox, { recursive: true });
  const template = readFileSync(path.join(REPO_ROOT, SAMPLE), 'utf8');
  const copy = Buffer.from(template);
  progress('stage inbox: starting npm start (its own emulator and worker)');
  const start = startCommand(dataDir, inbox);
  let db: DatabaseSync | undefined;
  try {
    await start.ready;
    db = new DatabaseSync(dataDirLayout(dataDir).sqlite, { readOnly: true });
    const countRows = db.prepare(`SELECT COUNT(*) AS n FROM ${SQLITE_TABLE}`);
    const rows = () => Number((countRows.get() as { n: number }).n);

    /** Writes `count` files into `inbox/<folder>/` and waits until every row exists and the folder is empty. */
    const drop = async (
      folder: string,
      count: number,
      bytesOf: (i: number) => Buffer,
    ): Promise<InboxDrop & { warnings: number }> => {
      const before = rows();
      const warningsBefore = start.counts.warnings;
      const dir = path.join(inbox, folder);
      mkdirSync(dir, { recursive: true });
      const commandPid = start.child.pid;
      const workerPid = nodeChildren(commandPid)[0];
      const cpu = { machine: machineCpu(), command: cpuTimeMs(commandPid), worker: cpuTimeMs(workerPid) };
      const started = performance.now();
      // As `cp -r` would: one file after the other, into the watched folder.
      for (let i = 0; i < count; i++)
        writeFileSync(path.join(dir, `${String(i).padStart(6, '0')}-invoice.txt`), bytesOf(i));
      const complete = await until(() => rows() - before >= count, options.maxDropMs, started);
      const seconds = (performance.now() - started) / 1000;
      const done = Math.min(rows() - before, count);
      const perDocument = (before: number | null, after: number | null) =>
        before === null || after === null || done === 0 ? Number.NaN : (after - before) / done;
      const commandCpuMsPerDocument = perDocument(cpu.command, cpuTimeMs(commandPid));
      const workerCpuMsPerDocument = perDocument(cpu.worker, cpuTimeMs(workerPid));
      const machineBusyShare = busyShare(cpu.machine, machineCpu());
      // The files leave the inbox right after their rows: the next drop starts on an empty inbox.
      await until(() => filesUnder(dir) === 0, 10_000, performance.now());
      progress(
        `stage inbox: ${folder}: ${done}/${count} rows in ${seconds.toFixed(1)} s, ${(done / seconds).toFixed(0)}/s` +
          `, ${start.counts.warnings - warningsBefore} duplicate warnings, machine ${(machineBusyShare * 100).toFixed(0)}% busy, ` +
          `CPU ms per document: npm start ${commandCpuMsPerDocument.toFixed(2)}, worker ${workerCpuMsPerDocument.toFixed(2)}`,
      );
      return {
        documents: count,
        seconds,
        perSecond: done / seconds,
        dropSeconds: [seconds],
        warnings: start.counts.warnings - warningsBefore,
        complete,
        commandCpuMsPerDocument,
        workerCpuMsPerDocument,
        machineBusyShare,
      };
    };

    await drop('warm-up', options.warmupDocuments, (i) => distinctInvoice(template, 1_000_000 + i));
    // ABBA: the emulator's JVM still speeds up after the warm-up, so neither variant gets only the
    // early drops. The copies join one group, which reaches 2N objects.
    const distinct1 = await drop('distinct-1', documents, (i) => distinctInvoice(template, i));
    const copies1 = await drop('copies-1', documents, () => copy);
    const copies2 = await drop('copies-2', documents, () => copy);
    const distinct2 = await drop('distinct-2', documents, (i) => distinctInvoice(template, documents + i));
    const distinct = combine(distinct1, distinct2);
    const copies = combine(copies1, copies2);
    return {
      ...distinct,
      date,
      loadAverageStart,
      overPublishPath: ratio(distinct.perSecond, options.publishPathPerSecond),
      publishPathPerSecond: options.publishPathPerSecond,
      concurrency: start.concurrency(),
      copies: {
        ...copies,
        overDistinct: ratio(copies.perSecond, distinct.perSecond),
        warnings: copies1.warnings + copies2.warnings,
      },
    };
  } finally {
    db?.close();
    await start.stop();
  }
}
