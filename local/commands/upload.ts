/** `npm run upload -- FILE… [--copies 2]`: uploads files to the running local pipeline's bucket. */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import { Announcer, contentTypeFor } from '../lib/announcer';
import { parseCommandArgs, runCommand } from '../lib/args';
import { LocalBucket } from '../lib/local-bucket';
import { PubSubClient } from '../lib/pubsub';
import { readState } from '../lib/state';

const USAGE = 'usage: npm run upload -- FILE… [--copies 2] [--prefix folder/] [--data-dir DIR]';

async function main(): Promise<void> {
  const { values, positionals } = parseCommandArgs(
    process.argv.slice(2),
    { copies: { type: 'string' }, prefix: { type: 'string' }, 'data-dir': { type: 'string' } },
    USAGE,
    { positionals: true },
  );
  if (positionals.length === 0)
    throw new Error('usage: npm run upload -- FILE… [--copies 2] [--prefix folder/]');
  const copies = Number(values.copies ?? 1);
  if (!Number.isInteger(copies) || copies < 1 || copies > 10)
    throw new Error('--copies must be a whole number from 1 to 10');
  const prefix = values.prefix ?? '';
  const state = await readState(values['data-dir']);
  const bucket = new LocalBucket(dataDirLayout(state.dataDir).bucket);
  const pubsub = new PubSubClient(state.emulatorBaseUrl, state.projectId);
  const announcer = new Announcer(pubsub, state.topic);
  for (const file of positionals) {
    const name = `${prefix}${path.basename(file)}`;
    const { resource, overwroteGeneration } = await bucket.put(
      state.bucket,
      name,
      await readFile(file),
      contentTypeFor(file),
    );
    const ids = await announcer.announce(resource, overwroteGeneration, copies);
    console.log(`uploaded   ${name}#${resource.generation} (message ${ids.join(', ')})`);
  }
  await pubsub.close();
}

runCommand('upload', main);
