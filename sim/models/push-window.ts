import type { PushWindowModel } from '../pubsub';

/**
 * Models of Pub/Sub push flow control. The documentation promises that outstanding pushes grow for
 * a subscriber that acks more than 99 % of pushes with under 1 s latency, grow linearly past ~3,000,
 * and shrink back when the average latency exceeds 1 s or fewer than 99 % are acked. It gives no
 * rate for slower subscribers. Both models below are assumptions around that text; push backoff
 * after nacks is the subscription's own (sim/pubsub.ts), applied the same way under both and to
 * every design (docline and the oracle alike).
 */

/** Past this many outstanding pushes the window grows linearly (documented: ~3,000). */
const LINEAR_ABOVE = 3_000;
/** "A small single-digit window" at the start. */
const INITIAL = 5;

/**
 * `everyAck` (the burst's model): +1 per ack whatever its latency (so the window doubles every round
 * trip), +1/window per ack past 3,000, halved by a nack (never under 1). Favourable: it grows on slow
 * acks, which the documentation does not promise.
 */
export const EVERY_ACK: PushWindowModel = Object.freeze({
  name: 'everyAck',
  initial: INITIAL,
  afterAck: (window: number) => window + (window < LINEAR_ABOVE ? 1 : 1 / window),
  afterNack: (window: number) => Math.max(1, window / 2),
});

/**
 * `fastAcksOnly`: grows only on an ack that came within 1 s (the documented condition); an ack that
 * took 1 s or more shrinks it by 1/window (about one step per round trip, the mirror of the growth),
 * never under the initial single-digit window; a nack halves it, never under 1. So a subscriber whose
 * every push lasts seconds stays near the initial window: the assumption that is least favourable to
 * designs that answer a push only after the analysis.
 */
export const FAST_ACKS_ONLY: PushWindowModel = Object.freeze({
  name: 'fastAcksOnly',
  initial: INITIAL,
  afterAck: (window: number, latencyMs: number) =>
    latencyMs < 1_000
      ? window + (window < LINEAR_ABOVE ? 1 : 1 / window)
      : Math.max(INITIAL, window - 1 / window),
  afterNack: (window: number) => Math.max(1, window / 2),
});

export const PUSH_WINDOW_MODELS: Readonly<Record<'everyAck' | 'fastAcksOnly', PushWindowModel>> =
  Object.freeze({
    everyAck: EVERY_ACK,
    fastAcksOnly: FAST_ACKS_ONLY,
  });
