import { Storage } from '@google-cloud/storage';
import type { BucketNotification, NotificationLister } from './notifications';

/** Options of {@link GcsNotificationLister}. */
export interface GcsNotificationListerOptions {
  /**
   * A Cloud Storage endpoint other than Google's (a local test server). `STORAGE_EMULATOR_HOST`
   * works too; either way the client sends no credentials.
   */
  apiEndpoint?: string;
  /** Gives up on one listing after this long. */
  timeoutMs?: number;
}

/** The JSON API's notification resource (snake_case, as `GET .../notificationConfigs` returns it). */
interface NotificationResource {
  id?: unknown;
  topic?: unknown;
  event_types?: unknown;
  payload_format?: unknown;
  object_name_prefix?: unknown;
}

/** Lists a bucket's notification configs with `@google-cloud/storage` (`bucket.getNotifications()`). */
export class GcsNotificationLister implements NotificationLister {
  private readonly storage: Storage;
  private readonly timeoutMs: number;

  constructor(options: GcsNotificationListerOptions = {}) {
    // One attempt: a preview or a post-deploy check should report a failure, not sit in backoff.
    this.storage = new Storage({
      ...(options.apiEndpoint ? { apiEndpoint: options.apiEndpoint } : {}),
      retryOptions: { autoRetry: false },
    });
    this.timeoutMs = options.timeoutMs ?? 15_000;
  }

  async list(bucket: string): Promise<BucketNotification[]> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`listing the notifications of ${bucket} took over ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
    });
    try {
      const [notifications] = await Promise.race([this.storage.bucket(bucket).getNotifications(), timeout]);
      return notifications.map((n) => toBucketNotification(n.metadata as NotificationResource, n.id));
    } finally {
      clearTimeout(timer);
    }
  }
}

function toBucketNotification(
  resource: NotificationResource,
  fallbackId: string | undefined,
): BucketNotification {
  const prefix = typeof resource.object_name_prefix === 'string' ? resource.object_name_prefix : undefined;
  return {
    id: typeof resource.id === 'string' ? resource.id : (fallbackId ?? '?'),
    topic: typeof resource.topic === 'string' ? resource.topic : '',
    eventTypes: Array.isArray(resource.event_types)
      ? resource.event_types.filter((t): t is string => typeof t === 'string')
      : [],
    payloadFormat: typeof resource.payload_format === 'string' ? resource.payload_format : 'NONE',
    ...(prefix ? { objectNamePrefix: prefix } : {}),
  };
}
