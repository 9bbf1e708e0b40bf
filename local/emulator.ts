import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';

/** A running Pub/Sub emulator started by {@link startPubSubEmulator}. */
export interface PubSubEmulator {
  /** `127.0.0.1:PORT`, the value clients expect in `PUBSUB_EMULATOR_HOST`. */
  readonly host: string;
  /** `http://127.0.0.1:PORT`, the base of the REST surface (`/v1/projects/...`). */
  readonly baseUrl: string;
  /** Stops the emulator's whole process group (the launcher script and its JVM). */
  stop(): Promise<void>;
}

export interface StartOptions {
  /** Port to listen on; a free loopback port when omitted. */
  port?: number;
  /** How long to wait for the emulator to answer, in milliseconds. */
  readyTimeoutMs?: number;
  /** Receives the emulator's output lines (for debugging); silent when omitted. */
  onOutput?: (line: string) => void;
}

const INSTALL_HINT =
  'The Pub/Sub emulator from the Google Cloud CLI is required. Install the CLI ' +
  '(https://cloud.google.com/sdk/docs/install) and then the emulator: ' +
  '`gcloud components install pubsub-emulator beta` (or, on Debian/Ubuntu, ' +
  '`apt-get install google-cloud-cli-pubsub-emulator`). ' +
  'Set DOCLINE_PUBSUB_EMULATOR_BIN to the `cloud-pubsub-emulator` script if it lives elsewhere.';

/** Finds the emulator's launcher script, or throws an error that says how to install it. */
export function findEmulatorBinary(env: NodeJS.ProcessEnv = process.env): string {
  const candidates: string[] = [];
  if (env.DOCLINE_PUBSUB_EMULATOR_BIN) candidates.push(env.DOCLINE_PUBSUB_EMULATOR_BIN);
  const roots = ['/usr/lib/google-cloud-sdk', '/usr/share/google-cloud-sdk', '/opt/google-cloud-sdk'];
  try {
    const root = execFileSync('gcloud', ['info', '--format=value(installation.sdk_root)'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 20_000,
    }).trim();
    if (root) roots.unshift(root);
  } catch {
    // gcloud is not on PATH: the well-known install folders below are still worth a look.
  }
  for (const root of roots)
    candidates.push(path.join(root, 'platform/pubsub-emulator/bin/cloud-pubsub-emulator'));
  const found = candidates.find((c) => existsSync(c));
  if (!found)
    throw new Error(`Pub/Sub emulator not found (looked in ${candidates.join(', ')}). ${INSTALL_HINT}`);
  return found;
}

/** Asks the kernel for a free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
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

/** Whatever ends this process also ends the emulators it started: no orphaned JVMs. */
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

/**
 * Starts the real Pub/Sub emulator on a loopback port, in its own process group, and resolves once
 * its REST surface answers. The group is stopped by `stop()`, and also when this process exits.
 */
export async function startPubSubEmulator(options: StartOptions = {}): Promise<PubSubEmulator> {
  const binary = findEmulatorBinary();
  const port = options.port ?? (await freePort());
  const host = `127.0.0.1:${port}`;
  const baseUrl = `http://${host}`;
  const child = spawn(binary, [`--host=127.0.0.1`, `--port=${port}`], {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  installExitHooks();
  running.add(child);
  let output = '';
  const collect = (chunk: Buffer) => {
    const text = chunk.toString();
    output = (output + text).slice(-4000);
    if (options.onOutput) for (const line of text.split('\n')) if (line) options.onOutput(line);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.once('exit', () => running.delete(child));

  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    killGroup(child, 'SIGTERM');
    const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
    killGroup(child, 'SIGKILL'); // the JVM may outlive the launcher script
  };

  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  let stillStarting = true;
  void exited.then(() => {
    stillStarting = false;
  });
  while (Date.now() < deadline) {
    if (!stillStarting) {
      throw new Error(
        `The Pub/Sub emulator exited before it was ready. Its output:\n${output}\n${INSTALL_HINT}`,
      );
    }
    try {
      const res = await fetch(`${baseUrl}/`, { signal: AbortSignal.timeout(1_000) });
      if (res.ok) return { host, baseUrl, stop };
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  await stop();
  throw new Error(
    `The Pub/Sub emulator did not answer on ${host} within the timeout. Its output:\n${output}`,
  );
}
