import { PubSub, type Topic, v1 } from '@google-cloud/pubsub';

/**
 * docline's one Pub/Sub client for the local tools and the cloud tools: publishing, pulling and
 * administering topics and subscriptions all go through `@google-cloud/pubsub`. It speaks to the
 * emulator when given its address (or through PUBSUB_EMULATOR_HOST, which the library reads) and to
 * the real service with Application Default Credentials otherwise. The resource shapes are the
 * service's own, so what the local pipeline creates mirrors what the Pulumi stack declares.
 *
 * Where the library's high-level surface does not fit, the library's own generated v1 client is
 * used: the tools need a synchronous pull that returns at once with what is there (the check and
 * `npm run dlq` read a subscription and stop), and an immediate nack of leased messages, which the
 * streaming `Subscription` API (long-lived, flow-controlled) does not offer.
 */

export interface PushConfig {
  pushEndpoint: string;
}

/** A subscription's settings, durations as `"<seconds>s"` strings (the REST/JSON form). */
export interface SubscriptionSpec {
  topic: string;
  pushConfig?: PushConfig;
  ackDeadlineSeconds?: number;
  retryPolicy?: { minimumBackoff: string; maximumBackoff: string };
  deadLetterPolicy?: { deadLetterTopic: string; maxDeliveryAttempts: number };
  messageRetentionDuration?: string;
  /** Acknowledged messages stay, for `seek`. */
  retainAckedMessages?: boolean;
  /** `{}` (no ttl) means the subscription never expires. */
  expirationPolicy?: { ttl?: string };
  filter?: string;
}

export interface OutgoingMessage {
  /** Raw payload. */
  data: string | Buffer;
  attributes?: Record<string, string>;
}

/** A pulled message, as the REST surface shows it (data base64, publishTime RFC 3339). */
export interface ReceivedMessage {
  ackId: string;
  deliveryAttempt?: number;
  message: {
    data?: string;
    attributes?: Record<string, string>;
    messageId: string;
    publishTime: string;
  };
}

/** gRPC status codes the tools treat as expected. */
const ALREADY_EXISTS = 6;
const NOT_FOUND = 5;
const grpcCode = (error: unknown) => (error as { code?: number }).code;

/** `"600s"` → a protobuf Duration. */
function duration(text: string | undefined): { seconds: number; nanos: number } | undefined {
  if (text === undefined) return undefined;
  const m = /^(\d+(?:\.\d+)?)s$/.exec(text);
  if (!m) throw new Error(`not a duration in seconds: ${text}`);
  const seconds = Number(m[1]);
  return { seconds: Math.trunc(seconds), nanos: Math.round((seconds % 1) * 1e9) };
}

export class PubSubClient {
  readonly pubsub: PubSub;
  private subscriber: Promise<v1.SubscriberClient> | undefined;
  private readonly topics = new Map<string, Topic>();

  /**
   * @param endpoint the emulator's `http://HOST:PORT` or `HOST:PORT`; undefined: PUBSUB_EMULATOR_HOST
   *   if set, else the real service with Application Default Credentials.
   * @param projectId the project that owns topics and subscriptions.
   */
  constructor(
    endpoint: string | undefined,
    readonly projectId: string,
  ) {
    const apiEndpoint = endpoint?.replace(/^https?:\/\//, '');
    this.pubsub = new PubSub({
      projectId,
      // The universe domain given: otherwise the auth library probes the GCE metadata server for it,
      // which fails (with a warning) on a machine outside Google Cloud.
      ...(apiEndpoint ? { apiEndpoint, emulatorMode: true, universeDomain: 'googleapis.com' } : {}),
    });
  }

  topicPath(topic: string): string {
    return topic.startsWith('projects/') ? topic : `projects/${this.projectId}/topics/${topic}`;
  }

  subscriptionPath(subscription: string): string {
    return subscription.startsWith('projects/')
      ? subscription
      : `projects/${this.projectId}/subscriptions/${subscription}`;
  }

  /** The library's Topic, with batching suited to the tools (flushes within 10 ms). */
  topic(topic: string): Topic {
    const name = this.topicPath(topic);
    let t = this.topics.get(name);
    if (!t) {
      t = this.pubsub.topic(name, { batching: { maxMessages: 1000, maxMilliseconds: 10 } });
      this.topics.set(name, t);
    }
    return t;
  }

  /** Creates the topic; an existing topic is fine. */
  async ensureTopic(topic: string): Promise<void> {
    try {
      await this.pubsub.createTopic(this.topicPath(topic));
    } catch (error) {
      if (grpcCode(error) !== ALREADY_EXISTS) throw error;
    }
  }

  /** Creates the subscription; an existing one is deleted and created again with exactly this spec. */
  async ensureSubscription(subscription: string, spec: SubscriptionSpec): Promise<void> {
    const name = this.subscriptionPath(subscription);
    const options = {
      ...(spec.pushConfig ? { pushConfig: spec.pushConfig } : {}),
      ...(spec.ackDeadlineSeconds !== undefined ? { ackDeadlineSeconds: spec.ackDeadlineSeconds } : {}),
      ...(spec.retryPolicy
        ? {
            retryPolicy: {
              minimumBackoff: duration(spec.retryPolicy.minimumBackoff),
              maximumBackoff: duration(spec.retryPolicy.maximumBackoff),
            },
          }
        : {}),
      ...(spec.deadLetterPolicy
        ? {
            deadLetterPolicy: {
              deadLetterTopic: this.topicPath(spec.deadLetterPolicy.deadLetterTopic),
              maxDeliveryAttempts: spec.deadLetterPolicy.maxDeliveryAttempts,
            },
          }
        : {}),
      ...(spec.messageRetentionDuration
        ? { messageRetentionDuration: duration(spec.messageRetentionDuration) }
        : {}),
      ...(spec.expirationPolicy
        ? { expirationPolicy: spec.expirationPolicy.ttl ? { ttl: duration(spec.expirationPolicy.ttl) } : {} }
        : {}),
      ...(spec.retainAckedMessages !== undefined ? { retainAckedMessages: spec.retainAckedMessages } : {}),
      ...(spec.filter ? { filter: spec.filter } : {}),
    };
    const create = () => this.pubsub.createSubscription(this.topicPath(spec.topic), name, options);
    try {
      await create();
    } catch (error) {
      if (grpcCode(error) !== ALREADY_EXISTS) throw error;
      // Already there (an external emulator keeps state): recreate so the settings are exactly the shared ones.
      await this.pubsub.subscription(name).delete();
      await create();
    }
  }

  async deleteSubscription(subscription: string): Promise<void> {
    try {
      await this.pubsub.subscription(this.subscriptionPath(subscription)).delete();
    } catch (error) {
      if (grpcCode(error) !== NOT_FOUND) throw error;
    }
  }

  /** Publishes messages and returns their ids, in order. */
  async publish(topic: string, messages: OutgoingMessage[]): Promise<string[]> {
    const t = this.topic(topic);
    return Promise.all(
      messages.map((m) => t.publishMessage({ data: Buffer.from(m.data), attributes: m.attributes ?? {} })),
    );
  }

  private subscriberClient(): Promise<v1.SubscriberClient> {
    // The generated client, configured as the library configures its own (emulator address,
    // insecure channel, or ADC): see the class comment for why the streaming API does not fit.
    this.subscriber ??= this.pubsub.getClientConfig().then(
      (config) =>
        new v1.SubscriberClient({
          ...config,
          port: config.port === undefined ? undefined : Number(config.port),
        }),
    );
    return this.subscriber;
  }

  /** Pulls up to `maxMessages` messages without waiting for more. */
  async pull(subscription: string, maxMessages = 100): Promise<ReceivedMessage[]> {
    const client = await this.subscriberClient();
    const [response] = await client.pull({
      subscription: this.subscriptionPath(subscription),
      maxMessages,
      // Deprecated but honoured by the emulator and the service: the tools read what is there and stop.
      returnImmediately: true,
    });
    return (response.receivedMessages ?? []).map((m) => {
      const message = m.message ?? {};
      const seconds = Number(message.publishTime?.seconds ?? 0);
      const nanos = Number(message.publishTime?.nanos ?? 0);
      return {
        ackId: m.ackId ?? '',
        ...(m.deliveryAttempt ? { deliveryAttempt: m.deliveryAttempt } : {}),
        message: {
          data: message.data ? Buffer.from(message.data as Uint8Array).toString('base64') : undefined,
          attributes: { ...(message.attributes ?? {}) },
          messageId: message.messageId ?? '',
          publishTime: new Date(seconds * 1000 + Math.floor(nanos / 1e6)).toISOString(),
        },
      };
    });
  }

  async acknowledge(subscription: string, ackIds: string[]): Promise<void> {
    if (ackIds.length === 0) return;
    const client = await this.subscriberClient();
    await client.acknowledge({ subscription: this.subscriptionPath(subscription), ackIds });
  }

  /** Gives messages back at once (ack deadline 0), so that a later pull sees them again. */
  async nack(subscription: string, ackIds: string[]): Promise<void> {
    if (ackIds.length === 0) return;
    const client = await this.subscriberClient();
    await client.modifyAckDeadline({
      subscription: this.subscriptionPath(subscription),
      ackIds,
      ackDeadlineSeconds: 0,
    });
  }

  /** Flushes pending publishes and closes every channel (a tool's process can then exit). */
  async close(): Promise<void> {
    await Promise.all([...this.topics.values()].map((t) => t.flush()));
    if (this.subscriber) await (await this.subscriber).close();
    await this.pubsub.close();
  }
}
