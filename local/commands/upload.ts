/**
 * `npm run upload -- FILE… [--copies 2] [--concurrency N]`: uploads files to the running local
 * pipeline's bucket, several at once (DOCLINE_UPLOAD_CONCURRENCY by default). Files that share an
 * object name are uploaded one after another, in the order given: the later one is the newer
 * generation. Exit code 1 when any file could not be uploaded (the others still are).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import { Announcer, contentTypeFor } from '../lib/announcer';
import { parseCommandArgs, runCommand } from '../lib/args';
import { concurrencySetting, forEachBounded } from '../lib/bounded';
import { LocalBucket } from '../lib/local-bucket';
import { ProgressLine } from '../lib/progress';
import { PubSubClient } from '../lib/pubsub';
import { readState } from '../lib/state';

const USAGE =
  'usage: npm run upload -- FILE… [--copies 2] [--prefix folder/] [--concurrency N] [--data-dir DIR]';

async function main(): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    process.argv.slice(2),
    {
      copies: { type: 'string' },
      prefix: { type: 'string' },
      concurrency: { type: 'string' },
      'data-dir': { type: 'string' },
    },
    USAGE,
    { positionals: true },
  );
  if (positionals.length === 0)
    throw new Error('usage: npm run upload -- FILE… [--copies 2] [--prefix folder/]');
  const copies = Number(values.copies ?? 1);
  if (!Number.isInteger(copies) || copies < 1 || copies > 10)
    throw new Error('--copies must be a whole number from 1 to 10');
  const concurrency = concurrencySetting(values.concurrency, process.env.DOCLINE_UPLOAD_CONCURRENCY, USAGE);
  const prefix = values.prefix ?? '';
  const state = await readState(values['data-dir']);
  const bucket = new LocalBucket(dataDirLayout(state.dataDir).bucket);
  const pubsub = new PubSubClient(state.emulatorBaseUrl, state.projectId);
  const announcer = new Announcer(pubsub, state.topic);
  const progress = new ProgressLine(process.stdout);
  const objectName = (file: string) => `${prefix}${path.basename(file)}`;
  let finished = 0;
  const failures = await forEachBounded(positionals, concurrency, objectName, async (file) => {
    try {
      const name = objectName(file);
      const { resource, overwroteGeneration } = await bucket.put(
        state.bucket,
        name,
        await readFile(file),
        contentTypeFor(file),
      );
      const ids = await announcer.announce(resource, overwroteGeneration, copies);
      progress.line(`uploaded   ${name}#${resource.generation} (message ${ids.join(', ')})`);
    } finally {
      finished++;
      progress.update(`upload: ${finished} of ${positionals.length} files`);
    }
  });
  progress.clear();
  for (const { item, error } of failures)
    console.error(`could not upload ${item}: ${error instanceof Error ? error.message : String(error)}`);
  await pubsub.close();
  return failures.length === 0 ? 0 : 1;
}

runCommand('upload', main);
