/**
 * `npm start`: the whole pipeline on embedded defaults. Drop files into ./inbox; each becomes a
 * new generation in the local bucket, is announced as Cloud Storage would, pushed by the real
 * Pub/Sub emulator to the worker, and printed here with its outcome. Ctrl-C stops everything;
 * a restart keeps the data (DOCLINE_DATA_DIR).
 */
import path from 'node:path';
import { SqliteStore } from '../../worker/src/adapters/sqlite-store';
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import { DEDUP_KEY_MODES, type DedupKeyMode } from '../../worker/src/contract/settings';
import { option, parseCommandArgs, runCommand, UsageError } from '../lib/args';
import { type DuplicateInvoice, duplicateGroupOf, duplicateWarning, outcomeLine } from '../lib/format';
import { watchInbox } from '../lib/inbox';
import { stopGracefullyOnSignals } from '../lib/lifecycle';
import { startPipeline } from '../lib/pipeline';
import type { WorkerLogLine } from '../lib/worker-process';

const USAGE =
  'usage: npm start -- [--data-dir DIR] [--inbox DIR] [--dedup-key object|message] [--double-notifications]';

async function main(): Promise<void> {
  const { values } = parseCommandArgs(
    process.argv.slice(2),
    {
      'data-dir': { type: 'string' },
      inbox: { type: 'string' },
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

  console.log('docline: starting the Pub/Sub emulator and the worker…');
  const pipeline = await startPipeline({
    dataDir,
    emulatorHost: env.PUBSUB_EMULATOR_HOST,
    settings: { dedupKeyMode: dedupKey },
    notificationCopies: doubled ? 2 : 1,
  });
  const store = new SqliteStore({ path: layout.sqlite });

  const print = (line: WorkerLogLine) => {
    if (!line.messageId || !line.status) return;
    const label = line.objectUri?.replace(/^gs:\/\/[^/]+\//, '') ?? `(message ${line.messageId})`;
    if (line.status === 'ok' || line.status === 'rejected') {
      const row = store.rowsFor(line.dedupKey ?? '')[0];
      console.log(
        outcomeLine(
          line.status,
          label,
          row,
          line.status === 'rejected' ? `${line.reason}: ${line.detail}` : undefined,
        ),
      );
      if (line.status === 'ok' && row?.object_uri) {
        // One line when this new row joins a group of the duplicate_invoices view.
        const views = store.view('duplicate_invoices') as unknown as DuplicateInvoice[];
        const warning = duplicateWarning(row.object_uri, duplicateGroupOf(views, row.object_uri));
        if (warning) console.log(warning);
      }
    } else if (line.status === 'duplicate') {
      console.log(
        outcomeLine(
          'duplicate',
          label,
          undefined,
          `message ${line.messageId}: already recorded (${line.duplicateAt})`,
        ),
      );
    } else console.log(outcomeLine('retry', label, undefined, `${line.error}: ${line.message}`));
  };
  pipeline.worker.events.on('line', print);

  const inbox = await watchInbox({
    dir: inboxDir,
    onFile: async (name, bytes) => {
      const { resource, messageIds } = await pipeline.upload(name, bytes);
      console.log(
        `uploaded   ${name}#${resource.generation} (${bytes.length} bytes, message ${messageIds.join(', ')})`,
      );
    },
    onError: (name, error) => console.error(`could not upload ${name}: ${(error as Error).message}`),
  });

  console.log(
    [
      `docline: ready. Pub/Sub emulator ${pipeline.emulatorHost}, worker ${pipeline.worker.url}, dedup key ${dedupKey}` +
        (doubled ? ', every upload announced TWICE (two notification configs)' : ''),
      `  drop invoices into ${inboxDir} (or: npm run upload -- FILE…); rows: npm run rows; dead letters: npm run dlq -- list`,
      `  data in ${dataDir}; Ctrl-C stops everything.`,
    ].join('\n'),
  );

  // Ctrl-C: local/lib/lifecycle.ts kills the emulator, then this stops the rest in order.
  let stopping = false;
  const shutdown = stopGracefullyOnSignals(async () => {
    stopping = true;
    console.log('docline: stopping…');
    await inbox.stop();
    await pipeline.stop();
    await store.close();
  });
  void pipeline.worker.exited.then(({ code, signal }) => {
    if (stopping) return;
    console.error(`docline: the worker stopped unexpectedly (code ${code}, signal ${signal}).`);
    void shutdown(1);
  });
}

runCommand('docline', main);
