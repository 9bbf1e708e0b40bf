import type { Row } from '../../src/contract/row';
import { objectDedupKey, objectUri } from '../../src/core/event';

/** Test builders: push bodies and rows as the services send and store them. */

export interface ObjectSpec {
  bucket?: string;
  name?: string;
  generation?: string;
  contentType?: string;
  size?: number;
  eventType?: string;
  overwroteGeneration?: string;
}

/** The object resource that a JSON_API_V1 notification carries in `data`. */
export function objectResource(spec: ObjectSpec = {}): Record<string, unknown> {
  const bucket = spec.bucket ?? 'acme-invoices-dev';
  const name = spec.name ?? '2026/11/facture-0042.txt';
  const generation = spec.generation ?? '1764460800123456';
  return {
    kind: 'storage#object',
    id: `${bucket}/${name}/${generation}`,
    name,
    bucket,
    generation,
    metageneration: '1',
    contentType: spec.contentType ?? 'text/plain',
    timeCreated: '2026-11-30T00:00:00.123Z',
    updated: '2026-11-30T00:00:00.123Z',
    size: String(spec.size ?? 100),
  };
}

/** Notification attributes for an object, as Cloud Storage sets them. */
export function notificationAttributes(spec: ObjectSpec = {}): Record<string, string> {
  const r = objectResource(spec);
  return {
    notificationConfig: `projects/_/buckets/${r.bucket}/notificationConfigs/7`,
    eventType: spec.eventType ?? 'OBJECT_FINALIZE',
    payloadFormat: 'JSON_API_V1',
    bucketId: String(r.bucket),
    objectId: String(r.name),
    objectGeneration: String(r.generation),
    eventTime: '2026-11-30T00:00:00.123456Z',
    ...(spec.overwroteGeneration ? { overwroteGeneration: spec.overwroteGeneration } : {}),
  };
}

/** A push body (service shape) for a Cloud Storage notification. */
export function pushBody(
  messageId: string,
  spec: ObjectSpec = {},
  extra: { deliveryAttempt?: number } = {},
): Record<string, unknown> {
  return {
    message: {
      attributes: notificationAttributes(spec),
      data: Buffer.from(JSON.stringify(objectResource(spec))).toString('base64'),
      messageId,
      message_id: messageId,
      publishTime: '2026-11-30T00:00:00.456Z',
      publish_time: '2026-11-30T00:00:00.456Z',
    },
    subscription: 'projects/acme-dev/subscriptions/docline-push',
    ...(extra.deliveryAttempt ? { deliveryAttempt: extra.deliveryAttempt } : {}),
  };
}

let counter = 0;

/** A complete row with unique keys; override what the test is about. */
export function testRow(overrides: Partial<Row> = {}): Row {
  counter += 1;
  const generation = String(1764460800000000 + counter);
  const name = `2026/11/invoice-${counter}.txt`;
  return {
    message_id: String(9000000 + counter),
    dedup_key: objectDedupKey({ bucket: 'acme-invoices-dev', name, generation }),
    object_uri: objectUri('acme-invoices-dev', name, generation),
    bucket: 'acme-invoices-dev',
    object_name: name,
    generation,
    content_type: 'text/plain',
    size_bytes: 120,
    event_time: '2026-11-30T00:00:00.123Z',
    publish_time: '2026-11-30T00:00:00.456Z',
    delivery_attempt: 1,
    status: 'ok',
    reason: null,
    analysis: { document_type: 'invoice', total_amount: 1234.56 },
    model: 'offline',
    prompt_tokens: 0,
    output_tokens: 0,
    total_tokens: 0,
    e_invoice_validation: null,
    processed_at: '2026-11-30T04:00:00.000Z',
    worker_version: 'test',
    confidence: null,
    review: null,
    ...overrides,
  };
}
