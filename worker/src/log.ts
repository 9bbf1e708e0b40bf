import type { LogLevel } from './contract/settings';
import type { LogFields, Logger } from './core/ports';

/**
 * Logs one JSON line per call in Cloud Logging's dialect: `severity` with LogSeverity names,
 * `message`, and the trace fields Cloud Logging links to the request. An ERROR line that carries an
 * error also carries its stack trace and its causes, so Cloud Error Reporting picks it up and groups it.
 */

/** The LogSeverity names docline writes (contract/settings.ts lists them). */
export type Severity = LogLevel;
const RANK: Record<Severity, number> = { DEBUG: 100, INFO: 200, WARNING: 400, ERROR: 500 };

/** The severity each {@link Logger} method writes; every logger (and every test double) maps them so. */
export const SEVERITY_OF = Object.freeze({
  debug: 'DEBUG',
  info: 'INFO',
  warn: 'WARNING',
  error: 'ERROR',
} as const satisfies Record<'debug' | 'info' | 'warn' | 'error', Severity>);

/** How many causes deep an ERROR line follows an error. */
const MAX_CAUSES = 5;

export interface JsonLoggerOptions {
  /** Lowest severity written. */
  level?: Severity;
  /** Where lines go; stdout by default. */
  write?: (line: string) => void;
  bindings?: LogFields;
}

/**
 * Keeps a value loggable: errors become their name, message and code, never their full object graph.
 * On ERROR lines an error's causes come along, the same way.
 */
function loggable(value: unknown, withCause: boolean, depth = 0): unknown {
  if (value instanceof Error) {
    const code = (value as { code?: unknown }).code;
    const cause = withCause && depth < MAX_CAUSES && value.cause !== undefined ? value.cause : undefined;
    return {
      name: value.name,
      message: value.message,
      ...(code === undefined ? {} : { code }),
      ...(cause === undefined ? {} : { cause: loggable(cause, true, depth + 1) }),
    };
  }
  return value;
}

/**
 * The stack trace of an error and of its causes, in the `stack_trace` field Error Reporting reads
 * first (it groups by the top of the trace). A cause that is no Error is named by its text.
 */
export function stackTrace(error: Error): string {
  const parts = [error.stack ?? `${error.name}: ${error.message}`];
  let cause = error.cause;
  for (let depth = 0; cause !== undefined && depth < MAX_CAUSES; depth++) {
    parts.push(
      `Caused by: ${cause instanceof Error ? (cause.stack ?? `${cause.name}: ${cause.message}`) : String(cause)}`,
    );
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return parts.join('\n');
}

/** Marks a line written whatever the level (a non-enumerable key, so it never reaches the output). */
const ALWAYS = Symbol('docline.log.always');

/**
 * The fields of a delivery's outcome line, marked so that {@link JsonLogger} writes it whatever
 * LOG_LEVEL says: the stack's log-based metrics and alerts count these lines, and a quieter level
 * must not blind them. Only chatter is filtered.
 */
export function outcomeFields(fields: LogFields): LogFields {
  return Object.defineProperty({ ...fields }, ALWAYS, { value: true, enumerable: false });
}

function isOutcome(fields: LogFields | undefined): boolean {
  return fields !== undefined && (fields as { [ALWAYS]?: boolean })[ALWAYS] === true;
}

export class JsonLogger implements Logger {
  private readonly minRank: number;
  private readonly write: (line: string) => void;
  private readonly bindings: LogFields;

  constructor(options: JsonLoggerOptions = {}) {
    this.minRank = RANK[options.level ?? 'INFO'];
    this.write = options.write ?? ((line) => process.stdout.write(`${line}\n`));
    this.bindings = options.bindings ?? {};
  }

  private log(severity: Severity, message: string, fields?: LogFields): void {
    if (RANK[severity] < this.minRank && !isOutcome(fields)) return;
    const entry: LogFields = { severity, message, ...this.bindings };
    const isError = severity === 'ERROR';
    for (const [key, value] of Object.entries(fields ?? {})) entry[key] = loggable(value, isError);
    const error = isError ? Object.values(fields ?? {}).find((v) => v instanceof Error) : undefined;
    if (error instanceof Error) entry.stack_trace = stackTrace(error);
    this.write(JSON.stringify(entry));
  }

  debug(message: string, fields?: LogFields): void {
    this.log(SEVERITY_OF.debug, message, fields);
  }
  info(message: string, fields?: LogFields): void {
    this.log(SEVERITY_OF.info, message, fields);
  }
  warn(message: string, fields?: LogFields): void {
    this.log(SEVERITY_OF.warn, message, fields);
  }
  error(message: string, fields?: LogFields): void {
    this.log(SEVERITY_OF.error, message, fields);
  }
  child(bindings: LogFields): Logger {
    return new JsonLogger({
      level: (Object.keys(RANK) as Severity[]).find((s) => RANK[s] === this.minRank),
      write: this.write,
      bindings: { ...this.bindings, ...bindings },
    });
  }
}

/**
 * The trace field Cloud Logging uses to group a request's lines, from `traceparent` (W3C) or
 * `X-Cloud-Trace-Context`.
 */
export function traceFields(
  headers: Record<string, string | string[] | undefined>,
  projectId: string | undefined,
): LogFields {
  if (!projectId) return {};
  const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
  const traceparent = first(headers.traceparent);
  let traceId: string | undefined;
  let spanId: string | undefined;
  const w3c = traceparent?.match(/^[\da-f]{2}-([\da-f]{32})-([\da-f]{16})-[\da-f]{2}$/);
  if (w3c) [, traceId, spanId] = w3c;
  else {
    const legacy = first(headers['x-cloud-trace-context'])?.match(/^([\da-f]{32})(?:\/(\d+))?/);
    if (legacy) [, traceId, spanId] = legacy;
  }
  if (!traceId) return {};
  return {
    'logging.googleapis.com/trace': `projects/${projectId}/traces/${traceId}`,
    ...(spanId ? { 'logging.googleapis.com/spanId': spanId } : {}),
  };
}
