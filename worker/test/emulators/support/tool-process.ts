import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Runs one of the third-party emulators that `scripts/install-emulators.sh` builds into
 * `.tools/bin`, the way local/emulator.ts runs the Pub/Sub emulator: in its own process group on a
 * loopback port, ready once it answers, and stopped with its whole group — by `stop()`, and also
 * when the test process ends, so that no emulator outlives the suite.
 */

/** Where the install script puts the binaries (and their `<name>.version` stamps). */
export const TOOLS_BIN = path.resolve(__dirname, '../../../../.tools/bin');

/** The tools the install script knows. */
export type ToolName = 'fake-gcs-server' | 'bigquery-emulator';

/** The path of an installed tool, or an error that says how to install it. */
export function toolBinary(name: ToolName): string {
  const binary = path.join(TOOLS_BIN, name);
  if (!existsSync(binary)) {
    throw new Error(
      `${name} is not installed in ${TOOLS_BIN}. Run \`bash scripts/install-emulators.sh\` ` +
        '(needs Go >= 1.25 and the Go module proxy), or `npm run test:emulators`, which runs it first.',
    );
  }
  return binary;
}

/** The version the install script stamped next to the binary (`v1.56.1`), or `unknown`. */
export function toolVersion(name: ToolName): string {
  try {
    return readFileSync(path.join(TOOLS_BIN, `${name}.version`), 'utf8').trim();
  } catch {
    return 'unknown';
  }
}

/** A started tool. */
export interface ToolProcess {
  readonly child: ChildProcess;
  /** The last few KiB of the tool's stdout and stderr (for failure messages). */
  output(): string;
  /** SIGTERM to the group, SIGKILL after a grace period; resolves once the process has ended. */
  stop(): Promise<void>;
}

export interface ToolProcessOptions {
  name: ToolName;
  args: string[];
  /** Added to this process's environment. */
  env?: Record<string, string>;
  /** Resolves true once the tool serves requests. */
  ready: () => Promise<boolean>;
  /** How long to wait for `ready`, in milliseconds. */
  readyTimeoutMs?: number;
}

const running = new Set<ChildProcess>();
let exitHooksInstalled = false;

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // The group is already gone.
  }
}

/** Whatever ends this process also ends the tools it started. */
function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.on('exit', () => {
    for (const child of running) killGroup(child, 'SIGKILL');
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      for (const child of running) killGroup(child, 'SIGKILL');
      // Nobody else handles the signal: die of it, as the process would have without this hook.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    });
  }
}

/** Starts a tool in its own process group and resolves once `ready()` answers true. */
export async function startToolProcess(options: ToolProcessOptions): Promise<ToolProcess> {
  const binary = toolBinary(options.name);
  const child = spawn(binary, options.args, {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...options.env },
  });
  installExitHooks();
  running.add(child);
  let output = '';
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-8000);
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
    if (!alive) return;
    killGroup(child, 'SIGTERM');
    const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };

  const deadline = Date.now() + (options.readyTimeoutMs ?? 30_000);
  while (Date.now() < deadline) {
    if (!alive) {
      throw new Error(`${options.name} exited before it was ready. Its output:\n${output}`);
    }
    if (await options.ready().catch(() => false)) return { child, output: () => output, stop };
    // Polling a port that is not listening yet: there is no event to wait for.
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await stop();
  throw new Error(`${options.name} did not become ready in time. Its output:\n${output}`);
}
