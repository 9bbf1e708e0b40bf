/**
 * `npm run canary -- --target cloud --outputs FILE [--timeout-seconds 600]`: after a deploy, uploads
 * one canary invoice into the deployed bucket under `docline-canary/` and waits, bounded, for its
 * row in the `documents` view. FILE is `pulumi stack output --json` of the stack just deployed.
 * Exit 0: the row is there, every stage timed; 1: the line `canary FAILED at the <stage>` names the
 * first stage that did not answer (notification, push, worker, table) and what to look at; 2: usage.
 * `npm run e2e` runs the same check on the local pipeline (local/lib/canary.ts).
 */
import { readFileSync } from 'node:fs';
import { parseCommandArgs, runCommand, UsageError } from '../lib/args';
import { runCanary } from '../lib/canary';
import { canaryOutputs, cloudCanaryProbes } from '../lib/canary-cloud';

const USAGE = 'usage: npm run canary -- --target cloud --outputs STACK_OUTPUTS.json [--timeout-seconds 600]';

/** Long enough for a cold start, a Gemini call and the batch's MERGE; short of a runner's patience. */
export const DEFAULT_CANARY_TIMEOUT_SECONDS = 600;

async function main(): Promise<number> {
  const { values } = parseCommandArgs(
    process.argv.slice(2),
    { target: { type: 'string' }, outputs: { type: 'string' }, 'timeout-seconds': { type: 'string' } },
    USAGE,
  );
  if (values.target !== 'cloud')
    throw new UsageError(
      `--target must be cloud (got ${values.target ?? 'nothing'}); locally the canary runs inside \`npm run e2e\`. ${USAGE}`,
    );
  if (values.outputs === undefined) throw new UsageError(`--outputs is required. ${USAGE}`);
  const timeoutSeconds = Number(values['timeout-seconds'] ?? DEFAULT_CANARY_TIMEOUT_SECONDS);
  if (!Number.isInteger(timeoutSeconds) || timeoutSeconds < 10 || timeoutSeconds > 3600)
    throw new UsageError(`--timeout-seconds must be a whole number from 10 to 3600. ${USAGE}`);
  const outputs = canaryOutputs(JSON.parse(readFileSync(values.outputs, 'utf8')) as Record<string, unknown>);
  const runId = Date.now().toString(36);
  const print = (line: string) => console.log(line);
  const probes = await cloudCanaryProbes(outputs, runId, print);
  try {
    const result = await runCanary(probes, { timeoutMs: timeoutSeconds * 1000, pollMs: 5_000, runId, print });
    if (result.ok) {
      console.log(`canary: ${result.objectUri} has its row in ${outputs.documentsView}`);
      return 0;
    }
    console.log(result.message);
    return 1;
  } finally {
    await probes.close?.();
  }
}

runCommand('canary', main);
