import express, { type NextFunction, type Request, type Response } from 'express';
import { type Answer, answerForError, answerForOutcome, errorCode } from './answers';
import { DELIVERY_DEFAULTS, deliveryBudgetMs } from './contract/settings';
import { type Deadline, Deadlines, ShuttingDownError } from './core/deadline';
import { bodyParserError, TransientError } from './core/errors';
import { parsePush } from './core/event';
import { type HandlerDeps, handle } from './core/handle';
import type { Logger } from './core/ports';
import { outcomeFields, traceFields } from './log';

export interface AppDeps extends HandlerDeps {
  logger: Logger;
  pushBodyLimitBytes: number;
  /** Google Cloud project for log trace fields. */
  projectId?: string;
  /** Verifies the push token; throws PushAuthError. Absent when Cloud Run IAM does it. */
  authenticate?: (authorization: string | undefined) => Promise<void>;
  /** Monotonic time in ms for latencies; injectable for tests. */
  monotonicMs?: () => number;
  /**
   * The deadlines of the deliveries in flight: one per request, from the request timeout (by
   * default the default worker timeout). The composition root drains them at scale-in.
   */
  deadlines?: Deadlines;
  /**
   * What the start-up checks found (the analyzer's model, asked for once): `checking` until they
   * end, an error when one failed. `/healthz` answers 503 unless they passed. Absent: nothing to check.
   */
  readiness?: () => Readiness;
}

/** The state of the start-up checks: `/healthz` (the Cloud Run startup probe) answers 200 only once `ready`. */
export type Readiness = 'checking' | 'ready' | Error;

/**
 * Builds the worker's HTTP app without listening: `POST /push` for Pub/Sub push deliveries and
 * `GET /healthz`. Every answer comes from the one table in answers.ts.
 */
export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  const monotonicMs = deps.monotonicMs ?? (() => performance.now());
  const deadlines = deps.deadlines ?? new Deadlines(deliveryBudgetMs(DELIVERY_DEFAULTS), deps.clock);

  app.get('/healthz', async (_req, res) => {
    // A failed check was logged once, at ERROR, when it failed: the probe's answers only repeat it.
    const readiness = deps.readiness?.() ?? 'ready';
    if (readiness === 'checking') {
      res.status(503).json({ status: 'starting' });
      return;
    }
    if (readiness !== 'ready') {
      const answer = answerForError(readiness);
      res.status(503).json({ status: 'unavailable', error: answer.body.error, detail: readiness.message });
      return;
    }
    try {
      await deps.store.ping();
      res.status(200).json({ status: 'ok' });
    } catch (error) {
      deps.logger.error('health check failed: the store is not reachable', { error });
      res.status(503).json({ status: 'unavailable' });
    }
  });

  const authenticate = async (req: Request, _res: Response, next: NextFunction) => {
    if (!deps.authenticate) return next();
    try {
      await deps.authenticate(req.headers.authorization);
      next();
    } catch (error) {
      next(error);
    }
  };

  // Pub/Sub sends application/json; any other type is still parsed so that it gets a clear 400.
  const parseJson = express.json({ limit: deps.pushBodyLimitBytes, type: () => true, strict: false });

  // The delivery's deadline starts when its request arrives, before the token and the body are read.
  const startDeadline = (_req: Request, res: Response, next: NextFunction) => {
    if (deadlines.isDraining) {
      const answer = answerForError(new ShuttingDownError('a new push'));
      res.status(answer.http).json(answer.body);
      return;
    }
    const deadline = deadlines.start();
    res.locals.deadline = deadline;
    res.on('close', () => deadlines.end(deadline));
    next();
  };

  app.post('/push', startDeadline, authenticate, parseJson, async (req, res) => {
    const started = monotonicMs();
    let logger = deps.logger.child(traceFields(req.headers, deps.projectId));
    let answer: Answer;
    try {
      const event = parsePush(req.body);
      logger = logger.child({ messageId: event.messageId });
      const outcome = await handle(event, deps, res.locals.deadline as Deadline);
      answer = answerForOutcome(outcome);
      // The outcome line is written at any LOG_LEVEL: the stack's metrics and alerts count it.
      const fields = outcomeFields({
        dedupKey: outcome.dedupKey,
        status: outcome.status,
        reason: outcome.reason,
        fallback: outcome.fallback,
        detail: outcome.detail,
        duplicateAt: outcome.duplicateAt,
        analysed: outcome.analysed,
        memo: outcome.memo,
        deliveryAttempt: event.deliveryAttempt,
        objectUri: event.objectUri,
        latencyMs: Math.round(monotonicMs() - started),
        // Tokens this delivery paid for: an analysis from the memo or a concurrent delivery cost nothing now.
        tokens: outcome.analysed ? (outcome.usage?.totalTokens ?? 0) : 0,
        promptTokens: outcome.analysed ? (outcome.usage?.promptTokens ?? 0) : 0,
        outputTokens: outcome.analysed ? (outcome.usage?.outputTokens ?? 0) : 0,
        httpStatus: answer.http,
      });
      if (outcome.status === 'rejected') logger.warn(`rejected: ${outcome.reason}`, fields);
      else logger.info(outcome.status, fields);
    } catch (error) {
      answer = answerForError(error);
      logFailure(logger, error, answer, Math.round(monotonicMs() - started));
    }
    res.status(answer.http).json(answer.body);
  });

  // Body-parser and authentication failures end here, with the same table.
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const mapped = bodyParserError(error, deps.pushBodyLimitBytes);
    const answer = answerForError(mapped);
    logFailure(deps.logger, mapped, answer, 0);
    res.status(answer.http).json(answer.body);
  });

  return app;
}

function logFailure(logger: Logger, error: unknown, answer: Answer, latencyMs: number): void {
  const code = errorCode(error);
  // Tokens paid before a transient failure (a first analyzer call, then a 429) are counted too.
  const usage = error instanceof TransientError ? error.usage : undefined;
  const fields = outcomeFields({
    status: 'error',
    error: code,
    httpStatus: answer.http,
    latencyMs,
    cause: error,
    ...(usage
      ? { tokens: usage.totalTokens, promptTokens: usage.promptTokens, outputTokens: usage.outputTokens }
      : {}),
  });
  if (code === 'transient')
    logger.warn(`transient failure, Pub/Sub will retry: ${(error as Error).message}`, fields);
  else if (code === 'configuration' || code === 'internal' || code === 'dependency_refused') {
    // The logger adds the stack trace and causes of `cause` to ERROR lines, for Error Reporting.
    const what = { internal: 'unexpected failure', configuration: 'configuration fault' }[code as string];
    logger.error(`${what ?? 'a dependency refuses the worker'}: ${(error as Error).message}`, fields);
  } else logger.warn(`refused: ${(error as Error).message}`, fields);
}
