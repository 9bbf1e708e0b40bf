/** `npm run dlq -- list | replay [--message ID]`: inspect and replay the dead-letter subscription. */
import { parseCommandArgs, runCommand, UsageError } from '../lib/args';
import { listDeadLetters, replayDeadLetters } from '../lib/dead-letter-subscription';
import { PubSubClient } from '../lib/pubsub';
import { readState } from '../lib/state';

const USAGE = 'usage: npm run dlq -- list | replay [--message ID] [--data-dir DIR]';

async function main(): Promise<void> {
  const { values, positionals } = parseCommandArgs(
    process.argv.slice(2),
    { message: { type: 'string' }, 'data-dir': { type: 'string' } },
    USAGE,
    { positionals: true },
  );
  const command = positionals[0];
  if (command !== 'list' && command !== 'replay')
    throw new Error('usage: npm run dlq -- list | replay [--message ID]');
  if (positionals.length > 1) throw new UsageError(`Unexpected argument '${positionals[1]}'. ${USAGE}`);
  const state = await readState(values['data-dir']);
  const pubsub = new PubSubClient(state.emulatorBaseUrl, state.projectId);
  try {
    await dlq(command, values.message, state, pubsub);
  } finally {
    await pubsub.close();
  }
}

async function dlq(
  command: 'list' | 'replay',
  only: string | undefined,
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
  const replayed = await replayDeadLetters(
    pubsub,
    state.deadLetterSubscription,
    state.topic,
    (l) => only === undefined || l.messageId === only,
  );
  for (const r of replayed) console.log(`replayed   ${r.from} → new message ${r.to}`);
  console.log(`${replayed.length} dead letters replayed to ${state.topic}`);
}

runCommand('dlq', main);
