import type { Usage } from '../contract/analysis';

/**
 * docline's errors. One base class; every error carries a stable code. Whether Pub/Sub should
 * retry is decided by the error's class, and {@link ../app} maps it to one HTTP answer.
 */

/** Reason codes of `rejected` rows: the document can never be processed, so the message is acknowledged. */
export const REJECTION_REASONS = [
  'invalid_notification',
  'unsupported_event_type',
  'unsupported_content_type',
  'empty_object',
  'too_large',
  'object_gone',
  'content_mismatch',
  'invalid_name',
  'analysis_failed',
  'safety_blocked',
] as const;
export type RejectionReason = (typeof REJECTION_REASONS)[number];

export abstract class DoclineError extends Error {
  abstract readonly code: string;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** An error whose code is given where it is raised (a reason, or an adapter's own failure code). */
abstract class CodedError<Code extends string> extends DoclineError {
  readonly code: Code;
  constructor(code: Code, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** The document can never be processed: it gets a `rejected` row with this reason. */
export class RejectionError extends CodedError<RejectionReason> {
  /** Tokens billed before the refusal (a paid analysis that failed): the row records them too. */
  readonly usage: Usage | undefined;
  constructor(reason: RejectionReason, message: string, options?: { cause?: unknown; usage?: Usage }) {
    super(reason, message, options);
    this.usage = options?.usage;
  }
}

/** A failure that a later delivery may not meet (store busy, analyzer rate-limited): Pub/Sub retries. */
export class TransientError extends CodedError<string> {}

/**
 * A fault in our own configuration that a retry cannot fix *now* but an operator can (a BigQuery
 * byte cap too low, a missing permission). The message is not acknowledged: it ends in the
 * dead-letter topic, to be replayed after the fix. Logged at ERROR with what to change.
 */
export class ConfigurationError extends CodedError<string> {}

/** The request is not a Pub/Sub push envelope: answered 400, no row. */
export class BadEnvelopeError extends DoclineError {
  readonly code = 'bad_envelope';
}

export function isRejection(error: unknown): error is RejectionError {
  return error instanceof RejectionError;
}
