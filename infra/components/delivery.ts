import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';
import {
  type DeliverySettings,
  deadLetterSubscriptionSettings,
  durationString,
} from '../../worker/src/contract/settings';
import {
  NOTIFICATION_PAYLOAD_FORMAT,
  NOTIFIED_EVENT_TYPE,
  PUSH_FILTER,
} from '../../worker/src/contract/storage';
import { DoclineComponent, type ProjectArgs, renamedChildAliases } from './component';
import { regionalStorage } from './document-bucket';
import { grantsSettled, guarded } from './lifecycle';

/** Arguments of {@link Delivery}. */
export interface DeliveryArgs extends ProjectArgs {
  /** The stack's region: where the dead-letter topic may store messages. */
  region: string;
  /**
   * The stack's deletionProtection: the engine refuses to replace or delete the subscriptions and the
   * dead-letter topic, whose messages are documents not yet recorded.
   */
  keepData: boolean;
  /** The topic the bucket announces uploads on. */
  topic: pulumi.Input<string>;
  /** The documents bucket's name output (keeps the notification tied to the bucket resource). */
  bucketName: pulumi.Input<string>;
  /**
   * Grants the notification needs besides the push subscription: the storage agent's publisher
   * grant. Cloud Storage checks it when the notification is created, so the notification also waits
   * for it to propagate.
   */
  notificationNeeds: pulumi.CustomResource[];
  /** What the push subscription needs besides its own grants: the push account's run.invoker grant. */
  pushNeeds: pulumi.Resource[];
  /** The worker's push endpoint (`https://…/push`). */
  pushEndpoint: pulumi.Input<string>;
  /** Audience of the push OIDC token; Cloud Run accepts it as one of the service's custom audiences. */
  audience: pulumi.Input<string>;
  /** The push service account: its email signs the token. */
  pushServiceAccountEmail: pulumi.Input<string>;
  /** The push service account's resource name (`projects/P/serviceAccounts/EMAIL`). */
  pushServiceAccountName: pulumi.Input<string>;
  /**
   * The name this component had when its notification was first created (`docline-<stack>-delivery`).
   * The notification keeps the URN it had under that name whatever the component is called now
   * ({@link renamedChildAliases}). Default: the component's own name.
   */
  stableName?: string;
  /** Ack deadline, retry, dead-letter and retention settings. */
  settings: pulumi.Input<
    Pick<
      DeliverySettings,
      | 'ackDeadlineSeconds'
      | 'minRetryBackoffSeconds'
      | 'maxRetryBackoffSeconds'
      | 'maxDeliveryAttempts'
      | 'messageRetentionSeconds'
      | 'deadLetterRetentionSeconds'
    >
  >;
}

/** The type token of {@link Delivery}; part of the notification's URN, so never changed. */
export const DELIVERY_TYPE = 'docline:index:Delivery';

/**
 * Everything between the bucket and the worker: the push subscription (OIDC, ack deadline, retry,
 * dead-lettering, FINALIZE filter), the dead-letter topic with a pull subscription that never
 * expires, the grants the Pub/Sub service agent needs, each on one resource only, and, last, the
 * bucket's one notification (OBJECT_FINALIZE only, JSON_API_V1). A second notification would
 * publish every upload twice, each copy with its own messageId, so this is the only place that
 * creates one.
 *
 * Order, as dependencies the engine sees: the Pub/Sub service agent (created by a ServiceIdentity,
 * since it may not exist before the API is first used and IAM refuses grants to it) → its grants;
 * token-creator grant and run.invoker grant → push subscription → notification. Early pushes would
 * otherwise get 401/403, and uploads made before the subscription exists would be dropped by the topic.
 *
 * Replacement: the notification is deleted before its replacement is created (every field of it
 * forces a replacement, and two notifications at once would publish every upload twice); the
 * uploads made in the seconds between have no message, and reconcile finds them. The subscriptions
 * and the dead-letter topic are protected in a stack that keeps its data: a change that would
 * replace them stops the `up` (docs/deploy.md, "Lifecycle").
 */
export class Delivery extends DoclineComponent {
  readonly subscription: gcp.pubsub.Subscription;
  readonly notification: gcp.storage.Notification;
  readonly deadLetterTopic: gcp.pubsub.Topic;
  readonly deadLetterSubscription: gcp.pubsub.Subscription;

  constructor(name: string, args: DeliveryArgs, opts?: pulumi.ComponentResourceOptions) {
    super(DELIVERY_TYPE, name, opts);
    const settings = pulumi.output(args.settings);
    // The Pub/Sub service agent (`service-NUMBER@gcp-sa-pubsub.iam.gserviceaccount.com`) is created
    // on first use of the API; a grant to it before then fails with "service account does not
    // exist", which the provider does not retry. Its grants take `member` from it.
    const pubsubAgent = new gcp.projects.ServiceIdentity(
      `${name}-pubsub-agent`,
      { project: args.project, service: 'pubsub.googleapis.com' },
      this.child,
    ).member;
    const keep = guarded(args.keepData);

    // Dead letters stay replayable (subscription and topic seek) only as long as the redelivery window
    // still sees their rows: settingsProblems binds deadLetterRetentionSeconds to redeliveryWindowDays.
    const deadLetters = settings.apply(deadLetterSubscriptionSettings);
    this.deadLetterTopic = new gcp.pubsub.Topic(
      `${name}-dead-letters`,
      {
        project: args.project,
        messageRetentionDuration: deadLetters.messageRetentionDuration,
        messageStoragePolicy: regionalStorage(args.region),
      },
      { ...this.child, ...keep },
    );
    // A dead-letter topic without a subscription drops what it receives; this one keeps it.
    this.deadLetterSubscription = new gcp.pubsub.Subscription(
      `${name}-dead-letters`,
      {
        project: args.project,
        topic: this.deadLetterTopic.id,
        ackDeadlineSeconds: deadLetters.ackDeadlineSeconds,
        messageRetentionDuration: deadLetters.messageRetentionDuration,
        retainAckedMessages: deadLetters.retainAckedMessages,
        expirationPolicy: { ttl: '' },
      },
      { ...this.child, ...keep },
    );

    // The Pub/Sub service agent signs the push tokens; it may do so for the push account only,
    // never for every account of the project.
    const tokenCreatorGrant = new gcp.serviceaccount.IAMMember(
      `${name}-push-token-creator`,
      {
        serviceAccountId: args.pushServiceAccountName,
        role: 'roles/iam.serviceAccountTokenCreator',
        member: pubsubAgent,
      },
      this.child,
    );

    this.subscription = new gcp.pubsub.Subscription(
      `${name}-push`,
      {
        project: args.project,
        topic: args.topic,
        filter: PUSH_FILTER,
        ackDeadlineSeconds: settings.ackDeadlineSeconds,
        messageRetentionDuration: settings.apply((s) => durationString(s.messageRetentionSeconds)),
        retryPolicy: {
          minimumBackoff: settings.apply((s) => durationString(s.minRetryBackoffSeconds)),
          maximumBackoff: settings.apply((s) => durationString(s.maxRetryBackoffSeconds)),
        },
        deadLetterPolicy: {
          deadLetterTopic: this.deadLetterTopic.id,
          maxDeliveryAttempts: settings.maxDeliveryAttempts,
        },
        pushConfig: {
          pushEndpoint: args.pushEndpoint,
          oidcToken: { serviceAccountEmail: args.pushServiceAccountEmail, audience: args.audience },
        },
        // Push subscriptions expire after 31 idle days by default; a quiet month must not delete it.
        expirationPolicy: { ttl: '' },
      },
      // Pushes start as soon as it exists: the token must be signable and the service invokable by then.
      { ...this.childAfter(tokenCreatorGrant, ...args.pushNeeds), ...keep },
    );

    // Without these two grants dead-lettering silently does nothing.
    new gcp.pubsub.TopicIAMMember(
      `${name}-dead-letter-publisher`,
      {
        project: args.project,
        topic: this.deadLetterTopic.name,
        role: 'roles/pubsub.publisher',
        member: pubsubAgent,
      },
      this.child,
    );
    new gcp.pubsub.SubscriptionIAMMember(
      `${name}-push-subscriber`,
      {
        project: args.project,
        subscription: this.subscription.name,
        role: 'roles/pubsub.subscriber',
        member: pubsubAgent,
      },
      this.child,
    );
    const publisherPropagated = grantsSettled(
      `${name}-publisher-grant-settle`,
      args.notificationNeeds,
      this.child,
    );
    this.notification = new gcp.storage.Notification(
      `${name}-notification`,
      {
        // The bucket's name output (not a string) keeps the dependency on the bucket resource, which
        // the policy pack uses to count notifications per bucket even while the name is unknown.
        bucket: args.bucketName,
        topic: args.topic,
        payloadFormat: NOTIFICATION_PAYLOAD_FORMAT,
        eventTypes: [NOTIFIED_EVENT_TYPE],
      },
      // Announcing starts only once a subscription receives: a topic without one drops messages.
      // Replaced delete-first: never two notifications on the bucket, not even during an update. A
      // rename is no replacement, so deleteBeforeReplace would not apply: the alias keeps its URN.
      {
        ...this.childAfter(this.subscription, ...args.notificationNeeds, publisherPropagated),
        deleteBeforeReplace: true,
        aliases: renamedChildAliases(name, args.stableName, DELIVERY_TYPE, (c) => `${c}-notification`),
      },
    );

    this.registerOutputs({
      notificationId: this.notification.notificationId,
      subscriptionName: this.subscription.name,
      deadLetterTopicName: this.deadLetterTopic.name,
      deadLetterSubscriptionName: this.deadLetterSubscription.name,
    });
  }
}
