/**
 * Advisory, live: the bucket's *actual* notification configs, listed through the Cloud
 * Storage API, against the ones the stack manages. A hand-made duplicate is the one failure no stack
 * policy can see; this rule reports it whenever credentials are present, and says why it was skipped
 * when they are not.
 */
import type * as gcp from '@pulumi/gcp';
import type { PolicyResource, StackValidationPolicy } from '@pulumi/policy';
import { type CredentialStatus, detectCredentials } from '../live/credentials';
import { GcsNotificationLister } from '../live/gcs-notification-lister';
import {
  deleteCommand,
  describeNotification,
  type ManagedNotification,
  type NotificationLister,
  unmanagedNotifications,
} from '../live/notifications';
import { configOf, knownString, ofTypes, peek, propertySources, propsOf } from './support';
import { TYPES } from './types';

interface LiveConfig {
  enabled: boolean;
  apiEndpoint: string;
  timeoutMs: number;
}

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

/** Builds the live notification check around its dependencies; {@link liveBucketNotifications} is the real one. */
export function liveBucketNotificationsPolicy(deps: LiveCheckDeps): StackValidationPolicy {
  return {
    name: 'live-bucket-notifications',
    description:
      'Advisory: the bucket has no notification that the stack does not manage (listed live through the Cloud Storage API).',
    enforcementLevel: 'advisory',
    configSchema: liveSchema,
    validateStack: async (args, reportViolation) => {
      const config = configOf<LiveConfig>(liveSchema, args);
      const notifications = ofTypes(args.resources, [TYPES.notification]);
      if (!config.enabled || notifications.length === 0) return;
      const apiEndpoint = config.apiEndpoint || undefined;
      const credentials = deps.credentials(apiEndpoint);
      if (!credentials.available) {
        reportViolation(
          `Live notification check skipped: ${credentials.why}. Run \`npm run check:notifications -- --bucket <bucket>\` with credentials after the deploy.`,
        );
        return;
      }
      const byBucket = new Map<string, PolicyResource[]>();
      for (const notification of notifications) {
        const bucket = bucketNameOf(notification);
        if (bucket === undefined) {
          reportViolation(
            `Live notification check skipped for '${notification.name}': its bucket's name is unknown until the update runs (the bucket is new). Run \`npm run check:notifications -- --bucket <bucket>\` after the deploy.`,
            notification.urn,
          );
          continue;
        }
        byBucket.set(bucket, [...(byBucket.get(bucket) ?? []), notification]);
      }
      const lister = deps.lister({ apiEndpoint, timeoutMs: config.timeoutMs });
      for (const [bucket, managed] of byBucket) {
        let actual: Awaited<ReturnType<NotificationLister['list']>>;
        try {
          actual = await lister.list(bucket);
        } catch (error) {
          reportViolation(
            `Live notification check could not list the notifications of bucket ${bucket} using ${credentials.how}: ${error instanceof Error ? error.message : String(error)}. The caller needs storage.buckets.get on the bucket.`,
          );
          continue;
        }
        for (const stray of unmanagedNotifications(actual, managed.map(managedOf))) {
          reportViolation(
            `Bucket ${bucket} has ${describeNotification(stray)}, which this stack does not manage. If it feeds the pipeline's topic every upload is processed and billed twice. Delete it (\`${deleteCommand(bucket, stray.id)}\`) or import it into the stack.`,
            managed[0]?.urn,
          );
        }
      }
    },
  };
}

/** The live notification check with the real Cloud Storage client and credential detection. */
export const liveBucketNotifications: StackValidationPolicy = liveBucketNotificationsPolicy(realDeps);
