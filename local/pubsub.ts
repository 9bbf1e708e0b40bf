/**
 * A small client for the Pub/Sub REST surface (v1), used against the emulator by the local
 * pipeline and the tests. It speaks the same resource shapes as the service, so what it creates
 * mirrors what the Pulumi stack declares.
 */

export interface PushConfig {
  pushEndpoint: string;
}

export interface SubscriptionSpec {
  topic: string;
  pushConfig?: PushConfig;
  ackDeadlineSeconds?: number;
  retryPolicy?: { minimumBackoff: string; maximumBackoff: string };
  deadLetterPolicy?: { deadLetterTopic: string; maxDeliveryAttempts: number };
  messageRetentionDuration?: string;
  /** `{}` (no ttl) means the subscription never expires. */
  expirationPolicy?: { ttl?: string };
  filter?: string;
}

export interface OutgoingMessage {
  /** Raw payload; it is base64-encoded on the wire. */
  data: string | Buffer;
  attributes?: Record<string, string>;
}

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

/** Raised when the Pub/Sub REST surface answers with an error status. */
export class PubSubRestError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
    this.name = 'PubSubRestError';
  }
}

export class PubSubRest {
  /**
   * @param baseUrl `http://HOST:PORT` of the emulator (or `https://pubsub.googleapis.com` with a token).
   * @param projectId the project that owns topics and subscriptions.
   */
  constructor(
    readonly baseUrl: string,
    readonly projectId: string,
    /** Returns an OAuth access token for the real service; the emulator needs none. */
    private readonly accessToken?: () => Promise<string>,
  ) {}

  topicPath(topic: string): string {
    return topic.startsWith('projects/') ? topic : `projects/${this.projectId}/topics/${topic}`;
  }

  subscriptionPath(subscription: string): string {
    return subscription.startsWith('projects/')
      ? subscription
      : `projects/${this.projectId}/subscriptions/${subscription}`;
  }

  private async call<T>(
    method: string,
    resource: string,
    body?: unknown,
    okStatuses: number[] = [],
  ): Promise<T> {
    const res = await fetch(`${this.baseUrl}/v1/${resource}`, {
      method,
      headers: {
        'content-type': 'application/json',
        ...(this.accessToken ? { authorization: `Bearer ${await this.accessToken()}` } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    if (!res.ok && !okStatuses.includes(res.status)) {
      throw new PubSubRestError(`${method} ${resource} failed with ${res.status}: ${text}`, res.status);
    }
    return (text ? JSON.parse(text) : {}) as T;
  }

  /** Creates the topic; an existing topic is fine (409 is ignored). */
  async ensureTopic(topic: string): Promise<void> {
    await this.call('PUT', this.topicPath(topic), {}, [409]);
  }

  /** Creates the subscription; an existing one is updated to the given spec. */
  async ensureSubscription(subscription: string, spec: SubscriptionSpec): Promise<void> {
    const name = this.subscriptionPath(subscription);
    const body = { ...spec, topic: this.topicPath(spec.topic) };
    try {
      await this.call('PUT', name, body);
    } catch (error) {
      if (!(error instanceof PubSubRestError) || error.status !== 409) throw error;
      // Already there (a restart keeps nothing in the emulator, but an external one may): delete and recreate
      // so that the settings are exactly the shared ones.
      await this.call('DELETE', name);
      await this.call('PUT', name, body);
    }
  }

  async deleteSubscription(subscription: string): Promise<void> {
    await this.call('DELETE', this.subscriptionPath(subscription), undefined, [404]);
  }

  async getSubscription(subscription: string): Promise<SubscriptionSpec & { name: string }> {
    return this.call('GET', this.subscriptionPath(subscription));
  }

  /** Publishes messages and returns their ids, in order. */
  async publish(topic: string, messages: OutgoingMessage[]): Promise<string[]> {
    const body = {
      messages: messages.map((m) => ({
        data: Buffer.from(m.data).toString('base64'),
        attributes: m.attributes ?? {},
      })),
    };
    const res = await this.call<{ messageIds: string[] }>('POST', `${this.topicPath(topic)}:publish`, body);
    return res.messageIds;
  }

  /** Pulls up to `maxMessages` messages without waiting for more. */
  async pull(subscription: string, maxMessages = 100): Promise<ReceivedMessage[]> {
    const res = await this.call<{ receivedMessages?: ReceivedMessage[] }>(
      'POST',
      `${this.subscriptionPath(subscription)}:pull`,
      { maxMessages, returnImmediately: true },
    );
    return res.receivedMessages ?? [];
  }

  async acknowledge(subscription: string, ackIds: string[]): Promise<void> {
    if (ackIds.length === 0) return;
    await this.call('POST', `${this.subscriptionPath(subscription)}:acknowledge`, { ackIds });
  }

  /** Gives messages back at once (ack deadline 0), so that a later pull sees them again. */
  async nack(subscription: string, ackIds: string[]): Promise<void> {
    if (ackIds.length === 0) return;
    await this.call('POST', `${this.subscriptionPath(subscription)}:modifyAckDeadline`, {
      ackIds,
      ackDeadlineSeconds: 0,
    });
  }
}
