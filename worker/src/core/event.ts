import { z } from 'zod';
import type { DedupKeyMode } from '../contract/settings';
import { BUCKET_NAME, NOTIFICATION_PAYLOAD_FORMAT, NOTIFIED_EVENT_TYPE } from '../contract/storage';
import { BadEnvelopeError, type RejectionReason } from './errors';

/**
 * The edge: a Pub/Sub push body and the Cloud Storage notification inside it become typed values
 * here, once. Nothing untyped travels past this module.
 */

/** The part of a push that identifies the delivery. */
export interface PushDelivery {
  messageId: string;
  publishTime: string | null;
  /** Present only when the subscription has a dead-letter policy (never from the emulator). */
  deliveryAttempt: number | null;
  subscription: string | null;
}

/** What the notification says about one object generation. */
export interface ObjectFields {
  eventType: string;
  bucket: string;
  name: string;
  /** Decimal string, never a number: generations exceed 2^53. */
  generation: string;
  contentType: string | null;
  sizeBytes: number | null;
  md5Hash: string | null;
  crc32c: string | null;
  notificationConfig: string | null;
  eventTime: string | null;
  overwroteGeneration: string | null;
}

/** A notification that names work (an OBJECT_FINALIZE of a valid object). */
export interface DocumentEvent extends PushDelivery {
  kind: 'document';
  object: ObjectFields;
  objectUri: string;
}

/** A notification that can never be work; `object` holds whatever could be read from it. */
export interface NotWorkEvent extends PushDelivery {
  kind: 'not_work';
  reason: RejectionReason;
  detail: string;
  object: Partial<ObjectFields>;
  objectUri: string | null;
}

export type PushEvent = DocumentEvent | NotWorkEvent;

// The id must not contain '/', so that a messageId key can never equal a gs:// document key.
const MESSAGE_ID = /^[^\s/]{1,256}$/;

const EnvelopeSchema = z.object({
  message: z.object({
    data: z.string().optional(),
    attributes: z.record(z.string(), z.string()).optional(),
    messageId: z.string().optional(),
    message_id: z.string().optional(),
    publishTime: z.string().optional(),
    publish_time: z.string().optional(),
  }),
  subscription: z.string().optional(),
  deliveryAttempt: z.number().int().positive().optional(),
});

const INT64_MAX = 9223372036854775807n;
const GENERATION = /^[1-9][0-9]{0,18}$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/;
const MAX_NAME_BYTES = 1024;

const ObjectResourceSchema = z.object({
  name: z.string(),
  bucket: z.string(),
  generation: z.string(),
  contentType: z.string().max(256).optional(),
  size: z
    .string()
    .regex(/^\d{1,16}$/)
    .optional(),
  md5Hash: z.string().max(64).optional(),
  crc32c: z.string().max(64).optional(),
});

export function isValidGeneration(value: string): boolean {
  return GENERATION.test(value) && BigInt(value) <= INT64_MAX;
}

/** Why an object name is refused, or null when it is acceptable (Unicode is fine). */
export function objectNameProblem(name: string): string | null {
  if (name.length === 0) return 'the object name is empty';
  if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES)
    return `the object name is over ${MAX_NAME_BYTES} bytes`;
  if (!name.isWellFormed()) return 'the object name is not valid UTF-8';
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
  if (/[\u0000-\u001f\u007f]/.test(name)) return 'the object name contains a control character';
  if (name.startsWith('/')) return 'the object name is an absolute path';
  if (name.split(/[/\\]/).some((segment) => segment === '..' || segment === '.')) {
    return "the object name has a '.' or '..' segment";
  }
  return null;
}

/** `gs://bucket/name#generation`: one generation of one object (a row's `object_uri`). */
export function objectUri(bucket: string, name: string, generation: string): string {
  return `gs://${bucket}/${name}#${generation}`;
}

/**
 * The dedup key of one object generation in object mode. It is spelled like the generation's URI,
 * so that a row's `dedup_key` equals its `object_uri` in that mode.
 */
export function objectDedupKey(object: Pick<ObjectFields, 'bucket' | 'name' | 'generation'>): string {
  return objectUri(object.bucket, object.name, object.generation);
}

/** Reads the delivery out of a push body, or throws BadEnvelopeError (HTTP 400, no row). */
export function parseEnvelope(body: unknown): {
  delivery: PushDelivery;
  data: string | undefined;
  attributes: Record<string, string>;
} {
  const parsed = EnvelopeSchema.safeParse(body);
  if (!parsed.success) {
    throw new BadEnvelopeError(
      `not a Pub/Sub push envelope: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ')}`,
    );
  }
  const { message, subscription, deliveryAttempt } = parsed.data;
  const messageId = message.messageId ?? message.message_id;
  if (!messageId) throw new BadEnvelopeError('the push envelope has no message.messageId');
  if (!MESSAGE_ID.test(messageId)) {
    throw new BadEnvelopeError('message.messageId must be 1 to 256 characters without spaces or slashes');
  }
  const publishTime = message.publishTime ?? message.publish_time ?? null;
  return {
    delivery: {
      messageId,
      publishTime: publishTime && TIMESTAMP.test(publishTime) ? publishTime : null,
      deliveryAttempt: deliveryAttempt ?? null,
      subscription: subscription ?? null,
    },
    data: message.data,
    attributes: message.attributes ?? {},
  };
}

/**
 * Turns a push body into a typed event. Throws BadEnvelopeError when it is not an envelope;
 * anything wrong inside the notification gives a NotWorkEvent with a reason instead.
 */
export function parsePush(body: unknown): PushEvent {
  const { delivery, data, attributes } = parseEnvelope(body);
  const partial: Partial<ObjectFields> = {};
  const notWork = (reason: RejectionReason, detail: string): NotWorkEvent => ({
    ...delivery,
    kind: 'not_work',
    reason,
    detail,
    object: partial,
    objectUri:
      partial.bucket && partial.name && partial.generation
        ? objectUri(partial.bucket, partial.name, partial.generation)
        : null,
  });

  const { eventType, payloadFormat, bucketId, objectId, objectGeneration } = attributes;
  if (!eventType || !bucketId || !objectId || !objectGeneration) {
    const missing = ['eventType', 'bucketId', 'objectId', 'objectGeneration'].filter((k) => !attributes[k]);
    return notWork('invalid_notification', `the notification lacks the attributes ${missing.join(', ')}`);
  }
  if (eventType.length <= 64) partial.eventType = eventType;
  if (!BUCKET_NAME.test(bucketId))
    return notWork('invalid_notification', 'bucketId is not a valid bucket name');
  partial.bucket = bucketId;
  if (!isValidGeneration(objectGeneration)) {
    return notWork('invalid_notification', 'objectGeneration is not a positive 64-bit decimal integer');
  }
  partial.generation = objectGeneration;
  const nameProblem = objectNameProblem(objectId);
  if (nameProblem) return notWork('invalid_name', nameProblem);
  partial.name = objectId;
  if (payloadFormat !== NOTIFICATION_PAYLOAD_FORMAT) {
    return notWork(
      'invalid_notification',
      `payloadFormat must be ${NOTIFICATION_PAYLOAD_FORMAT} (got ${String(payloadFormat).slice(0, 40)})`,
    );
  }
  partial.notificationConfig = attributes.notificationConfig ?? null;
  partial.eventTime =
    attributes.eventTime && TIMESTAMP.test(attributes.eventTime) ? attributes.eventTime : null;
  partial.overwroteGeneration =
    attributes.overwroteGeneration && isValidGeneration(attributes.overwroteGeneration)
      ? attributes.overwroteGeneration
      : null;
  if (eventType !== NOTIFIED_EVENT_TYPE) {
    return notWork(
      'unsupported_event_type',
      `only ${NOTIFIED_EVENT_TYPE} is work (got ${eventType.slice(0, 64)})`,
    );
  }

  if (!data || !BASE64.test(data)) return notWork('invalid_notification', 'message.data is not base64');
  let resource: unknown;
  try {
    resource = JSON.parse(Buffer.from(data, 'base64').toString('utf8'));
  } catch {
    return notWork('invalid_notification', 'message.data is not JSON');
  }
  const object = ObjectResourceSchema.safeParse(resource);
  if (!object.success) {
    return notWork('invalid_notification', 'message.data is not a Cloud Storage object resource');
  }
  const o = object.data;
  if (o.bucket !== bucketId || o.name !== objectId || o.generation !== objectGeneration) {
    return notWork('invalid_notification', 'the attributes and the object resource name different objects');
  }
  partial.contentType = o.contentType ?? null;
  partial.sizeBytes = o.size === undefined ? null : Number(o.size);
  partial.md5Hash = o.md5Hash ?? null;
  partial.crc32c = o.crc32c ?? null;

  const fields: ObjectFields = {
    eventType,
    bucket: bucketId,
    name: objectId,
    generation: objectGeneration,
    contentType: partial.contentType,
    sizeBytes: partial.sizeBytes,
    md5Hash: partial.md5Hash,
    crc32c: partial.crc32c,
    notificationConfig: partial.notificationConfig,
    eventTime: partial.eventTime,
    overwroteGeneration: partial.overwroteGeneration,
  };
  return {
    ...delivery,
    kind: 'document',
    object: fields,
    objectUri: objectUri(bucketId, objectId, objectGeneration),
  };
}

/**
 * The lookup key. Object mode: the object generation, which absorbs redeliveries and doubled
 * notifications while a re-upload (new generation) is new work. Message mode: the messageId.
 * Events that are not work are always keyed by their messageId, so they never meet a document.
 */
export function dedupKey(event: PushEvent, mode: DedupKeyMode): string {
  return event.kind === 'document' && mode === 'object' ? objectDedupKey(event.object) : event.messageId;
}
