import { type ChildProcess, spawn } from 'node:child_process';

/**
 * Process lifecycle of the local tools, in one file: which child processes they start, and who stops
 * what when a command ends or is interrupted.
 *
 * Two kinds of children:
 * - servers (the Pub/Sub emulator; the third-party emulators of the tests) run detached, in a
 *   process group of their own, started by {@link startGroupProcess}. A terminal's Ctrl-C does not
 *   reach them, so this module ends the whole group (a JVM may outlive its launcher script).
 * - the worker (local/lib/worker-process.ts, registered with {@link killOnExit}) stays in our
 *   process group: a terminal's Ctrl-C reaches it as well, and it drains on its own.
 *
 * Who stops what on Ctrl-C (SIGINT), SIGTERM or SIGHUP:
 * 1. A command that keeps running (`npm start`) registers its graceful stop with
 *    {@link stopGracefullyOnSignals}. On the first signal the servers are killed at once; then the
 *    stop runs in the command's order (inbox, then worker: SIGTERM, SIGKILL after 10 s, then the
 *    store), and the process exits with the code given. Further signals are ignored meanwhile.
 * 2. Any other command: every child is killed, and the process dies of the signal, as it would
 *    have without this module. Where something else listens for the signal (a test runner), only
 *    the servers are killed at once; the rest goes at exit (3).
 * 3. Whatever is still running when the process exits is SIGKILLed.
 *
 * The worker's own SIGTERM/SIGINT handling (finish in-flight requests, close the store) stays in
 * worker/src/main.ts: that is the production entry point, where Cloud Run sends SIGTERM before it
 * stops an instance; the local tools only send it that signal through {@link stopProcess}.
 */

export interface GroupProcess {
  readonly child: ChildProcess;
  /** The last few KiB of its stdout and stderr (for failure messages). */
  output(): string;
  /** SIGTERM to the group, SIGKILL after a grace period; resolves once it has ended. */
  stop(): Promise<void>;
}

export interface GroupProcessOptions {
  /** How messages name it. */
  label: string;
  command: string;
  args: string[];
  /** Added to this process's environment. */
  env?: Record<string, string>;
  /** Resolves true once it serves requests. */
  ready: () => Promise<boolean>;
  readyTimeoutMs?: number;
  /** Appended to the error when it exits before it is ready (how to install it, say). */
  hint?: string;
}

const STOPPING_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/** Children to kill when this process ends, and whether each leads a process group. */
const running = new Map<ChildProcess, { group: boolean }>();
let hooksInstalled = false;
/** The graceful stop of the running command, when it registered one. */
let gracefulStop: (() => void) | undefined;
let stopping = false;
/** This module's signal listeners. */
const handlers = new Map<NodeJS.Signals, () => void>();

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // The group is already gone.
  }
}

function killAll(which: 'groups' | 'all'): void {
  for (const [child, { group }] of running) {
    if (group) killGroup(child, 'SIGKILL');
    else if (which === 'all') child.kill('SIGKILL');
  }
}

/** Installs the signal and exit handling described above, once per process. */
function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', () => killAll('all'));
  for (const signal of STOPPING_SIGNALS) {
    const onSignal = () => {
      if (stopping) return;
      if (gracefulStop) {
        // The servers go now; the command stops the worker itself, and what is left goes at exit.
        killAll('groups');
        gracefulStop();
        return;
      }
      if (process.listeners(signal).some((listener) => listener !== onSignal)) {
        // Someone else handles the signal (a test runner): the servers go now, the rest at exit.
        killAll('groups');
        return;
      }
      // Nobody stops gracefully: end everything and die of the signal, as the process would have.
      killAll('all');
      for (const s of STOPPING_SIGNALS) process.removeListener(s, handlers.get(s)!);
      process.kill(process.pid, signal);
    };
    handlers.set(signal, onSignal);
    process.on(signal, onSignal);
  }
}
/**
 * Registers the command's graceful stop (case 1 above) and returns `shutdown(code)`, which runs it
 * once, whether a signal or the command itself (the worker died) asks first, then exits.
 */
export function stopGracefullyOnSignals(stop: () => Promise<void>): (code: number) => Promise<void> {
  installHooks();
  const shutdown = async (code: number) => {
    if (stopping) return;
    stopping = true;
    try {
      await stop();
    } finally {
      process.exit(code);
    }
  };
  gracefulStop = () => void shutdown(0);
  return shutdown;
}

/** Whether the child has ended. */
const ended = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

/**
 * Stops one child: SIGTERM (to its whole group when it leads one), SIGKILL if it has not ended after
 * `graceMs`; resolves once it has ended.
 */
export async function stopProcess(
  child: ChildProcess,
  exited: Promise<unknown>,
  { graceMs, group = false }: { graceMs: number; group?: boolean },
): Promise<void> {
  const send = (signal: NodeJS.Signals) => (group ? killGroup(child, signal) : child.kill(signal));
  if (!ended(child)) {
    send('SIGTERM');
    const timer = setTimeout(() => send('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  }
  if (group) killGroup(child, 'SIGKILL'); // a JVM may outlive its launcher script
}

/**
 * Kills `child` when this process exits or is signalled, unless it ended before. For children that
 * are not process-group leaders (the worker started by the local pipeline and the tests).
 */
export function killOnExit(child: ChildProcess): void {
  installHooks();
  running.set(child, { group: false });
  child.once('exit', () => running.delete(child));
}

/**
 * Runs a server in its own process group, resolves once it answers, and stops the whole group — by
 * `stop()`, and also when this process ends, so that no JVM or Go server outlives the command or
 * the test that started it.
 */
export async function startGroupProcess(options: GroupProcessOptions): Promise<GroupProcess> {
  const child = spawn(options.command, options.args, {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...options.env },
  });
  installHooks();
  running.set(child, { group: true });
  let output = '';
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-8000);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('exit', () => running.delete(child));

  const stop = () => stopProcess(child, exited, { graceMs: 5_000, group: true });

  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  while (Date.now() < deadline) {
    if (ended(child)) {
      throw new Error(
        `${options.label} exited before it was ready. Its output:\n${output}${options.hint ? `\n${options.hint}` : ''}`,
      );
    }
    if (await options.ready().catch(() => false)) return { child, output: () => output, stop };
    // Polling a port that is not listening yet: there is no event to wait for.
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await stop();
  throw new Error(`${options.label} did not become ready in time. Its output:\n${output}`);
}
