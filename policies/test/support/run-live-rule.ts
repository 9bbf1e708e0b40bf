/**
 * Runs the pack's real live rule (real credential detection, real @google-cloud/storage client) on
 * the shipped test stack and prints its diagnostics as JSON. The live tests start it as a process of
 * its own, so the rule's credential detection reads an environment and a home folder the test
 * controls, and the storage client runs outside jest's module sandbox, as under the Pulumi CLI.
 *
 * Usage: node --import tsx policies/test/support/run-live-rule.ts MODE [API_ENDPOINT]
 */
import {
  LIVE_POLICY,
  LIVE_UNCHECKED_POLICY,
  liveBucketNotifications,
  liveBucketNotificationsUnchecked,
} from '../../rules/live';
import { type Mode, validStack } from '../fixtures';
import { analyzeStack } from '../harness';

async function run(): Promise<void> {
  const mode = (process.argv[2] ?? 'update') as Mode;
  const apiEndpoint = process.argv[3] ?? '';
  const diagnostics = await analyzeStack(validStack(mode), {
    policies: [liveBucketNotifications, liveBucketNotificationsUnchecked],
    config: {
      [LIVE_POLICY]: { apiEndpoint, timeoutMs: 5_000 },
      [LIVE_UNCHECKED_POLICY]: { apiEndpoint, timeoutMs: 5_000 },
    },
  });
  process.stdout.write(JSON.stringify(diagnostics));
}

run().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
