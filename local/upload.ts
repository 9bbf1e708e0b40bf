/** `npm run upload -- FILE… [--copies 2]`: uploads files to the running local pipeline's bucket. */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { LocalBucket } from '../worker/src/adapters/local-bucket';
import { Announcer, contentTypeFor } from './announcer';
import { parseArgs } from './args';
import { PubSubClient } from './pubsub';
import { readState } from './state';

async function main(): Promise<void> {
  const { flags, positionals } = parseArgs(process.argv.slice(2));
  if (positionals.length === 0)
    throw new Error('usage: npm run upload -- FILE… [--copies 2] [--prefix folder/]');
  const copies = Number(flags.get('copies') ?? 1);
  if (!Number.isInteger(copies) || copies < 1 || copies > 10)
    throw new Error('--copies must be a whole number from 1 to 10');
  const prefix = typeof flags.get('prefix') === 'string' ? String(flags.get('prefix')) : '';
  const state = await readState(
    typeof flags.get('data-dir') === 'string' ? String(flags.get('data-dir')) : undefined,
  );
  const bucket = new LocalBucket(path.join(state.dataDir, 'bucket'));
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

main().catch((error: unknown) => {
  console.error(`upload: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
