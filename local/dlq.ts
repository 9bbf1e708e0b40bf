/** `npm run dlq -- list | replay [--message ID]`: inspect and replay the dead-letter subscription. */
import { parseArgs } from './args';
import { listDeadLetters, replayDeadLetters } from './dead-letters';
import { PubSubClient } from './pubsub';
import { readState } from './state';

async function main(): Promise<void> {
  const { flags, positionals } = parseArgs(process.argv.slice(2));
  const command = positionals[0];
  if (command !== 'list' && command !== 'replay')
    throw new Error('usage: npm run dlq -- list | replay [--message ID]');
  const state = await readState(
    typeof flags.get('data-dir') === 'string' ? String(flags.get('data-dir')) : undefined,
  );
  const pubsub = new PubSubClient(state.emulatorBaseUrl, state.projectId);
  try {
    await dlq(command, flags, state, pubsub);
  } finally {
    await pubsub.close();
  }
}

async function dlq(
  command: 'list' | 'replay',
  flags: Map<string, string | true>,
  state: Awaited<ReturnType<typeof readState>>,
  pubsub: PubSubClient,
): Promise<void> {
  if (command === 'list') {
    const letters = await listDeadLetters(pubsub, state.deadLetterSubscription);
    for (const l of letters) {
      const object = l.attributes.objectId
        ? `${l.attributes.objectId}#${l.attributes.objectGeneration}`
        : '(no object)';
      console.log(`${l.messageId.padEnd(12)} ${object}  after ${l.deliveryCount ?? '?'} deliveries`);
    }
    console.log(`${letters.length} dead letters`);
    return;
  }
  const only = flags.get('message');
  const replayed = await replayDeadLetters(pubsub, state.deadLetterSubscription, state.topic, (l) =>
    typeof only === 'string' ? l.messageId === only : true,
  );
  for (const r of replayed) console.log(`replayed   ${r.from} → new message ${r.to}`);
  console.log(`${replayed.length} dead letters replayed to ${state.topic}`);
}

main().catch((error: unknown) => {
  console.error(`dlq: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
