import type { ServerResponse } from 'node:http';

/**
 * BigQuery's REST wire shapes, shared by the local servers that stand in for it (the tests' fake
 * BigQuery and the burst simulator in bench/): the error body the client library parses, a failure
 * thrown while routing a request, and the JSON answer.
 */

/** BigQuery's error body: `error.errors[].reason` is what the client and the worker read. */
export function errorBody(code: number, status: string, reason: string, message: string, domain = 'global') {
  return { error: { code, message, errors: [{ message, domain, reason }], status } };
}

/** A failure to answer with, thrown anywhere while a request is routed. */
export class HttpFailure extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`HTTP ${status}`);
  }
}

/** The failures both servers answer with, worded as BigQuery words them. */
export const bigQueryError = {
  /** A 404: `what` is a job, a table, or the method and path of an unknown request. */
  notFound: (what: string) =>
    new HttpFailure(404, errorBody(404, 'NOT_FOUND', 'notFound', `Not found: ${what}`)),
  /** A statement BigQuery refuses to run. */
  invalidQuery: (message: string) =>
    new HttpFailure(400, errorBody(400, 'INVALID_ARGUMENT', 'invalidQuery', message)),
  /** A fault of the server itself. */
  internal: (message: string) => new HttpFailure(500, errorBody(500, 'INTERNAL', 'internalError', message)),
  /** The refusal of a query whose bytes would pass its `maximumBytesBilled`, before it runs. */
  bytesBilledExceeded: (cap: number, required: number) =>
    new HttpFailure(
      400,
      errorBody(
        400,
        'INVALID_ARGUMENT',
        'bytesBilledLimitExceeded',
        `Query exceeded limit for bytes billed: ${cap}. ${required} or higher required.`,
      ),
    ),
};

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
  res.end(JSON.stringify(body));
}

/** Answers a failure thrown while routing; rethrows anything else (a bug of the server itself). */
export function answerFailure(res: ServerResponse, error: unknown): void {
  if (!(error instanceof HttpFailure)) throw error;
  sendJson(res, error.status, error.body);
}

/** A job as jobs.list remembers it: its reference and when jobs.insert created it (ms since the epoch). */
export interface CreatedJob {
  reference: { projectId: string; jobId: string; location: string };
  creationMs: number;
}

/**
 * jobs.list's answer (`projection=minimal`, no configuration): the jobs created at or after
 * `minCreationTime` (ms, as the query parameter carries it), newest first, as the REST reference
 * orders them.
 */
export function jobListBody(created: readonly CreatedJob[], minCreationTime: string | null) {
  const since = Number(minCreationTime ?? 0);
  const jobs = created
    .filter((j) => j.creationMs >= since)
    .reverse()
    .map(({ reference, creationMs }) => ({
      kind: 'bigquery#job',
      id: `${reference.projectId}:${reference.location}.${reference.jobId}`,
      jobReference: reference,
      statistics: { creationTime: String(creationMs) },
    }));
  return { kind: 'bigquery#jobList', jobs };
}
