import type { PubSubClient, ReceivedMessage } from './pubsub';

/** Listing and replaying dead letters: shared by `npm run dlq`, the e2e check and the tests. */

const DEAD_LETTER_ATTRIBUTE = /^CloudPubSubDeadLetterSource/;

export interface DeadLetter {
  ackId: string;
  messageId: string;
  attributes: Record<string, string>;
  data: string | undefined;
  deliveryCount: string | undefined;
}

/** Pulls every dead letter currently available (they stay leased until acked or released). */
export async function pullAll(
  pubsub: PubSubClient,
  subscription: string,
  limit = 10_000,
): Promise<DeadLetter[]> {
  const letters: DeadLetter[] = [];
  while (letters.length < limit) {
    const batch: ReceivedMessage[] = await pubsub.pull(subscription, Math.min(1000, limit - letters.length));
    if (batch.length === 0) break;
    for (const m of batch) {
      const attributes = m.message.attributes ?? {};
      letters.push({
        ackId: m.ackId,
        messageId: m.message.messageId,
        attributes,
        data: m.message.data,
        deliveryCount: attributes.CloudPubSubDeadLetterSourceDeliveryCount,
      });
    }
  }
  return letters;
}

/** Lists the dead letters and leaves them in the subscription. */
export async function listDeadLetters(pubsub: PubSubClient, subscription: string): Promise<DeadLetter[]> {
  const letters = await pullAll(pubsub, subscription);
  await pubsub.nack(
    subscription,
    letters.map((l) => l.ackId),
  );
  return letters;
}

/**
 * Re-publishes dead letters to the pipeline's topic with their original attributes and data, and
 * acknowledges each once its copy is published (a crash in between replays it twice, which the
 * worker's key absorbs). Returns the new messageIds.
 */
export async function replayDeadLetters(
  pubsub: PubSubClient,
  subscription: string,
  topic: string,
  select: (letter: DeadLetter) => boolean = () => true,
): Promise<Array<{ from: string; to: string }>> {
  const letters = await pullAll(pubsub, subscription);
  const chosen = letters.filter(select);
  await pubsub.nack(
    subscription,
    letters.filter((l) => !chosen.includes(l)).map((l) => l.ackId),
  );
  const replayed: Array<{ from: string; to: string }> = [];
  for (const letter of chosen) {
    const attributes = Object.fromEntries(
      Object.entries(letter.attributes).filter(([k]) => !DEAD_LETTER_ATTRIBUTE.test(k)),
    );
    const [id] = await pubsub.publish(topic, [
      { data: Buffer.from(letter.data ?? '', 'base64'), attributes },
    ]);
    await pubsub.acknowledge(subscription, [letter.ackId]);
    replayed.push({ from: letter.messageId, to: id! });
  }
  return replayed;
}
