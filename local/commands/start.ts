/**
 * `npm start`: the whole pipeline on embedded defaults. Drop files into ./inbox; each becomes a
 * new generation in the local bucket, is announced as Cloud Storage would, pushed by the real
 * Pub/Sub emulator to the worker, and printed here with its outcome. Files are taken several at
 * once (`--concurrency`, DOCLINE_UPLOAD_CONCURRENCY) and leave the inbox once their row exists.
 * Ctrl-C stops everything; a restart keeps the data (DOCLINE_DATA_DIR) and takes the files left.
 */
import path from 'node:path';
import { SqliteStore } from '../../worker/src/adapters/stores/sqlite-store';
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import { DEDUP_KEY_MODES, type DedupKeyMode } from '../../worker/src/contract/settings';
import { objectUri } from '../../worker/src/core/event';
import { option, parseCommandArgs, runCommand, UsageError } from '../lib/args';
import { concurrencySetting } from '../lib/bounded';
import { DUPLICATE_WARNING_NAMES, duplicateWarning, outcomeLine } from '../lib/format';
import { type InboxCounts, watchInbox } from '../lib/inbox';
import { stopGracefullyOnSignals } from '../lib/lifecycle';
import { startPipeline } from '../lib/pipeline';
import { ProgressLine } from '../lib/progress';
import type { WorkerLogLine, WorkerProcess } from '../lib/worker-process';

const USAGE =
  'usage: npm start -- [--data-dir DIR] [--inbox DIR] [--concurrency N] [--dedup-key object|message] [--double-notifications]';

/** Outcomes after which a delivery's row exists (a retry is not one). */
const RECORDED_STATUSES = new Set(['ok', 'rejected', 'duplicate']);

/** How long a stop waits for what needs the emulator, which Ctrl-C has already ended. */
const STOP_WAIT_MS = 2_000;

/** Resolves with `promise`, or after `ms` when it takes longer (what it was doing is given up). */
const withinMs = (promise: Promise<unknown>, ms: number) =>
  Promise.race([promise, new Promise<void>((resolve) => setTimeout(resolve, ms).unref())]);

/** Resolves once the worker's stdout has ended: every outcome line it wrote has been handled. */
const outputEnded = (worker: WorkerProcess) =>
  new Promise<void>((resolve) => {
    const stdout = worker.child.stdout;
    if (!stdout || stdout.closed) resolve();
    else stdout.once('close', () => resolve());
  });

/** The progress line's text: where the files of the inbox are, and how fast rows come. */
function progressText(counts: InboxCounts, rowsPerSecond: number): string {
  const parts = [
    `inbox: ${counts.done} done`,
    `${counts.awaitingRow} awaiting their row`,
    `${counts.uploading} uploading`,
    `${counts.queued} queued`,
  ];
  if (counts.failed > 0) parts.push(`${counts.failed} failed`);
  return `${parts.join(', ')} · ${rowsPerSecond.toFixed(0)} rows/s`;
}

async function main(): Promise<void> {
  const { values } = parseCommandArgs(
    process.argv.slice(2),
    {
      'data-dir': { type: 'string' },
      inbox: { type: 'string' },
      concurrency: { type: 'string' },
      'dedup-key': { type: 'string' },
      'double-notifications': { type: 'boolean' },
    },
    USAGE,
  );
  const env = process.env;
  const layout = dataDirLayout(values['data-dir'] ?? env.DOCLINE_DATA_DIR);
  const dataDir = layout.root;
  const inboxDir = path.resolve(option(values.inbox, env.DOCLINE_INBOX, 'inbox'));
  const dedupKey = option(values['dedup-key'], env.DEDUP_KEY, 'object') as DedupKeyMode;
  if (!DEDUP_KEY_MODES.includes(dedupKey)) {
    const problem = `--dedup-key must be one of ${DEDUP_KEY_MODES.join(', ')}`;
    // A wrong flag is a refused command line; a wrong DEDUP_KEY stays the error it always was.
    throw values['dedup-key'] === undefined ? new Error(problem) : new UsageError(`${problem}. ${USAGE}`);
  }
  const doubled = values['double-notifications'] === true || env.DOCLINE_DOUBLE_NOTIFICATIONS === '1';
  const concurrency = concurrencySetting(values.concurrency, env.DOCLINE_UPLOAD_CONCURRENCY, USAGE);

  console.log('docline: starting the Pub/Sub emulator and the worker…');
  const pipeline = await startPipeline({
    dataDir,
    emulatorHost: env.PUBSUB_EMULATOR_HOST,
    settings: { dedupKeyMode: dedupKey },
    notificationCopies: doubled ? 2 : 1,
  });
  const store = new SqliteStore({ path: layout.sqlite });
  const progress = new ProgressLine(process.stdout);
  let stopping = false;
  /** Uploads announced whose row does not exist yet, by object URI: the inbox moves them once it does. */
  const awaitingRow = new Map<string, (recorded: boolean) => void>();

  const print = (line: WorkerLogLine) => {
    if (!line.messageId || !line.status) return;
    if (line.objectUri && RECORDED_STATUSES.has(line.status)) {
      awaitingRow.get(line.objectUri)?.(true);
      awaitingRow.delete(line.objectUri);
    }
    const label = line.objectUri?.replace(/^gs:\/\/[^/]+\//, '') ?? `(message ${line.messageId})`;
    if (line.status === 'ok' || line.status === 'rejected') {
      const row = store.rowsFor(line.dedupKey ?? '')[0];
      progress.line(
        outcomeLine(
          line.status,
          label,
          row,
          line.status === 'rejected' ? `${line.reason}: ${line.detail}` : undefined,
        ),
      );
      if (line.status === 'ok' && row?.object_uri) {
        // One line when this new row joins a group of the duplicate_invoices view: an index search
        // for the few objects the line names, whatever the size of the group.
        const others = store.duplicateInvoiceOthers(row.dedup_key, DUPLICATE_WARNING_NAMES + 1);
        const warning = duplicateWarning(row.object_uri, others);
        if (warning) progress.line(warning);
      }
    } else if (line.status === 'duplicate') {
      progress.line(
        outcomeLine(
          'duplicate',
          label,
          undefined,
          `message ${line.messageId}: already recorded (${line.duplicateAt})`,
        ),
      );
    } else progress.line(outcomeLine('retry', label, undefined, `${line.error}: ${line.message}`));
  };
  pipeline.worker.events.on('line', print);

  // Rows per second over the last few seconds, for the progress line: one sample a quarter second.
  const samples: Array<{ atMs: number; done: number }> = [];
  const showProgress = (counts: InboxCounts) => {
    if (!progress.shown) return;
    const now = performance.now();
    if (samples.length === 0 || now - samples.at(-1)!.atMs >= 250)
      samples.push({ atMs: now, done: counts.done });
    while (samples.length > 2 && now - samples[0]!.atMs > 5_000) samples.shift();
    const first = samples[0]!;
    const rate = now > first.atMs ? ((counts.done - first.done) * 1000) / (now - first.atMs) : 0;
    const idle = counts.queued + counts.uploading + counts.awaitingRow === 0;
    if (idle) progress.clear();
    else progress.update(progressText(counts, rate));
  };

  const inbox = await watchInbox({
    dir: inboxDir,
    concurrency,
    onFile: async (name, bytes) => {
      let recorded: Promise<boolean> | undefined;
      const { resource, messageIds } = await pipeline.upload(name, bytes, {
        // Waiting starts before the announcement: its row may come before publish() returns.
        stored: (stored) => {
          const uri = objectUri(stored.bucket, stored.name, stored.generation);
          recorded = new Promise<boolean>((resolve) => awaitingRow.set(uri, resolve));
        },
      });
      progress.line(
        `uploaded   ${name}#${resource.generation} (${bytes.length} bytes, message ${messageIds.join(', ')})`,
      );
      return { recorded: recorded! };
    },
    // Uploads cut short by Ctrl-C are no news: their files stay in the inbox for the next start.
    onError: (name, error) => {
      if (!stopping) progress.lineTo(process.stderr, `could not upload ${name}: ${(error as Error).message}`);
    },
    onProgress: showProgress,
  });

  console.log(
    [
      `docline: ready. Pub/Sub emulator ${pipeline.emulatorHost}, worker ${pipeline.worker.url}, dedup key ${dedupKey}` +
        (doubled ? ', every upload announced TWICE (two notification configs)' : ''),
      `  drop invoices into ${inboxDir} (${concurrency} files at once; or: npm run upload -- FILE…); rows: npm run rows; dead letters: npm run dlq -- list`,
      `  data in ${dataDir}; Ctrl-C stops everything.`,
    ].join('\n'),
  );

  // Ctrl-C: local/lib/lifecycle.ts kills the emulator, then this stops the rest in order. A file
  // leaves the inbox only once its row exists, so whatever was queued, uploading or announced but
  // not yet processed stays there for the next start.
  const shutdown = stopGracefullyOnSignals(async () => {
    stopping = true;
    progress.clear();
    console.log('docline: stopping…');
    // Uploads cut short by the emulator's end would retry for minutes: their files stay anyway.
    await withinMs(inbox.pause(), STOP_WAIT_MS);
    const worker = pipeline.worker;
    await worker.stop();
    // The worker finished its last deliveries: their outcome lines move their files first.
    await outputEnded(worker);
    for (const resolve of awaitingRow.values()) resolve(false);
    awaitingRow.clear();
    await inbox.stop();
    progress.clear();
    console.log(
      `docline: stopped; ${inbox.counts().done} files of this run have their row and left the inbox.`,
    );
    // The publisher's flush to an emulator that is gone would retry for minutes too.
    await withinMs(pipeline.stop(), STOP_WAIT_MS);
    await store.close();
  });
  void pipeline.worker.exited.then(({ code, signal }) => {
    if (stopping) return;
    console.error(`docline: the worker stopped unexpectedly (code ${code}, signal ${signal}).`);
    void shutdown(1);
  });
}

runCommand('docline', main);
