import {
  BadEnvelopeError,
  ConfigurationError,
  DoclineError,
  RejectionError,
  TransientError,
} from './core/errors';
import type { Outcome } from './core/handle';

/**
 * The one table that maps what happened to a delivery to the answer Pub/Sub gets. The README's
 * status table is this table, and a test checks both, row by row.
 * Pub/Sub acks 102, 200, 201, 202 and 204 (the emulator nacks 202, so it is never used); anything
 * else is a nack and the message comes back until its dead-letter topic takes it.
 */
export interface AnswerRow {
  situation: string;
  http: number;
  /** `status` of the JSON body, or the `error` code for non-2xx answers. */
  body: string;
  row: 'inserted' | 'none';
  pubsub: 'acks' | 'retries, then dead-letters';
}

export const ANSWER_TABLE: readonly AnswerRow[] = [
  { situation: 'processed', http: 200, body: 'ok', row: 'inserted', pubsub: 'acks' },
  {
    situation:
      'can never be processed (bad notification, event type, content type, size, name, generation gone, content mismatch, analysis refused)',
    http: 200,
    body: 'rejected',
    row: 'inserted',
    pubsub: 'acks',
  },
  {
    situation: 'already recorded (seen, or lost the race at the write)',
    http: 200,
    body: 'duplicate',
    row: 'none',
    pubsub: 'acks',
  },
  {
    situation: 'transient (store busy, concurrent DML, analyzer 408/429/5xx or timeout, storage 403/5xx)',
    http: 503,
    body: 'transient',
    row: 'none',
    pubsub: 'retries, then dead-letters',
  },
  {
    situation: 'configuration fault an operator must fix (BigQuery byte cap, missing permission)',
    http: 500,
    body: 'configuration',
    row: 'none',
    pubsub: 'retries, then dead-letters',
  },
  {
    situation: 'not a push envelope, or no valid messageId',
    http: 400,
    body: 'bad_envelope',
    row: 'none',
    pubsub: 'retries, then dead-letters',
  },
  {
    situation: 'body over the limit',
    http: 413,
    body: 'too_large_body',
    row: 'none',
    pubsub: 'retries, then dead-letters',
  },
  {
    situation: 'push token missing',
    http: 401,
    body: 'unauthenticated',
    row: 'none',
    pubsub: 'retries, then dead-letters',
  },
  {
    situation: 'push token wrong (audience, issuer, signer, account)',
    http: 403,
    body: 'forbidden',
    row: 'none',
    pubsub: 'retries, then dead-letters',
  },
  {
    situation: 'unexpected failure (a bug)',
    http: 500,
    body: 'internal',
    row: 'none',
    pubsub: 'retries, then dead-letters',
  },
];

/** The push token is missing (401) or wrong (403). */
export class PushAuthError extends DoclineError {
  readonly code: 'unauthenticated' | 'forbidden';
  constructor(code: 'unauthenticated' | 'forbidden', message: string) {
    super(message);
    this.code = code;
  }
}

/** The request body is over the configured limit. */
export class BodyTooLargeError extends DoclineError {
  readonly code = 'too_large_body';
}

export interface Answer {
  http: number;
  body: Record<string, unknown>;
}

function rowFor(body: string): AnswerRow {
  const row = ANSWER_TABLE.find((r) => r.body === body);
  if (!row) throw new Error(`no answer row for ${body}`);
  return row;
}

/** The answer to a delivery that `handle` finished. */
export function answerForOutcome(outcome: Outcome): Answer {
  return {
    http: rowFor(outcome.status).http,
    body: {
      status: outcome.status,
      messageId: outcome.messageId,
      ...(outcome.reason ? { reason: outcome.reason, detail: outcome.detail } : {}),
    },
  };
}

/** The error code (table `body`) of a failure. */
export function errorCode(error: unknown): string {
  if (error instanceof TransientError) return 'transient';
  if (error instanceof ConfigurationError) return 'configuration';
  if (error instanceof BadEnvelopeError) return 'bad_envelope';
  if (error instanceof BodyTooLargeError) return 'too_large_body';
  if (error instanceof PushAuthError) return error.code;
  // A rejection that escaped handle() is a bug: handle() turns rejections into rows.
  if (error instanceof RejectionError) return 'internal';
  return 'internal';
}

/** The answer to a delivery that failed. The message says what happened, never document content. */
export function answerForError(error: unknown): Answer {
  const code = errorCode(error);
  const message = code === 'internal' ? 'unexpected failure; see the worker logs' : (error as Error).message;
  const detail = error instanceof DoclineError && code !== error.code ? { cause: error.code } : {};
  return { http: rowFor(code).http, body: { error: code, message, ...detail } };
}
