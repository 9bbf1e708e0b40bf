import { type ChildProcess, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { freePort } from './emulator';
import { killOnExit, stopProcess } from './lifecycle';

/** One structured log line of the worker (Cloud Logging JSON). */
export interface WorkerLogLine {
  severity: string;
  message: string;
  messageId?: string;
  dedupKey?: string;
  status?: string;
  reason?: string;
  detail?: string;
  analysed?: boolean;
  objectUri?: string;
  latencyMs?: number;
  tokens?: number;
  port?: number;
  [key: string]: unknown;
}

export interface WorkerProcessOptions {
  /** Environment of the worker (PORT, DOCLINE_DATA_DIR, …); PORT defaults to 0 (any free port). */
  env?: Record<string, string | undefined>;
  /** The entry module; the worker's composition root by default. Tests pass their own composition. */
  entry?: string;
}

export interface WorkerProcess {
  readonly url: string;
  readonly port: number;
  readonly child: ChildProcess;
  /** Every log line, in order; also emitted as 'line' events on {@link events}. */
  readonly lines: WorkerLogLine[];
  readonly events: EventEmitter;
  /** Resolves with the exit code (or signal) once the process ended. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, and SIGKILL if it has not ended after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
  /** Resolves with the first line (already seen or coming) that matches. */
  waitForLine(match: (line: WorkerLogLine) => boolean, timeoutMs?: number): Promise<WorkerLogLine>;
}

export const REPO_ROOT = path.resolve(__dirname, '../..');
export const WORKER_MAIN = path.join(REPO_ROOT, 'worker/src/main.ts');

/** Node's arguments that run a TypeScript file (of the repository, or absolute) through tsx, as the npm scripts do. */
export const tsxArgs = (file: string, args: readonly string[] = []): string[] => [
  '--disable-warning=ExperimentalWarning',
  '--import',
  'tsx',
  path.resolve(REPO_ROOT, file),
  ...args,
];

/**
 * POSTs a push body to a running worker's `/push` as Pub/Sub push does: JSON, plus any `headers`
 * (the push token where the worker checks one).
 */
export function postPush(
  baseUrl: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${baseUrl}/push`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

/**
 * Starts the worker as a child process (TypeScript through tsx, on the same Node as this process)
 * and resolves once it listens. Its stdout is parsed into log lines; stderr is passed through.
 */
export async function startWorkerProcess(options: WorkerProcessOptions = {}): Promise<WorkerProcess> {
  const env: Record<string, string | undefined> = { ...process.env, PORT: '0', ...options.env };
  // Below INFO the worker's "listening" line is not written: then the port is chosen here and
  // readiness comes from /healthz instead.
  const quiet = ['WARNING', 'ERROR'].includes(String(env.LOG_LEVEL ?? '').toUpperCase());
  if (quiet && (env.PORT ?? '0') === '0') env.PORT = String(await freePort());
  const child = spawn(process.execPath, tsxArgs(options.entry ?? WORKER_MAIN), {
    cwd: REPO_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // A worker never outlives the command or test that started it (Ctrl-C, a crash, a timeout).
  killOnExit(child);
  const lines: WorkerLogLine[] = [];
  const events = new EventEmitter();
  events.setMaxListeners(0);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  createInterface({ input: child.stdout! }).on('line', (text) => {
    let line: WorkerLogLine;
    try {
      line = JSON.parse(text);
    } catch {
      line = { severity: 'DEFAULT', message: text };
    }
    lines.push(line);
    events.emit('line', line);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );

  const waitForLine = (match: (line: WorkerLogLine) => boolean, timeoutMs = 30_000) =>
    new Promise<WorkerLogLine>((resolve, reject) => {
      const seen = lines.find(match);
      if (seen) return resolve(seen);
      const timer = setTimeout(() => {
        events.off('line', onLine);
        reject(new Error(`the worker did not log the expected line within ${timeoutMs} ms`));
      }, timeoutMs);
      timer.unref();
      const onLine = (line: WorkerLogLine) => {
        if (!match(line)) return;
        clearTimeout(timer);
        events.off('line', onLine);
        resolve(line);
      };
      events.on('line', onLine);
    });

  const stop = (graceMs = 10_000) => stopProcess(child, exited, { graceMs });

  const readyTimeoutMs = 30_000;
  const ready: Promise<number> = quiet
    ? waitForHealth(Number(env.PORT), readyTimeoutMs, exited)
    : waitForLine((l) => typeof l.port === 'number' && l.message.includes('listening'), readyTimeoutMs).then(
        (l) => l.port as number,
      );
  const port = await Promise.race([
    ready,
    exited.then(({ code }) => {
      throw new Error(`the worker exited (code ${code}) before listening:\n${stderr}`);
    }),
  ]).catch(async (error: unknown) => {
    await stop(1_000);
    throw error;
  });
  return { url: `http://127.0.0.1:${port}`, port, child, lines, events, exited, stop, waitForLine };
}

/** Resolves with the port once `GET /healthz` answers 200 (for workers that log below INFO). */
async function waitForHealth(port: number, timeoutMs: number, exited: Promise<unknown>): Promise<number> {
  let done = false;
  void exited.then(() => {
    done = true;
  });
  const deadline = Date.now() + timeoutMs;
  while (!done && Date.now() < deadline) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1_000) });
      if (res.ok) return port;
    } catch {
      // not listening yet
    }
    // Polling a port that is not listening yet: there is no event to wait for.
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the worker did not answer /healthz on port ${port} within ${timeoutMs} ms`);
}
