import { DoclineError, ERROR_ANSWERS, type ErrorAnswer, errorAnswer } from './core/errors';
import type { Outcome } from './core/handle';

/**
 * The one table that maps what happened to a delivery to the answer Pub/Sub gets: the three
 * outcomes of a finished delivery, then the answers the error definitions in core/errors.ts carry.
 * docs/architecture.md shows this table, and a test checks it row by row.
 * Pub/Sub acks 102, 200, 201, 202 and 204 (the emulator nacks 202, so it is never used); anything
 * else is a nack and the message comes back until its dead-letter topic takes it.
 */
interface AnswerRowBase {
  situation: string;
  http: number;
  row: 'inserted' | 'none';
  pubsub: 'acks' | 'retries, then dead-letters';
}

/** A finished delivery: answered with `{ status }`. */
export interface OutcomeAnswerRow extends AnswerRowBase {
  status: Outcome['status'];
}

/** A failed delivery: answered with `{ error }`. */
export interface ErrorAnswerRow extends AnswerRowBase {
  error: string;
}

export type AnswerRow = OutcomeAnswerRow | ErrorAnswerRow;

const OUTCOME_ROWS: readonly OutcomeAnswerRow[] = [
  { situation: 'processed', http: 200, status: 'ok', row: 'inserted', pubsub: 'acks' },
  {
    situation:
      'can never be processed (bad notification, event type, content type, size, name, generation gone, content mismatch, analysis refused)',
    http: 200,
    status: 'rejected',
    row: 'inserted',
    pubsub: 'acks',
  },
  {
    situation: 'already recorded (seen, or lost the race at the write)',
    http: 200,
    status: 'duplicate',
    row: 'none',
    pubsub: 'acks',
  },
];

/** A failure never writes a row; Pub/Sub acks only a 2xx answer. */
function errorRow(answer: ErrorAnswer): ErrorAnswerRow {
  return {
    situation: answer.situation,
    http: answer.http,
    error: answer.error,
    row: 'none',
    pubsub: answer.http >= 200 && answer.http < 300 ? 'acks' : 'retries, then dead-letters',
  };
}

export const ANSWER_TABLE: readonly AnswerRow[] = [
  ...OUTCOME_ROWS,
  ...Object.values(ERROR_ANSWERS).map(errorRow),
];

export interface Answer {
  http: number;
  body: Record<string, unknown>;
}

/** The answer to a delivery that `handle` finished. */
export function answerForOutcome(outcome: Outcome): Answer {
  const row = OUTCOME_ROWS.find((r) => r.status === outcome.status);
  if (!row) throw new Error(`no answer row for ${outcome.status}`);
  return {
    http: row.http,
    body: {
      status: outcome.status,
      messageId: outcome.messageId,
      ...(outcome.reason ? { reason: outcome.reason, detail: outcome.detail } : {}),
    },
  };
}

/** The error code (the answer's `error` field) of a failure. */
export function errorCode(error: unknown): string {
  return errorAnswer(error).error;
}

/** The answer to a delivery that failed. The message says what happened, never document content. */
export function answerForError(error: unknown): Answer {
  const { error: code, http } = errorAnswer(error);
  const message = code === 'internal' ? 'unexpected failure; see the worker logs' : (error as Error).message;
  const detail = error instanceof DoclineError && code !== error.code ? { cause: error.code } : {};
  return { http, body: { error: code, message, ...detail } };
}
