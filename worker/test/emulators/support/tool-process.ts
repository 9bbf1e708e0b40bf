import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { type GroupProcess, startGroupProcess } from '../../../../local/lib/lifecycle';

/**
 * Runs one of the third-party emulators that `scripts/install-emulators.sh` builds into
 * `.tools/bin`, the way local/lib/emulator.ts runs the Pub/Sub emulator: in its own process group on a
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

export interface ToolProcessOptions {
  name: ToolName;
  args: string[];
  /** Added to this process's environment. */
  env?: Record<string, string>;
  /** Resolves true once the tool serves requests. */
  ready: () => Promise<boolean>;
}

/** Starts a tool in its own process group and resolves once `ready()` answers true. */
export function startToolProcess(options: ToolProcessOptions): Promise<GroupProcess> {
  return startGroupProcess({
    label: options.name,
    command: toolBinary(options.name),
    args: options.args,
    env: options.env,
    ready: options.ready,
    readyTimeoutMs: 30_000,
  });
}
