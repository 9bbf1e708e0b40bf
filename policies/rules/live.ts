/**
 * Live: the bucket's *actual* notification configs, listed through the Cloud Storage API, against the
 * ones the stack manages. A hand-made duplicate (or a second stack's notification on the same bucket)
 * is the one failure no stack policy can see. Two policies share one listing:
 *  - `live-bucket-notifications` (mandatory) fails the preview when it *finds* a configuration the
 *    stack does not manage that publishes the pipeline's uploads to the pipeline's topic: every
 *    upload would be processed and billed twice;
 *  - `live-bucket-notifications-unchecked` (advisory) says when it could not look (no credentials,
 *    a bucket that does not exist yet, a listing refused) and reports unmanaged configurations that
 *    publish elsewhere, which double nothing in the pipeline.
 * Not being able to look never blocks: a first preview has no bucket to list.
 */
import type * as gcp from '@pulumi/gcp';
import type { PolicyResource, StackValidationPolicy } from '@pulumi/policy';
import { type CredentialStatus, detectCredentials } from '../live/credentials';
import { GcsNotificationLister } from '../live/gcs-notification-lister';
import {
  type BucketNotification,
  deleteCommand,
  describeNotification,
  feedsPipeline,
  type ManagedNotification,
  type NotificationLister,
  unmanagedNotifications,
} from '../live/notifications';
import { type ConfigOf, configOf, knownString, ofTypes, peek, propertySources, propsOf } from './support';
import { TYPES } from './types';

const liveSchema = {
  properties: {
    enabled: { type: 'boolean' as const, default: true, description: 'Run the live check at all.' },
    apiEndpoint: {
      type: 'string' as const,
      default: '',
      description: 'A Cloud Storage endpoint other than Google\u2019s (tests); empty for the real API.',
    },
    timeoutMs: { type: 'integer' as const, default: 15_000, description: 'Time limit of one listing.' },
  },
};

/** What the live rule needs from the outside world; tests pass their own. */
export interface LiveCheckDeps {
  /** Builds the lister for an endpoint (undefined: Google's). */
  lister(options: { apiEndpoint?: string; timeoutMs: number }): NotificationLister;
  /** Whether credentials are present, and how or why not. */
  credentials(apiEndpoint: string | undefined): CredentialStatus;
}

const realDeps: LiveCheckDeps = {
  lister: (options) => new GcsNotificationLister(options),
  credentials: (apiEndpoint) => detectCredentials(process.env, apiEndpoint),
};

/** A stack notification as the live comparison needs it. */
function managedOf(notification: PolicyResource): ManagedNotification {
  const props = propsOf<gcp.storage.NotificationState>(notification);
  const events = peek(() => props.eventTypes);
  const topic = knownString(() => props.topic);
  const format = knownString(() => props.payloadFormat);
  const id = knownString(() => props.notificationId);
  let eventTypes: ManagedNotification['eventTypes'];
  if (events.known) {
    eventTypes = Array.isArray(events.value) && events.value.length > 0 ? (events.value as string[]) : 'all';
  }
  return {
    ...(id ? { id } : {}),
    ...(topic ? { topic } : {}),
    ...(eventTypes ? { eventTypes } : {}),
    ...(format ? { payloadFormat: format } : {}),
  };
}

/** The bucket name a notification points at, when it is known (after the bucket exists). */
function bucketNameOf(notification: PolicyResource): string | undefined {
  const named = knownString(() => propsOf<gcp.storage.NotificationState>(notification).bucket);
  if (named) return named;
  const source = propertySources(notification, 'bucket', [TYPES.bucket])[0];
  return source ? knownString(() => propsOf<gcp.storage.BucketState>(source).name) : undefined;
}

/** One unmanaged configuration found on a bucket. */
interface Stray {
  readonly bucket: string;
  readonly notification: BucketNotification;
  /** Whether it publishes what the pipeline processes to the pipeline's topic. */
  readonly feeds: boolean;
  readonly urn: string | undefined;
}

/** What one look at the stack's buckets found: strays, and the reasons it could not look. */
interface LiveFindings {
  readonly strays: readonly Stray[];
  readonly unchecked: readonly { message: string; urn?: string }[];
}

/** The policy names: the mandatory finding and the advisory "could not look". */
export const LIVE_POLICY = 'live-bucket-notifications';
export const LIVE_UNCHECKED_POLICY = 'live-bucket-notifications-unchecked';

/** Lists the buckets of the stack's notifications once and sorts what it sees. */
async function look(
  resources: readonly PolicyResource[],
  config: ConfigOf<typeof liveSchema>,
  deps: LiveCheckDeps,
): Promise<LiveFindings> {
  const notifications = ofTypes(resources, [TYPES.notification]);
  if (!config.enabled || notifications.length === 0) return { strays: [], unchecked: [] };
  const apiEndpoint = config.apiEndpoint || undefined;
  const credentials = deps.credentials(apiEndpoint);
  if (!credentials.available) {
    return {
      strays: [],
      unchecked: [
        {
          message: `Live notification check skipped: ${credentials.why}. Run \`npm run check:notifications -- --bucket <bucket>\` with credentials after the deploy.`,
        },
      ],
    };
  }
  const unchecked: { message: string; urn?: string }[] = [];
  const byBucket = new Map<string, PolicyResource[]>();
  for (const notification of notifications) {
    const bucket = bucketNameOf(notification);
    if (bucket === undefined) {
      unchecked.push({
        message: `Live notification check skipped for '${notification.name}': its bucket's name is unknown until the update runs (the bucket is new). Run \`npm run check:notifications -- --bucket <bucket>\` after the deploy.`,
        urn: notification.urn,
      });
      continue;
    }
    byBucket.set(bucket, [...(byBucket.get(bucket) ?? []), notification]);
  }
  const strays: Stray[] = [];
  const lister = deps.lister({ apiEndpoint, timeoutMs: config.timeoutMs });
  for (const [bucket, managed] of byBucket) {
    let actual: BucketNotification[];
    try {
      actual = await lister.list(bucket);
    } catch (error) {
      unchecked.push({
        message: `Live notification check could not list the notifications of bucket ${bucket} using ${credentials.how}: ${error instanceof Error ? error.message : String(error)}. The caller needs storage.buckets.get on the bucket.`,
      });
      continue;
    }
    const managedNotifications = managed.map(managedOf);
    const topics = managedNotifications.map((m) => m.topic);
    for (const stray of unmanagedNotifications(actual, managedNotifications)) {
      // A managed topic still unknown cannot be told apart from the stray's: count it as the pipeline's.
      const feeds = topics.some((topic) => feedsPipeline(stray, topic));
      strays.push({ bucket, notification: stray, feeds, urn: managed[0]?.urn });
    }
  }
  return { strays, unchecked };
}

/**
 * Builds the two live notification policies around their dependencies (tests pass their own);
 * {@link liveBucketNotifications} and {@link liveBucketNotificationsUnchecked} are the real ones.
 * Each has its own configuration (same keys); set both to switch the check off.
 */
export function liveBucketNotificationsPolicies(
  deps: LiveCheckDeps,
): readonly [StackValidationPolicy, StackValidationPolicy] {
  // Each policy lists the buckets itself: the engine gives each its own arguments, and a listing is one
  // request per bucket.
  const configFor = (args: { getConfig<C extends object>(): C }) => configOf(liveSchema, args);
  const found: StackValidationPolicy = {
    name: LIVE_POLICY,
    description:
      'Mandatory: the bucket has no notification that the stack does not manage publishing uploads to the pipeline\u2019s topic (listed live through the Cloud Storage API).',
    enforcementLevel: 'mandatory',
    configSchema: liveSchema,
    validateStack: async (args, reportViolation) => {
      const { strays } = await look(args.resources, configFor(args), deps);
      for (const stray of strays.filter((s) => s.feeds)) {
        reportViolation(
          `Bucket ${stray.bucket} has ${describeNotification(stray.notification)}, which this stack does not manage and which publishes the pipeline's uploads to its topic: every upload would be processed and billed twice. Delete it (\`${deleteCommand(stray.bucket, stray.notification.id)}\`), or import it into the stack in place of the stack's own.`,
          stray.urn,
        );
      }
    },
  };
  const unchecked: StackValidationPolicy = {
    name: LIVE_UNCHECKED_POLICY,
    description:
      'Advisory: says when the live notification check could not look, and reports unmanaged notifications that publish elsewhere.',
    enforcementLevel: 'advisory',
    configSchema: liveSchema,
    validateStack: async (args, reportViolation) => {
      const { strays, unchecked: reasons } = await look(args.resources, configFor(args), deps);
      for (const reason of reasons) reportViolation(reason.message, reason.urn);
      for (const stray of strays.filter((s) => !s.feeds)) {
        reportViolation(
          `Bucket ${stray.bucket} has ${describeNotification(stray.notification)}, which this stack does not manage. It does not publish to the pipeline's topic, so it doubles nothing here; delete it if nobody uses it (\`${deleteCommand(stray.bucket, stray.notification.id)}\`).`,
          stray.urn,
        );
      }
    },
  };
  return [found, unchecked];
}

const [realFound, realUnchecked] = liveBucketNotificationsPolicies(realDeps);
/** Mandatory: a stray configuration found publishing to the pipeline's topic. */
export const liveBucketNotifications: StackValidationPolicy = realFound;
/** Advisory: the live check could not look, or found a stray publishing elsewhere. */
export const liveBucketNotificationsUnchecked: StackValidationPolicy = realUnchecked;
