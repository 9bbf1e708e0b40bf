/**
 * `npm run check-pruning -- --outputs FILE [--location EU]`: after a deploy (beside the canary),
 * dry-runs the worker's lookup and MERGE statements against the deployed table and holds each
 * estimate to what the cost model predicts for that table's age (local/lib/pruning-check.ts). FILE
 * is `pulumi stack output --json` of the stack just deployed (its `tableId`). Dry runs are free.
 * Exit 0: every estimate within its prediction (or the table too young to tell, said per
 * statement); 1: the line `check-pruning FAILED` names the statements BigQuery does not prune; 2:
 * usage. A table that cannot be read exits 1 with the reason.
 */
import { readFileSync } from 'node:fs';
import { parseCommandArgs, runCommand, UsageError } from '../lib/args';
import { checkPruning } from '../lib/pruning-check';

const USAGE = 'usage: npm run check-pruning -- --outputs STACK_OUTPUTS.json [--location LOCATION]';

async function main(): Promise<number> {
  const { values } = parseCommandArgs(
    process.argv.slice(2),
    { outputs: { type: 'string' }, location: { type: 'string' } },
    USAGE,
  );
  if (values.outputs === undefined) throw new UsageError(`--outputs is required. ${USAGE}`);
  const outputs = JSON.parse(readFileSync(values.outputs, 'utf8')) as Record<string, unknown>;
  const table = outputs.tableId;
  if (typeof table !== 'string' || table === '')
    throw new UsageError(
      `the stack outputs in ${values.outputs} lack tableId: was the stack deployed by this program?`,
    );
  const { BigQuery } = require('@google-cloud/bigquery') as typeof import('@google-cloud/bigquery');
  const bigquery = new BigQuery({ projectId: table.split('.')[0]! });
  const verdict = await checkPruning({ bigquery, table, location: values.location, now: new Date() });
  for (const line of verdict.lines) console.log(line);
  return verdict.ok ? 0 : 1;
}

runCommand('check-pruning', main);
