import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { startGroupProcess } from './lifecycle';

/** A running Pub/Sub emulator started by {@link startPubSubEmulator}. */
export interface PubSubEmulator {
  /** `127.0.0.1:PORT`, the value clients expect in `PUBSUB_EMULATOR_HOST`. */
  readonly host: string;
  /** `http://127.0.0.1:PORT`, the base of the REST surface (`/v1/projects/...`). */
  readonly baseUrl: string;
  /** Stops the emulator's whole process group (the launcher script and its JVM). */
  stop(): Promise<void>;
}

const INSTALL_HINT =
  'The Pub/Sub emulator from the Google Cloud CLI is required. Install the CLI ' +
  '(https://cloud.google.com/sdk/docs/install) and then the emulator: ' +
  '`gcloud components install pubsub-emulator beta` (or, on Debian/Ubuntu, ' +
  '`apt-get install google-cloud-cli-pubsub-emulator`). ' +
  'Set DOCLINE_PUBSUB_EMULATOR_BIN to the `cloud-pubsub-emulator` script if it lives elsewhere.';

/** Finds the emulator's launcher script, or throws an error that says how to install it. */
export const WELL_KNOWN_SDK_ROOTS: readonly string[] = [
  '/usr/lib/google-cloud-sdk',
  '/usr/share/google-cloud-sdk',
  '/opt/google-cloud-sdk',
];

const LAUNCHER = 'platform/pubsub-emulator/bin/cloud-pubsub-emulator';

export function findEmulatorBinary(
  env: NodeJS.ProcessEnv = process.env,
  sdkRoots: readonly string[] = WELL_KNOWN_SDK_ROOTS,
): string {
  const candidates: string[] = [];
  if (env.DOCLINE_PUBSUB_EMULATOR_BIN) candidates.push(env.DOCLINE_PUBSUB_EMULATOR_BIN);
  for (const root of sdkRoots) candidates.push(path.join(root, LAUNCHER));
  let found = candidates.find((c) => existsSync(c));
  if (!found) {
    // Not in a usual place: ask gcloud where its SDK lives (slow, so only as a last resort).
    try {
      const root = execFileSync('gcloud', ['info', '--format=value(installation.sdk_root)'], {
        encoding: 'utf8',
        env,
        stdio: ['ignore', 'pipe', 'ignore'],
        timeout: 20_000,
      }).trim();
      if (root) candidates.push(path.join(root, LAUNCHER));
    } catch {
      // gcloud is not on PATH either.
    }
    found = candidates.find((c) => existsSync(c));
  }
  if (!found) {
    throw new Error(`Pub/Sub emulator not found (looked in ${candidates.join(', ')}). ${INSTALL_HINT}`);
  }
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

/**
 * Starts the real Pub/Sub emulator on a loopback port, in its own process group, and resolves once
 * its REST surface answers. The group is stopped by `stop()`, and also when this process exits.
 */
export async function startPubSubEmulator(): Promise<PubSubEmulator> {
  const binary = findEmulatorBinary();
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  const baseUrl = `http://${host}`;
  const group = await startGroupProcess({
    label: 'The Pub/Sub emulator',
    command: binary,
    args: ['--host=127.0.0.1', `--port=${port}`],
    ready: async () => (await fetch(`${baseUrl}/`, { signal: AbortSignal.timeout(1_000) })).ok,
    readyTimeoutMs: 60_000,
    hint: INSTALL_HINT,
  });
  return { host, baseUrl, stop: group.stop };
}
