import type { BucketNotification, NotificationLister } from '../../live/notifications';

/** An in-memory {@link NotificationLister}: the buckets it knows, and the buckets it was asked for. */
export class FakeNotificationLister implements NotificationLister {
  readonly asked: string[] = [];

  constructor(private readonly buckets: Record<string, BucketNotification[]>) {}

  async list(bucket: string): Promise<BucketNotification[]> {
    this.asked.push(bucket);
    const found = this.buckets[bucket];
    if (!found) throw new Error(`404 The specified bucket does not exist.`);
    return found;
  }
}

/** A notification config as `gcloud` or Pulumi would create it for the pipeline. */
export function feeding(id: string, topic = 'documents-events-91b2'): BucketNotification {
  return {
    id,
    topic: `//pubsub.googleapis.com/projects/docline-dev/topics/${topic}`,
    eventTypes: ['OBJECT_FINALIZE'],
    payloadFormat: 'JSON_API_V1',
  };
}
