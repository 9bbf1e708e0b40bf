import type { LogLevel } from './contract/settings';
import type { LogFields, Logger } from './core/ports';

/**
 * Logs one JSON line per call in Cloud Logging's dialect: `severity` with LogSeverity names,
 * `message`, and the trace fields Cloud Logging links to the request.
 */

/** The LogSeverity names docline writes (contract/settings.ts lists them). */
export type Severity = LogLevel;
const RANK: Record<Severity, number> = { DEBUG: 100, INFO: 200, WARNING: 400, ERROR: 500 };

export interface JsonLoggerOptions {
  /** Lowest severity written. */
  level?: Severity;
  /** Where lines go; stdout by default. */
  write?: (line: string) => void;
  bindings?: LogFields;
}

/** Keeps a value loggable: errors become their name, message and code, never their full object graph. */
function loggable(value: unknown): unknown {
  if (value instanceof Error) {
    const code = (value as { code?: unknown }).code;
    return { name: value.name, message: value.message, ...(code === undefined ? {} : { code }) };
  }
  return value;
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
    for (const [key, value] of Object.entries(fields ?? {})) entry[key] = loggable(value);
    this.write(JSON.stringify(entry));
  }

  debug(message: string, fields?: LogFields): void {
    this.log('DEBUG', message, fields);
  }
  info(message: string, fields?: LogFields): void {
    this.log('INFO', message, fields);
  }
  warn(message: string, fields?: LogFields): void {
    this.log('WARNING', message, fields);
  }
  error(message: string, fields?: LogFields): void {
    this.log('ERROR', message, fields);
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
