import { type ChildProcess, spawn } from 'node:child_process';

/**
 * Runs a helper server (the Pub/Sub emulator, the third-party emulators) in its own process group,
 * resolves once it answers, and stops the whole group — by `stop()`, and also when this process
 * ends, so that no JVM or Go server outlives the command or the test that started it.
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
  /** Receives its output lines. */
  onOutput?: (line: string) => void;
  /** Appended to the error when it exits before it is ready (how to install it, say). */
  hint?: string;
}

/** Children to kill when this process ends, and whether each leads a process group. */
const running = new Map<ChildProcess, { group: boolean }>();
let exitHooksInstalled = false;

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

/** Whatever ends this process also ends the children it started. */
function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.on('exit', () => killAll('all'));
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      if (process.listenerCount(signal) === 0) {
        // Nobody else handles the signal: end everything and die of it, as the process would have.
        killAll('all');
        process.kill(process.pid, signal);
      } else {
        // Another handler shuts down gracefully (it stops the worker itself); the servers go now,
        // and whatever is left when the process exits goes then.
        killAll('groups');
      }
    });
  }
}

/**
 * Kills `child` when this process exits or is signalled, unless it ended before. For children that
 * are not process-group leaders (the worker started by the local pipeline and the tests).
 */
export function killOnExit(child: ChildProcess): void {
  installExitHooks();
  running.set(child, { group: false });
  child.once('exit', () => running.delete(child));
}

export async function startGroupProcess(options: GroupProcessOptions): Promise<GroupProcess> {
  const child = spawn(options.command, options.args, {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...options.env },
  });
  installExitHooks();
  running.set(child, { group: true });
  let output = '';
  const collect = (chunk: Buffer) => {
    const text = chunk.toString();
    output = (output + text).slice(-8000);
    if (options.onOutput) for (const line of text.split('\n')) if (line) options.onOutput(line);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('exit', () => running.delete(child));
  let alive = true;
  void exited.then(() => {
    alive = false;
  });

  const stop = async () => {
    if (alive) {
      killGroup(child, 'SIGTERM');
      const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    killGroup(child, 'SIGKILL'); // a JVM may outlive its launcher script
  };

  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  while (Date.now() < deadline) {
    if (!alive) {
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
