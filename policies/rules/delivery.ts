/**
 * How Pub/Sub delivers to the worker. A push subscription without a token lets anyone call
 * the worker; without a dead-letter policy a poison message is retried for the whole retention;
 * without a retry policy nacks come back immediately; an ack deadline below the worker's timeout
 * makes Pub/Sub redeliver a message that is still being processed; and a dead-letter topic nobody
 * subscribes to drops every dead letter.
 */
import type * as gcp from '@pulumi/gcp';
import type { PolicyResource, ResourceValidationPolicy, StackValidationPolicy } from '@pulumi/policy';
import { DELIVERY_DEFAULTS } from '../../worker/src/contract/settings';
import {
  configOf,
  describe,
  isSet,
  knownString,
  ofTypes,
  peek,
  propertySources,
  propsOf,
  shortName,
} from './support';
import { RUN_SERVICE_TYPES, TYPES } from './types';

/** Pub/Sub's ack deadline when a subscription sets none. */
const PUBSUB_DEFAULT_ACK_DEADLINE_SECONDS = 10;
/** Cloud Run's request timeout when a service sets none. */
const CLOUD_RUN_DEFAULT_TIMEOUT_SECONDS = 300;

/** Whether a subscription pushes (its pushConfig is set); pull subscriptions are out of scope here. */
function isPush(subscription: { props: Record<string, unknown> }): boolean {
  return isSet(() => subscriptionProps(subscription).pushConfig);
}

function subscriptionProps(resource: { props: Record<string, unknown> }) {
  return propsOf<gcp.pubsub.SubscriptionState>(resource);
}

/**
 * Per subscription: a push subscription carries an OIDC token, a dead-letter policy and a
 * retry policy. Each missing piece is its own violation, so each fix is obvious.
 */
export const pushSubscriptionDelivery: ResourceValidationPolicy = {
  name: 'push-subscription-delivery',
  description:
    'Push subscriptions authenticate with an OIDC token and have a dead-letter policy and a retry policy.',
  enforcementLevel: 'mandatory',
  validateResource: (args, reportViolation) => {
    if (args.type !== TYPES.subscription || !isPush(args)) return;
    const props = subscriptionProps(args);
    if (!isSet(() => props.pushConfig?.oidcToken)) {
      reportViolation(
        `Push subscription '${args.name}' sends no OIDC token, so the worker cannot tell Pub/Sub from anyone else. Set pushConfig.oidcToken.serviceAccountEmail to the push service account (the one granted roles/run.invoker on the worker).`,
      );
    }
    if (!isSet(() => props.deadLetterPolicy) || !isSet(() => props.deadLetterPolicy?.deadLetterTopic)) {
      reportViolation(
        `Push subscription '${args.name}' has no dead-letter policy: a message that always fails is retried for the whole retention period and never set aside. Set deadLetterPolicy { deadLetterTopic, maxDeliveryAttempts: ${DELIVERY_DEFAULTS.maxDeliveryAttempts} }.`,
      );
    }
    if (!isSet(() => props.retryPolicy)) {
      reportViolation(
        `Push subscription '${args.name}' has no retry policy, so a nacked message comes back at once. Set retryPolicy { minimumBackoff: '${DELIVERY_DEFAULTS.minRetryBackoffSeconds}s', maximumBackoff: '${DELIVERY_DEFAULTS.maxRetryBackoffSeconds}s' }.`,
      );
    }
  },
};

/** Seconds of a duration string like `"90s"` or `"1.5s"`; undefined when it has another shape. */
export function durationSeconds(duration: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)s$/.exec(duration.trim());
  return match?.[1] === undefined ? undefined : Number(match[1]);
}

/** The request timeout of a Cloud Run service in seconds, or why it cannot be read. */
function serviceTimeoutSeconds(service: PolicyResource): { seconds: number } | { problem: string } {
  if (service.type === TYPES.runV1Service) {
    const value = peek(() => propsOf<gcp.cloudrun.ServiceState>(service).template?.spec?.timeoutSeconds);
    if (!value.known) return { problem: 'its timeout is unknown until the update runs' };
    return { seconds: typeof value.value === 'number' ? value.value : CLOUD_RUN_DEFAULT_TIMEOUT_SECONDS };
  }
  const value = peek(() => propsOf<gcp.cloudrunv2.ServiceState>(service).template?.timeout);
  if (!value.known) return { problem: 'its timeout is unknown until the update runs' };
  if (value.value === undefined || value.value === null)
    return { seconds: CLOUD_RUN_DEFAULT_TIMEOUT_SECONDS };
  const seconds = typeof value.value === 'string' ? durationSeconds(value.value) : undefined;
  return seconds === undefined
    ? { problem: `its timeout '${String(value.value)}' is not a duration` }
    : { seconds };
}

/**
 * The Cloud Run service a push subscription delivers to: the service its pushEndpoint is computed
 * from (reliable even when the URL is unknown), else the service whose known URL the endpoint starts with.
 */
function targetService(subscription: PolicyResource, services: PolicyResource[]): PolicyResource | undefined {
  const sources = propertySources(subscription, 'pushConfig', RUN_SERVICE_TYPES);
  if (sources.length === 1) return sources[0];
  const endpoint = knownString(() => subscriptionProps(subscription).pushConfig?.pushEndpoint);
  if (endpoint === undefined) return undefined;
  return services.find((s) => {
    const uri = knownString(() => propsOf<gcp.cloudrunv2.ServiceState>(s).uri);
    return uri !== undefined && uri.length > 0 && endpoint.startsWith(uri);
  });
}

const ackDeadlineSchema = {
  properties: {
    marginSeconds: {
      type: 'integer' as const,
      default: DELIVERY_DEFAULTS.ackDeadlineMarginSeconds,
      description: 'Seconds the ack deadline must stay above the target service timeout.',
    },
  },
};

/**
 * Across resources: for push, the ack deadline is also the request timeout. If the worker
 * may run longer than the deadline, Pub/Sub redelivers a message that is still being processed.
 */
export const ackDeadlineCoversWorkerTimeout: StackValidationPolicy = {
  name: 'ack-deadline-covers-worker-timeout',
  description:
    "A push subscription's ack deadline is at least the target Cloud Run service's request timeout plus a margin.",
  enforcementLevel: 'mandatory',
  configSchema: ackDeadlineSchema,
  validateStack: (args, reportViolation) => {
    const { marginSeconds } = configOf(ackDeadlineSchema, args);
    const services = ofTypes(args.resources, RUN_SERVICE_TYPES);
    for (const subscription of ofTypes(args.resources, [TYPES.subscription]).filter(isPush)) {
      const service = targetService(subscription, services);
      if (!service) {
        reportViolation(
          `Cannot tell which Cloud Run service push subscription ${describe(subscription)} delivers to, so its ack deadline cannot be checked against the service's timeout. Build pushConfig.pushEndpoint from the service's uri output (for example pulumi.interpolate\`\${service.uri}/push\`).`,
          subscription.urn,
        );
        continue;
      }
      const ack = peek(() => subscriptionProps(subscription).ackDeadlineSeconds);
      const timeout = serviceTimeoutSeconds(service);
      if (!ack.known || (ack.value !== undefined && typeof ack.value !== 'number') || 'problem' in timeout) {
        const why =
          'problem' in timeout
            ? `service '${service.name}': ${timeout.problem}`
            : 'the ack deadline is unknown';
        reportViolation(
          `Cannot compare the ack deadline of push subscription '${subscription.name}' with the timeout of ${why}. Set ackDeadlineSeconds and the service timeout from configuration (literals), not from other resources' outputs.`,
          subscription.urn,
        );
        continue;
      }
      const ackSeconds = typeof ack.value === 'number' ? ack.value : PUBSUB_DEFAULT_ACK_DEADLINE_SECONDS;
      if (ackSeconds < timeout.seconds + marginSeconds) {
        reportViolation(
          `Push subscription '${subscription.name}' has an ack deadline of ${ackSeconds}s but service '${service.name}' may take ${timeout.seconds}s: Pub/Sub would redeliver messages that are still being processed. Raise ackDeadlineSeconds to at least ${timeout.seconds + marginSeconds} (timeout + ${marginSeconds}s margin, at most 600) or lower the service timeout.`,
          subscription.urn,
        );
      }
    }
  },
};

/** Whether a subscription reads from a topic, judged by dependency first, then by known names. */
function subscribes(subscription: PolicyResource, topic: { urn?: string; names: string[] }): boolean {
  const sources = propertySources(subscription, 'topic', [TYPES.topic]);
  if (topic.urn !== undefined && sources.some((s) => s.urn === topic.urn)) return true;
  const value = knownString(() => subscriptionProps(subscription).topic);
  return value !== undefined && topic.names.includes(shortName(value));
}

/**
 * Across resources: a dead-letter topic nobody subscribes to loses every dead letter, since
 * Pub/Sub keeps messages only for subscriptions that exist when they are published.
 */
export const deadLetterTopicSubscribed: StackValidationPolicy = {
  name: 'dead-letter-topic-subscribed',
  description: 'Every dead-letter topic has a subscription, otherwise dead-lettered messages are lost.',
  enforcementLevel: 'mandatory',
  validateStack: (args, reportViolation) => {
    const subscriptions = ofTypes(args.resources, [TYPES.subscription]);
    for (const subscription of subscriptions) {
      if (!isSet(() => subscriptionProps(subscription).deadLetterPolicy)) continue;
      const sources = propertySources(subscription, 'deadLetterPolicy', [TYPES.topic]);
      const deadLetterTopic = peek(() => subscriptionProps(subscription).deadLetterPolicy?.deadLetterTopic);
      let topic: { urn?: string; names: string[]; label: string } | undefined;
      if (sources.length === 1 && sources[0]) {
        const source = sources[0];
        const topicProps = propsOf<gcp.pubsub.TopicState>(source);
        const names = [knownString(() => topicProps.name), knownString(() => source.props.id)]
          .filter((n): n is string => n !== undefined)
          .map(shortName);
        topic = { urn: source.urn, names, label: `'${source.name}'` };
      } else if (deadLetterTopic.known && typeof deadLetterTopic.value === 'string') {
        topic = { names: [shortName(deadLetterTopic.value)], label: `'${deadLetterTopic.value}'` };
      }
      if (!topic) {
        reportViolation(
          `Cannot tell which topic subscription '${subscription.name}' dead-letters to: its deadLetterTopic is unknown and comes from no topic of this stack. Create the dead-letter topic in this stack and pass its id.`,
          subscription.urn,
        );
        continue;
      }
      const found = topic;
      if (!subscriptions.some((s) => s !== subscription && subscribes(s, found))) {
        reportViolation(
          `Dead-letter topic ${topic.label} of subscription '${subscription.name}' has no subscription, so every dead-lettered message is dropped. Add a pull subscription on it that never expires (expirationPolicy { ttl: '' }) with the longest retention (messageRetentionDuration '604800s').`,
          subscription.urn,
        );
      }
    }
  },
};
