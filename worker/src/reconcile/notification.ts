import { NOTIFICATION_PAYLOAD_FORMAT, NOTIFIED_EVENT_TYPE } from '../contract/storage';
import { objectUri as eventObjectUri } from '../core/event';

/**
 * The notification Cloud Storage sends for a finalized object (payload JSON_API_V1): one definition,
 * used by the local bucket's announcer and by reconcile, which announces a missing object again.
 */

/** The JSON_API_V1 object resource, as Cloud Storage lists it and puts it in a notification's data. */
export interface ObjectResource {
  name: string;
  bucket: string;
  /** Decimal string: generations exceed 2^53. */
  generation: string;
  contentType?: string;
  /** Decimal string. */
  size: string;
  timeCreated: string;
}

/**
 * The attribute reconcile adds to what Cloud Storage would have sent, so a re-announcement can be
 * told from the original in logs and dead letters. The worker ignores it.
 */
export const RECONCILE_ATTRIBUTE = 'doclineReconcile';

/** `gs://bucket/name#generation`: the object URI every row stores. */
export const objectUri = (o: Pick<ObjectResource, 'bucket' | 'name' | 'generation'>) =>
  eventObjectUri(o.bucket, o.name, o.generation);

/** The attributes Cloud Storage sets on an OBJECT_FINALIZE notification. */
export function finalizeAttributes(
  resource: ObjectResource,
  options: { overwroteGeneration?: string | null; notificationConfig?: string } = {},
): Record<string, string> {
  return {
    notificationConfig:
      options.notificationConfig ?? `projects/_/buckets/${resource.bucket}/notificationConfigs/1`,
    eventType: NOTIFIED_EVENT_TYPE,
    payloadFormat: NOTIFICATION_PAYLOAD_FORMAT,
    bucketId: resource.bucket,
    objectId: resource.name,
    objectGeneration: resource.generation,
    eventTime: resource.timeCreated,
    ...(options.overwroteGeneration ? { overwroteGeneration: options.overwroteGeneration } : {}),
  };
}

/** An outgoing Pub/Sub message: raw data and attributes. */
export interface NotificationMessage {
  data: Buffer;
  attributes: Record<string, string>;
}

/**
 * The notification reconcile publishes for a live object: exactly what Cloud Storage sends on
 * OBJECT_FINALIZE, plus {@link RECONCILE_ATTRIBUTE} (the time of the reconcile run).
 */
export function reconcileNotification(resource: ObjectResource, runAt: Date): NotificationMessage {
  return {
    data: Buffer.from(JSON.stringify(resource)),
    attributes: { ...finalizeAttributes(resource), [RECONCILE_ATTRIBUTE]: runAt.toISOString() },
  };
}
