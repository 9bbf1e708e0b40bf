/**
 * Rules 1 and 2: one notification per bucket, in the one format the worker reads. A second
 * notification makes every upload produce two messages with two messageIds: two rows, two paid
 * analyses, and no duplicate anywhere in the logs.
 */
import type * as gcp from '@pulumi/gcp';
import type { PolicyResource, ResourceValidationPolicy, StackValidationPolicy } from '@pulumi/policy';
import { NOTIFICATION_PAYLOAD_FORMAT, NOTIFIED_EVENT_TYPE } from '../../worker/src/contract/storage';
import { configOf, describe, knownString, ofTypes, peek, propertySources, propsOf } from './support';
import { TYPES } from './types';

/** Event types a notification delivers when `eventTypes` is left out: all of them. */
const ALL_EVENT_TYPES = 'all event types';

/** The event types of a notification: a list, all of them, or unknown until the update runs. */
type EventTypes = { kind: 'list'; types: string[] } | { kind: 'all' } | { kind: 'unknown' };

function eventTypesOf(resource: { props: Record<string, unknown> }): EventTypes {
  const value = peek(() => propsOf<gcp.storage.NotificationState>(resource).eventTypes);
  if (!value.known) return { kind: 'unknown' };
  if (!Array.isArray(value.value) || value.value.length === 0) return { kind: 'all' };
  if (value.value.some((t) => typeof t !== 'string')) return { kind: 'unknown' };
  return { kind: 'list', types: value.value as string[] };
}

/** Event types two notifications both deliver; an unknown list is assumed to overlap. */
function overlap(a: EventTypes, b: EventTypes): string | undefined {
  if (a.kind === 'unknown' || b.kind === 'unknown') return 'event types unknown until the update runs';
  if (a.kind === 'all' && b.kind === 'all') return ALL_EVENT_TYPES;
  if (a.kind === 'all' && b.kind === 'list') return b.types.join(', ');
  if (a.kind === 'list' && b.kind === 'all') return a.types.join(', ');
  if (a.kind === 'list' && b.kind === 'list') {
    const shared = a.types.filter((t) => b.types.includes(t));
    return shared.length > 0 ? shared.join(', ') : undefined;
  }
  return undefined;
}

/**
 * The bucket a notification is on: the bucket resource its `bucket` comes from, else the stack's
 * bucket of the known name it gives (none: a bucket outside the stack); undefined when neither is known.
 */
function bucketOf(
  notification: PolicyResource,
  resources: readonly PolicyResource[],
): { bucket?: PolicyResource; name?: string; label: string } | undefined {
  const sources = propertySources(notification, 'bucket', [TYPES.bucket]);
  if (sources.length === 1 && sources[0]) {
    return { bucket: sources[0], label: `bucket resource '${sources[0].name}'` };
  }
  const name = knownString(() => propsOf<gcp.storage.NotificationState>(notification).bucket);
  if (name === undefined) return undefined;
  const bucket = ofTypes(resources, [TYPES.bucket]).findLast(
    (b) => knownString(() => propsOf<gcp.storage.BucketState>(b).name) === name,
  );
  return { bucket, name, label: `bucket '${name}'` };
}

/**
 * One notification per bucket, or every upload is published twice, each copy with its own
 * messageId. Groups notifications by the bucket *resource* their `bucket` property comes from (its URN),
 * not by the bucket's name: on a first preview an auto-named bucket's name is unknown, and a rule
 * keyed on names would pass in exactly the pull request that adds the duplicate. A notification whose
 * bucket can be told neither by dependency nor by value is a violation of its own.
 */
export const oneNotificationPerBucket: StackValidationPolicy = {
  name: 'one-notification-per-bucket',
  description:
    'At most one Cloud Storage notification per bucket for overlapping event types: each one publishes its own message, so a second one doubles every row and every paid analysis.',
  enforcementLevel: 'mandatory',
  validateStack: (args, reportViolation) => {
    const groups = new Map<string, Array<{ name: string; events: EventTypes }>>();
    for (const notification of ofTypes(args.resources, [TYPES.notification])) {
      const on = bucketOf(notification, args.resources);
      if (on === undefined) {
        reportViolation(
          `Cannot tell which bucket notification ${describe(notification)} belongs to: its bucket is unknown until the update runs and it depends on no bucket resource of this stack, so a duplicate could not be ruled out. Pass the bucket resource's name output (bucket.name) as \`bucket\`, or a literal bucket name.`,
          notification.urn,
        );
        continue;
      }
      const key = on.bucket?.urn ?? `name:${on.name}`;
      const group = groups.get(key) ?? [];
      const events = eventTypesOf(notification);
      const earlier = group.find((g) => overlap(g.events, events) !== undefined);
      if (earlier) {
        reportViolation(
          `Notifications '${earlier.name}' and '${notification.name}' both deliver ${overlap(earlier.events, events)} from ${on.label}: every upload would be published twice, with two messageIds, and be analysed and billed twice. Keep a single notification per bucket: remove '${notification.name}' (or give the two disjoint event types).`,
          notification.urn,
        );
      }
      group.push({ name: notification.name, events });
      groups.set(key, group);
    }
  },
};

const notificationFormatSchema = {
  properties: {
    eventTypes: {
      type: 'array' as const,
      items: { type: 'string' as const },
      default: [NOTIFIED_EVENT_TYPE],
      description: 'The only event types a notification may deliver.',
    },
    payloadFormat: {
      type: 'string' as const,
      default: NOTIFICATION_PAYLOAD_FORMAT,
      description: 'The payload format the worker parses.',
    },
  },
};

/**
 * The worker handles OBJECT_FINALIZE events with a JSON_API_V1 payload. Without `eventTypes`
 * a notification delivers every event type (an overwrite then sends FINALIZE and DELETE), and
 * without the JSON payload the worker cannot read the object's generation.
 */
export const notificationFormat: ResourceValidationPolicy = {
  name: 'notification-format',
  description: 'Cloud Storage notifications deliver OBJECT_FINALIZE events only, with a JSON_API_V1 payload.',
  enforcementLevel: 'mandatory',
  configSchema: notificationFormatSchema,
  validateResource: (args, reportViolation) => {
    if (args.type !== TYPES.notification) return;
    const config = configOf(notificationFormatSchema, args);
    const allowed = config.eventTypes;
    const events = eventTypesOf(args);
    if (events.kind === 'all') {
      reportViolation(
        `Notification '${args.name}' sets no eventTypes, so it delivers every event type (an overwrite would also send DELETE/ARCHIVE). Set eventTypes: [${allowed.map((t) => `'${t}'`).join(', ')}].`,
      );
    } else if (events.kind === 'unknown') {
      reportViolation(
        `Notification '${args.name}' has eventTypes that are unknown until the update runs. Set them as literals: [${allowed.map((t) => `'${t}'`).join(', ')}].`,
      );
    } else {
      const extra = events.types.filter((t) => !allowed.includes(t));
      if (extra.length > 0) {
        reportViolation(
          `Notification '${args.name}' delivers ${extra.join(', ')}, which the worker does not process. Set eventTypes: [${allowed.map((t) => `'${t}'`).join(', ')}].`,
        );
      }
    }
    const format = peek(() => propsOf<gcp.storage.NotificationState>(args).payloadFormat);
    if (!format.known || format.value !== config.payloadFormat) {
      const got = format.known ? String(format.value ?? 'nothing') : 'a value unknown until the update runs';
      reportViolation(
        `Notification '${args.name}' has payloadFormat ${got}. Set payloadFormat: '${config.payloadFormat}': the worker reads the object's name and generation from that payload.`,
      );
    }
  },
};

const documentsBucketSchema = {
  properties: {
    roleLabel: {
      type: 'string' as const,
      default: 'docline-role',
      description: 'The bucket label that says what a bucket of the stack is for.',
    },
    documentsRole: {
      type: 'string' as const,
      default: 'documents',
      description: 'The label value of the one bucket whose uploads feed the pipeline.',
    },
  },
};

/**
 * Only the documents bucket may feed the pipeline. A notification on any other bucket (the memo of
 * paid analyses, a bucket added later) would turn its objects into work: a memo entry analysed as an
 * invoice, rows for files nobody uploaded. The documents bucket is told by its label, which is a
 * literal and so known even in a first preview. A notification whose bucket cannot be told is left
 * to `one-notification-per-bucket`, which reports it.
 */
export const onlyDocumentsBucketNotifies: StackValidationPolicy = {
  name: 'only-documents-bucket-notifies',
  description:
    'Only the bucket labelled as the documents bucket carries a notification: no other bucket feeds the pipeline.',
  enforcementLevel: 'mandatory',
  configSchema: documentsBucketSchema,
  validateStack: (args, reportViolation) => {
    const { roleLabel, documentsRole } = configOf(documentsBucketSchema, args);
    for (const notification of ofTypes(args.resources, [TYPES.notification])) {
      const on = bucketOf(notification, args.resources);
      if (on === undefined) continue;
      const bucket = on.bucket;
      const role = bucket
        ? peek(() => propsOf<gcp.storage.BucketState>(bucket).labels?.[roleLabel])
        : undefined;
      if (role?.known && role.value === documentsRole) continue;
      const what = !bucket
        ? 'which is not a bucket of this stack'
        : role?.known
          ? `labelled ${roleLabel}: ${String(role.value ?? 'nothing')}`
          : `whose ${roleLabel} label is unknown until the update runs`;
      reportViolation(
        `Notification ${describe(notification)} is on ${on.label}, ${what}. Only the documents bucket (labelled ${roleLabel}: ${documentsRole}) may feed the pipeline: remove this notification, or put it on the documents bucket.`,
        notification.urn,
      );
    }
  },
};

/**
 * The topic a bucket notification publishes to must take the publish from wherever Cloud Storage
 * sends it. With `messageStoragePolicy.enforceInTransit`, Pub/Sub rejects with FAILED_PRECONDITION
 * a publish received in a region the policy does not allow, and the region Cloud Storage publishes
 * a bucket's notifications from is undocumented (for the EU multi-region, any of its regions): every
 * upload could be refused, with no error anywhere the stack can see. The allowed regions still bind
 * where messages are stored at rest (docs/deploy.md, "Residency").
 */
export const notifiedTopicTakesPublishes: StackValidationPolicy = {
  name: 'notified-topic-takes-publishes',
  description:
    'A topic that a bucket notification publishes to does not enforce its message storage policy in transit: a publish from an undocumented region would be refused and the upload lost.',
  enforcementLevel: 'mandatory',
  validateStack: (args, reportViolation) => {
    for (const notification of ofTypes(args.resources, [TYPES.notification])) {
      for (const topic of propertySources(notification, 'topic', [TYPES.topic])) {
        const enforced = peek(
          () => propsOf<gcp.pubsub.TopicState>(topic).messageStoragePolicy?.enforceInTransit,
        );
        if (!enforced.known || enforced.value === true) {
          reportViolation(
            `Topic '${topic.name}' receives the notifications of ${describe(notification)} and ${enforced.known ? 'enforces' : 'may enforce (unknown until the update runs)'} its message storage policy in transit: Pub/Sub refuses a publish received outside the allowed regions, and Cloud Storage does not document the region it publishes from, so uploads could be lost in silence. Set messageStoragePolicy.enforceInTransit: false (keep allowedPersistenceRegions for storage at rest).`,
            topic.urn,
          );
        }
      }
    }
  },
};
