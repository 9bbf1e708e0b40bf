import { finalizeAttributes } from '../../worker/src/reconcile/notification';
import type { ObjectResource } from './local-bucket';
import type { PubSubClient } from './pubsub';

/**
 * Announces uploads to the local bucket exactly as Cloud Storage announces them to Pub/Sub:
 * payload JSON_API_V1, the object resource as `data`, and the notification attributes.
 * `copies: 2` reproduces "the notification was created twice": two configs, two messageIds.
 */
export class Announcer {
  constructor(
    private readonly pubsub: PubSubClient,
    private readonly topic: string,
  ) {}

  /** The attributes Cloud Storage sets on an OBJECT_FINALIZE notification. */
  static attributes(
    resource: ObjectResource,
    overwroteGeneration: string | null,
    config = 1,
  ): Record<string, string> {
    return finalizeAttributes(resource, {
      overwroteGeneration,
      notificationConfig: `projects/_/buckets/${resource.bucket}/notificationConfigs/${config}`,
    });
  }

  /** Publishes the notification(s) of one write and returns their messageIds. */
  async announce(
    resource: ObjectResource,
    overwroteGeneration: string | null,
    copies = 1,
  ): Promise<string[]> {
    const data = JSON.stringify(resource);
    const messages = Array.from({ length: copies }, (_, i) => ({
      data,
      attributes: Announcer.attributes(resource, overwroteGeneration, i + 1),
    }));
    return this.pubsub.publish(this.topic, messages);
  }
}

/** Content types by file extension, as a browser or `gcloud storage cp` would set them. */
export function contentTypeFor(file: string): string {
  const ext = file.toLowerCase().split('.').pop() ?? '';
  const types: Record<string, string> = {
    pdf: 'application/pdf',
    png: 'image/png',
    jpg: 'image/jpeg',
    jpeg: 'image/jpeg',
    webp: 'image/webp',
    txt: 'text/plain',
    text: 'text/plain',
    xml: 'application/xml',
  };
  return types[ext] ?? 'application/octet-stream';
}
