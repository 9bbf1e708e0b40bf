import { Announcer } from '../local/lib/announcer';
import type { LocalBucket, ObjectResource } from '../local/lib/local-bucket';
import { textInvoices } from '../sim/samples';

/**
 * The benchmark's documents: the text invoices of samples/invoices, stored many times under unique
 * names in a local bucket, and the Pub/Sub push bodies that announce them exactly as Cloud Storage
 * and Pub/Sub would.
 */

export const BENCH_BUCKET = 'docline-bench';
const SUBSCRIPTION = 'projects/docline-bench/subscriptions/docline-push';

/** Stores `count` invoices (cycling through the samples) and returns their object resources, in order. */
export async function storeInvoices(
  bucket: LocalBucket,
  count: number,
  options: { prefix?: string; bucketName?: string } = {},
): Promise<ObjectResource[]> {
  const samples = textInvoices();
  const resources: ObjectResource[] = new Array(count);
  let next = 0;
  const prefix = options.prefix ?? 'bench';
  const bucketName = options.bucketName ?? BENCH_BUCKET;
  const worker = async () => {
    for (let i = next++; i < count; i = next++) {
      const sample = samples[i % samples.length]!;
      const name = `${prefix}/${String(i).padStart(6, '0')}-${sample.name}`;
      resources[i] = (await bucket.put(bucketName, name, sample.bytes, 'text/plain')).resource;
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return resources;
}

/** The Pub/Sub message that Cloud Storage publishes for a new object (data + attributes). */
export function notification(resource: ObjectResource): { data: string; attributes: Record<string, string> } {
  return { data: JSON.stringify(resource), attributes: Announcer.attributes(resource, null) };
}

/** A push body as Pub/Sub sends it, for one delivery of `messageId`. */
export function pushBodyFor(resource: ObjectResource, messageId: string): Record<string, unknown> {
  const { data, attributes } = notification(resource);
  const publishTime = resource.timeCreated;
  return {
    message: {
      attributes,
      data: Buffer.from(data).toString('base64'),
      messageId,
      message_id: messageId,
      publishTime,
      publish_time: publishTime,
    },
    subscription: SUBSCRIPTION,
  };
}

/**
 * The delivery order of a run: every document once, and when `redeliveryShare` is above 0 that
 * share of the deliveries are redeliveries (same messageId) of a document delivered `lag`
 * positions earlier. A lag above the load's concurrency makes a redelivery arrive after its first
 * delivery finished (the sequential case); the ones left over go at the end.
 */
export function deliveryOrder(documents: number, redeliveryShare: number, lag: number): number[] {
  if (redeliveryShare < 0 || redeliveryShare >= 1) throw new Error('redeliveryShare must be within [0, 1)');
  const redeliveries = Math.round((documents * redeliveryShare) / (1 - redeliveryShare));
  const order: number[] = [];
  let pending = 0; // next document to redeliver
  for (let i = 0; i < documents; i++) {
    order.push(i);
    if (pending < redeliveries && pending < documents && i - pending >= lag) order.push(pending++);
  }
  while (pending < redeliveries && pending < documents) order.push(pending++);
  return order;
}

/** Serialised push bodies for documents `[first, first + count)` in a delivery order. */
export function pushBodies(
  resources: readonly ObjectResource[],
  order: readonly number[],
  first = 0,
): Buffer[] {
  return order.map((i) => {
    const resource = resources[first + i];
    if (!resource) throw new Error(`document ${first + i} was not stored`);
    return Buffer.from(JSON.stringify(pushBodyFor(resource, `m${first + i}`)));
  });
}
