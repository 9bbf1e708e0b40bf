import type { DeliverySettings } from '../worker/src/contract/settings';
import type { SimClock, SimTimer } from './time';

/**
 * A Pub/Sub push subscription, in process and in simulated time (the emulator neither scales time
 * nor does push backoff). What it holds to, from the push documentation:
 *
 * - acks are 102, 200, 201, 202 and 204; any other answer, or none within the ack deadline, is a nack;
 * - a nacked message comes back after the retry policy's backoff, exponential per message between
 *   the minimum and the maximum; after `maxDeliveryAttempts` deliveries it goes to the dead letter;
 *   with a dead-letter policy every push carries `deliveryAttempt`;
 * - flow control: the window of outstanding pushes starts small (single digit), grows on every ack
 *   (so it doubles every round trip) and linearly past 3,000 outstanding, and shrinks on a nack;
 * - push backoff: nacks pause the *whole* subscription for 100 ms up to 60 s.
 *
 * Where the documentation gives no number, the choice is written in bench/README.md (assumptions).
 */

export interface PushSubscriptionOptions {
  time: SimClock;
  settings: Pick<
    DeliverySettings,
    'ackDeadlineSeconds' | 'minRetryBackoffSeconds' | 'maxRetryBackoffSeconds' | 'maxDeliveryAttempts'
  >;
  /** Sends one push body; resolves with the HTTP status (0 when no answer came). */
  endpoint: (body: string) => Promise<number>;
  subscription?: string;
  /** Outstanding pushes allowed at first (default 5: "a small single-digit window"). */
  initialWindow?: number;
  /** Sees every answer (of first deliveries and of redelivered copies), for the fault simulator's record. */
  onAnswer?: (messageId: string, status: number) => void;
  /**
   * How the window of outstanding pushes moves (sim/models/push-window.ts); by default it grows on
   * every ack whatever the latency (+1 below {@link LINEAR_ABOVE}, +1/window past it) and halves on a nack.
   * Push backoff after nacks is the subscription's own, the same under every window model.
   */
  windowModel?: PushWindowModel;
}

/** A model of push flow control: the window after an ack (with its push's latency) and after a nack. */
export interface PushWindowModel {
  readonly name: string;
  readonly initial: number;
  afterAck(window: number, latencyMs: number): number;
  afterNack(window: number): number;
}

export interface PushStats {
  published: number;
  pushes: number;
  nacks: number;
  deadLetters: number;
  maxOutstanding: number;
}

interface Message {
  id: string;
  data: string;
  attributes: Record<string, string>;
  publishTime: string;
  attempts: number;
  state: 'ready' | 'backoff' | 'inflight' | 'acked' | 'dead';
}

const ACK_STATUSES = new Set([102, 200, 201, 202, 204]);
/** Past this many outstanding pushes the window grows linearly. */
const LINEAR_ABOVE = 3_000;
/** The push backoff's bounds: the pause after a first nack, and the longest. */
const MIN_PUSH_BACKOFF_MS = 100;
const MAX_PUSH_BACKOFF_MS = 60_000;

export class PushSubscription {
  readonly stats: PushStats = {
    published: 0,
    pushes: 0,
    nacks: 0,
    deadLetters: 0,
    maxOutstanding: 0,
  };
  private readonly options: Required<Omit<PushSubscriptionOptions, 'onAnswer' | 'windowModel'>> &
    Pick<PushSubscriptionOptions, 'onAnswer' | 'windowModel'>;
  private readonly messages = new Map<string, Message>();
  private readonly ready: Message[] = [];
  private readyHead = 0;
  private outstanding = 0;
  private windowSize: number;
  private backoffLevel = 0;
  private pausedUntilMs = 0;
  private pauseTimer: SimTimer | undefined;
  private readonly timers = new Set<SimTimer>();
  private settled = 0;
  private closed = false;
  private nextId = 1;
  /** Dead letters already taken off the dead-letter subscription (acknowledged there). */
  private readonly replayed = new Set<string>();

  constructor(options: PushSubscriptionOptions) {
    this.options = {
      subscription: 'projects/docline-bench/subscriptions/docline-push',
      initialWindow: 5,
      ...options,
    };
    this.windowSize = this.options.windowModel?.initial ?? this.options.initialWindow;
  }

  /** Outstanding pushes allowed now. */
  get window(): number {
    return Math.floor(this.windowSize);
  }

  /** Whether every published message is acked or dead-lettered. */
  get idle(): boolean {
    return this.settled === this.stats.published;
  }

  /**
   * The messages in the dead-letter topic's subscription (dead-lettered, not yet taken off it by
   * {@link takeDeadLetters}), each with its data and attributes.
   */
  takeDeadLetters(): Array<{ id: string; data: string; attributes: Record<string, string> }> {
    const letters = [...this.messages.values()].filter((m) => m.state === 'dead' && !this.replayed.has(m.id));
    for (const m of letters) this.replayed.add(m.id);
    return letters.map((m) => ({ id: m.id, data: m.data, attributes: { ...m.attributes } }));
  }

  /** Publishes one message now; returns its messageId. */
  publish(data: string, attributes: Record<string, string>): string {
    const id = String(this.nextId++);
    const message: Message = {
      id,
      data,
      attributes,
      publishTime: this.options.time.clock.now().toISOString(),
      attempts: 0,
      state: 'ready',
    };
    this.messages.set(id, message);
    this.stats.published++;
    this.ready.push(message);
    this.pump();
    return id;
  }

  /**
   * Pushes one more copy of a message whose delivery is still running, as Pub/Sub does when the
   * ack deadline passes or (the emulator) while the first request is still open. An ack from either
   * copy acks the message; the retries stay with the first copy. False when it is not in flight.
   */
  redeliver(id: string): boolean {
    const message = this.messages.get(id);
    if (message?.state !== 'inflight' || this.closed) return false;
    this.stats.pushes++;
    this.options.endpoint(this.body(message)).then(
      (status) => this.copyAnswered(message, status),
      () => this.copyAnswered(message, 0),
    );
    return true;
  }

  /**
   * Pushes one more copy of a message already acked: Pub/Sub's delivery is at least once, and an
   * ack can be lost or come too late, so an acked message may be pushed again. Its answer is seen
   * (`onAnswer`) and changes nothing. False when the message is not acked.
   */
  redeliverAcked(id: string): boolean {
    const message = this.messages.get(id);
    if (message?.state !== 'acked' || this.closed) return false;
    this.stats.pushes++;
    const seen = (status: number) => this.options.onAnswer?.(message.id, status);
    this.options.endpoint(this.body(message)).then(seen, () => seen(0));
    return true;
  }

  private copyAnswered(message: Message, status: number): void {
    this.options.onAnswer?.(message.id, status);
    if (!ACK_STATUSES.has(status) || message.state === 'acked' || message.state === 'dead') return;
    if (message.state === 'ready') {
      // Queued for a retry: it leaves the queue acked.
      const at = this.ready.indexOf(message, this.readyHead);
      if (at >= 0) this.ready.splice(at, 1);
    }
    message.state = 'acked';
    this.settled++;
  }

  /** Stops delivering and clears every timer. */
  close(): void {
    this.closed = true;
    for (const t of this.timers) t.cancel();
    this.timers.clear();
    this.pauseTimer?.cancel();
  }

  private pump(): void {
    if (this.closed) return;
    const now = this.options.time.nowMs();
    if (now < this.pausedUntilMs) {
      if (!this.pauseTimer) {
        this.pauseTimer = this.options.time.after(this.pausedUntilMs - now, () => {
          this.pauseTimer = undefined;
          this.pump();
        });
      }
      return;
    }
    while (this.outstanding < this.window && this.readyHead < this.ready.length) {
      const message = this.ready[this.readyHead++]!;
      if (this.readyHead > 4096) {
        this.ready.splice(0, this.readyHead);
        this.readyHead = 0;
      }
      this.deliver(message);
    }
  }

  private deliver(message: Message): void {
    message.state = 'inflight';
    message.attempts++;
    this.outstanding++;
    this.stats.pushes++;
    this.stats.maxOutstanding = Math.max(this.stats.maxOutstanding, this.outstanding);
    const body = this.body(message);
    const sentMs = this.options.time.nowMs();
    let done = false;
    const finish = (status: number) => {
      if (done) return;
      done = true;
      deadline.cancel();
      this.timers.delete(deadline);
      this.outstanding--;
      this.answered(message, status, this.options.time.nowMs() - sentMs);
    };
    // The ack deadline is also the push request's timeout; a late answer is ignored.
    const deadline = this.options.time.after(this.options.settings.ackDeadlineSeconds * 1000, () =>
      finish(0),
    );
    this.timers.add(deadline);
    this.options.endpoint(body).then(finish, () => finish(0));
  }

  private body(message: Message): string {
    return JSON.stringify({
      message: {
        attributes: message.attributes,
        data: Buffer.from(message.data).toString('base64'),
        messageId: message.id,
        message_id: message.id,
        publishTime: message.publishTime,
        publish_time: message.publishTime,
      },
      subscription: this.options.subscription,
      deliveryAttempt: message.attempts,
    });
  }

  private answered(message: Message, status: number, latencyMs: number): void {
    const model = this.options.windowModel;
    this.options.onAnswer?.(message.id, status);
    if (ACK_STATUSES.has(status)) {
      if (model) this.windowSize = model.afterAck(this.windowSize, latencyMs);
      else this.windowSize += this.windowSize < LINEAR_ABOVE ? 1 : 1 / this.windowSize;
      this.backoffLevel = Math.max(0, this.backoffLevel - 1);
      if (message.state === 'inflight') {
        message.state = 'acked';
        this.settled++;
      }
    } else {
      this.stats.nacks++;
      this.windowSize = model ? model.afterNack(this.windowSize) : Math.max(1, this.windowSize / 2);
      this.pushBackoff();
      if (message.state === 'inflight') this.retryOrDeadLetter(message);
    }
    this.pump();
  }

  /** Pauses the whole subscription; the pause doubles with each nack not offset by an ack. */
  private pushBackoff(): void {
    this.backoffLevel++;
    const pauseMs = Math.min(MAX_PUSH_BACKOFF_MS, MIN_PUSH_BACKOFF_MS * 2 ** (this.backoffLevel - 1));
    this.pausedUntilMs = Math.max(this.pausedUntilMs, this.options.time.nowMs() + pauseMs);
  }

  private retryOrDeadLetter(message: Message): void {
    const s = this.options.settings;
    if (message.attempts >= s.maxDeliveryAttempts) {
      message.state = 'dead';
      this.stats.deadLetters++;
      this.settled++;
      return;
    }
    message.state = 'backoff';
    const backoffMs =
      Math.min(s.maxRetryBackoffSeconds, s.minRetryBackoffSeconds * 2 ** (message.attempts - 1)) * 1000;
    const timer = this.options.time.after(backoffMs, () => {
      this.timers.delete(timer);
      if (message.state !== 'backoff') return; // acked meanwhile by a redelivered copy
      message.state = 'ready';
      this.ready.push(message);
      this.pump();
    });
    this.timers.add(timer);
  }

  /** The state of each message, for counting what became of them. */
  states(): Map<string, Message['state']> {
    return new Map([...this.messages.values()].map((m) => [m.id, m.state]));
  }
}
