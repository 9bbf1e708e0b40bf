import type { AnalysisProgress, Usage } from '../contract/analysis';

/**
 * docline's errors, in one module: one base class, and every error carries a stable code and the
 * one HTTP answer Pub/Sub gets for it (its {@link ErrorAnswer}). Whether Pub/Sub retries follows
 * from that status: it acks 2xx and redelivers anything else. The answer table
 * ({@link ../answers}) lists these answers after the three outcomes of a finished delivery.
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
  'not_an_e_invoice',
] as const;
export type RejectionReason = (typeof REJECTION_REASONS)[number];

/**
 * Reason codes of `ok` rows whose PDF carries an e-invoice XML that could not be used: the PDF's
 * picture was analysed instead, as it would be without the XML, and the row says why.
 */
export const FALLBACK_REASONS = ['e_invoice_unreadable', 'e_invoice_incomplete'] as const;
export type FallbackReason = (typeof FALLBACK_REASONS)[number];

/** How a failed delivery is answered: the `error` code of the JSON body and the HTTP status. */
export interface ErrorAnswer {
  /** The `error` field of the answer's JSON body. */
  readonly error: string;
  readonly http: number;
  /** When this answer is given, in words (the answer table's first column). */
  readonly situation: string;
}

const answer = (error: string, http: number, situation: string): ErrorAnswer =>
  Object.freeze({ error, http, situation });

/** Every answer to a failed delivery, in the order the answer table lists them. */
export const ERROR_ANSWERS = Object.freeze({
  transient: answer(
    'transient',
    503,
    "transient (store busy, concurrent DML, analyzer 408/429/5xx or timeout, storage 403/5xx, the delivery's deadline, the instance shutting down)",
  ),
  dependencyRefused: answer(
    'dependency_refused',
    503,
    'a dependency refuses the worker, not the document (analyzer billing, region, credentials, schema; 409, 499): alerted',
  ),
  configuration: answer(
    'configuration',
    503,
    'configuration fault an operator must fix (a statement BigQuery refuses: byte cap, permission, missing table; a model Gemini does not serve, 404): alerted; a batch fails whole, never searched for a bad row',
  ),
  badEnvelope: answer('bad_envelope', 400, 'not a push envelope, or no valid messageId'),
  bodyTooLarge: answer('too_large_body', 413, 'body over the limit'),
  unauthenticated: answer('unauthenticated', 401, 'push token missing'),
  forbidden: answer('forbidden', 403, 'push token wrong (audience, issuer, signer, account)'),
  internal: answer('internal', 500, 'unexpected failure (a bug)'),
});

export abstract class DoclineError extends Error {
  abstract readonly code: string;
  /** The answer Pub/Sub gets when this error ends a delivery. */
  abstract readonly answer: ErrorAnswer;
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
  /** `handle()` turns rejections into rows: one that escapes it is a bug. */
  readonly answer = ERROR_ANSWERS.internal;
  /** Tokens billed before the refusal (a paid analysis that failed): the row records them too. */
  readonly usage: Usage | undefined;
  /** Set when the refusal was not paid by this delivery: replayed from the memo, or shared. */
  readonly memo: 'hit' | 'shared' | undefined;
  constructor(
    reason: RejectionReason,
    message: string,
    options?: { cause?: unknown; usage?: Usage; memo?: 'hit' | 'shared' },
  ) {
    super(reason, message, options);
    this.usage = options?.usage;
    this.memo = options?.memo;
  }
}

/**
 * A failure that is not about the document, after which the delivery is retried: it carries what
 * the failed run had paid for (the tokens, and the attempts to go on after), never lost.
 */
abstract class FailureAfterPaying extends CodedError<string> {
  /** Tokens this delivery paid before the failure (a first attempt, then a 429): logged, never lost. */
  readonly usage: Usage | undefined;
  /** The paid attempts the failed run made: the next run of this delivery goes on after them. */
  readonly progress: AnalysisProgress | undefined;
  constructor(
    code: string,
    message: string,
    options?: { cause?: unknown; usage?: Usage; progress?: AnalysisProgress },
  ) {
    super(code, message, options);
    this.usage = options?.usage;
    this.progress = options?.progress;
  }
}

/** A failure that a later delivery may not meet (store busy, analyzer rate-limited): Pub/Sub retries. */
export class TransientError extends FailureAfterPaying {
  readonly answer = ERROR_ANSWERS.transient;
  /**
   * How long the service asked the caller to wait before trying again (the Gemini API's
   * `google.rpc.RetryInfo` on a 429 of a full quota window); undefined when it did not say.
   */
  readonly retryAfterMs: number | undefined;
  /**
   * The refusal is a shared pool's (Vertex AI's pay-as-you-go 429: "Resource exhausted, please try
   * again later"), which has no capacity for the call now whatever this project's own rate; not a
   * limit of this project's that it went past.
   */
  readonly sharedCapacity: boolean;
  constructor(
    code: string,
    message: string,
    options?: {
      cause?: unknown;
      usage?: Usage;
      progress?: AnalysisProgress;
      retryAfterMs?: number;
      sharedCapacity?: boolean;
    },
  ) {
    super(code, message, options);
    this.retryAfterMs = options?.retryAfterMs;
    this.sharedCapacity = options?.sharedCapacity ?? false;
  }
}

/** The code an analyzer gives a spent quota (Gemini's 429): nothing paid, and the quota gate runs the work again. */
export const RATE_LIMITED = 'analyzer_rate_limited';

export function isRateLimited(error: unknown): error is TransientError {
  return error instanceof TransientError && error.code === RATE_LIMITED;
}

/**
 * A write whose outcome is unknown: its statement was sent, and neither its answer nor a read of
 * its job by id said whether it committed (a 5xx or a reset while polling, an answer lost after the
 * commit). It may still commit, up to its own bound: the delivery is answered 503, and the key's
 * write lease is not ended, so that no other delivery writes the key until that bound has passed.
 */
export class OutcomeUnknownError extends TransientError {}

/**
 * A dependency refused the worker's request for a reason that is not the document: the analyzer's
 * billing or region (`FAILED_PRECONDITION`), its credentials (401, 403), the schema
 * the worker asks for, a conflict or a cancellation (409, 499). Every document would get the same
 * answer, so none may be rejected for it: the delivery is answered 503 and Pub/Sub retries it, and
 * the line is logged at ERROR (the stack alerts on it) so that an operator fixes the cause while
 * the messages wait.
 */
export class DependencyRefusedError extends TransientError {
  override readonly answer = ERROR_ANSWERS.dependencyRefused;
}

/**
 * A fault in our own configuration that a retry cannot fix *now* but an operator can (a BigQuery
 * byte cap too low, a missing permission). It is answered 503, as the fault is the service's and
 * not the document's: Pub/Sub retries, so a fix made within the retry horizon loses nothing, and a
 * message still refused after it ends in the dead-letter topic, to be replayed after the fix.
 * Logged at ERROR with what to change (the stack alerts on it).
 */
export class ConfigurationError extends FailureAfterPaying {
  readonly answer = ERROR_ANSWERS.configuration;
}

/**
 * What a failed run had paid for, when its failure is not about the document (a transient failure,
 * or a fault of the configuration an operator fixes): the attempts to go on after, and their tokens.
 */
export function paidBeforeFailing(
  error: unknown,
): { progress?: AnalysisProgress; usage?: Usage } | undefined {
  if (!(error instanceof FailureAfterPaying)) return undefined;
  return {
    ...(error.progress ? { progress: error.progress } : {}),
    ...(error.usage ? { usage: error.usage } : {}),
  };
}

/**
 * The store refused a statement because of one row's content (a value the table cannot take), and
 * said so. Only this kind of refusal is worth searching a batch for the row at fault (group
 * commit's isolation); any other refusal (byte cap, access, a missing table, the statement itself)
 * is the statement's, fails the whole batch at once, and is answered like any configuration fault.
 */
export class RowRefusalError extends ConfigurationError {}

/** The request is not a Pub/Sub push envelope: answered 400, no row. */
export class BadEnvelopeError extends DoclineError {
  readonly code = 'bad_envelope';
  readonly answer = ERROR_ANSWERS.badEnvelope;
}

/** The push token is missing (401) or wrong (403). */
export class PushAuthError extends DoclineError {
  readonly code: 'unauthenticated' | 'forbidden';
  readonly answer: ErrorAnswer;
  constructor(code: 'unauthenticated' | 'forbidden', message: string) {
    super(message);
    this.code = code;
    this.answer = ERROR_ANSWERS[code];
  }
}

/** The request body is over the configured limit. */
export class BodyTooLargeError extends DoclineError {
  readonly code = 'too_large_body';
  readonly answer = ERROR_ANSWERS.bodyTooLarge;
}

/**
 * The worker's start-up configuration is wrong; the message lists every problem. It stops the
 * process before any delivery, so no delivery is ever answered with it (one would be a bug).
 */
export class ConfigError extends DoclineError {
  readonly code = 'invalid_config';
  readonly answer = ERROR_ANSWERS.internal;
  constructor(readonly problems: string[]) {
    super(`Invalid worker configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/**
 * The error a failure of the JSON body parser stands for, by the parser's `type`: the body over
 * the limit, or a body that is not JSON. Any other failure is returned as it is.
 */
export function bodyParserError(error: unknown, limitBytes: number): unknown {
  const type = (error as { type?: unknown } | null)?.type;
  if (type === 'entity.too.large')
    return new BodyTooLargeError(`the push body is over the limit of ${limitBytes} bytes`);
  if (type === 'entity.parse.failed' || type === 'encoding.unsupported' || type === 'charset.unsupported')
    return new BadEnvelopeError('the push body is not JSON');
  return error;
}

/** The answer to a failure: its own, or `internal` for anything that is no DoclineError (a bug). */
export function errorAnswer(error: unknown): ErrorAnswer {
  return error instanceof DoclineError ? error.answer : ERROR_ANSWERS.internal;
}

export function isRejection(error: unknown): error is RejectionError {
  return error instanceof RejectionError;
}
