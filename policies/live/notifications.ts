/**
 * The live notification check, shared by the policy pack's advisory rule and
 * `npm run check:notifications`: what a bucket's notification configs actually are, which of them
 * feed the pipeline, and which of them the stack does not manage. Policies only see the stack; a
 * notification created by hand (`gcloud storage buckets notifications create`) is invisible to them.
 */

import { NOTIFIED_EVENT_TYPE } from '../../worker/src/contract/storage';

/** One notification config of a bucket, as the Cloud Storage JSON API lists it. */
export interface BucketNotification {
  readonly id: string;
  /** `//pubsub.googleapis.com/projects/P/topics/T`. */
  readonly topic: string;
  /** Empty means every event type. */
  readonly eventTypes: readonly string[];
  readonly payloadFormat: string;
  readonly objectNamePrefix?: string;
}

/** Port: lists the notification configs of a bucket. */
export interface NotificationLister {
  list(bucket: string): Promise<BucketNotification[]>;
}

/** The event type the worker processes (the contract's; re-exported for the notification checker). */
export { NOTIFIED_EVENT_TYPE as PIPELINE_EVENT_TYPE };

/** A topic reference split into project (when given) and topic id. */
function topicParts(topic: string): { project?: string; topic: string } {
  const match = /(?:^|\/)projects\/([^/]+)\/topics\/([^/]+)$/.exec(topic);
  if (match?.[1] && match[2]) return { project: match[1], topic: match[2] };
  return { topic: topic.split('/').pop() ?? topic };
}

/**
 * Whether two topic references name the same topic. Accepts `//pubsub.googleapis.com/projects/P/topics/T`,
 * `projects/P/topics/T` and the bare id `T` (which matches that id in any project).
 */
export function sameTopic(a: string, b: string): boolean {
  const x = topicParts(a);
  const y = topicParts(b);
  if (x.topic !== y.topic) return false;
  return x.project === undefined || y.project === undefined || x.project === y.project;
}

/** Whether a notification delivers the pipeline's uploads (to the given topic, when one is given). */
export function feedsPipeline(notification: BucketNotification, topic?: string): boolean {
  const delivers =
    notification.eventTypes.length === 0 || notification.eventTypes.includes(NOTIFIED_EVENT_TYPE);
  return delivers && (topic === undefined || sameTopic(notification.topic, topic));
}

/** What the stack says about one notification it manages; anything unknown is left out. */
export interface ManagedNotification {
  /** The config id Cloud Storage assigned (the provider's `notificationId` output). */
  readonly id?: string;
  readonly topic?: string;
  /** `'all'` when the notification sets no event types. */
  readonly eventTypes?: readonly string[] | 'all';
  readonly payloadFormat?: string;
}

function matches(actual: BucketNotification, managed: ManagedNotification): boolean {
  if (managed.topic !== undefined && !sameTopic(actual.topic, managed.topic)) return false;
  if (managed.payloadFormat !== undefined && actual.payloadFormat !== managed.payloadFormat) return false;
  if (managed.eventTypes !== undefined) {
    const wanted = managed.eventTypes === 'all' ? [] : [...managed.eventTypes].sort();
    const got = [...actual.eventTypes].sort();
    if (wanted.length !== got.length || wanted.some((t, i) => t !== got[i])) return false;
  }
  return true;
}

/**
 * The bucket's notifications that the stack does not manage. Matched by config id when the stack
 * knows it; otherwise (a notification not created yet, or a preview) each managed notification
 * accounts for one actual config with the same topic, event types and payload format.
 */
export function unmanagedNotifications(
  actual: readonly BucketNotification[],
  managed: readonly ManagedNotification[],
): BucketNotification[] {
  const ids = new Set(managed.map((m) => m.id).filter((id): id is string => id !== undefined));
  const remaining = actual.filter((a) => !ids.has(a.id));
  for (const m of managed) {
    if (m.id !== undefined && actual.some((a) => a.id === m.id)) continue;
    const index = remaining.findIndex((a) => matches(a, m));
    if (index >= 0) remaining.splice(index, 1);
  }
  return remaining;
}

/** One line describing a notification, for messages and the command's output. */
export function describeNotification(n: BucketNotification): string {
  const events = n.eventTypes.length === 0 ? 'all event types' : n.eventTypes.join(',');
  const prefix = n.objectNamePrefix ? `, prefix ${n.objectNamePrefix}` : '';
  return `notification ${n.id}: topic ${n.topic}, ${events}, ${n.payloadFormat}${prefix}`;
}

/** The command that deletes a notification config by hand. */
export function deleteCommand(bucket: string, id: string): string {
  return `gcloud storage buckets notifications delete projects/_/buckets/${bucket}/notificationConfigs/${id}`;
}
