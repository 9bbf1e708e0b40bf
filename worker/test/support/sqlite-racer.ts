/**
 * A separate OS process for the SQLite multi-process test: opens the store, says "ready", waits
 * for "go" on stdin, records the row it was given and prints whether it inserted it.
 */
import { createInterface } from 'node:readline';
import { SqliteStore } from '../../src/adapters/stores/sqlite-store';
import type { Row } from '../../src/contract/row';

const [dbPath, rowJson] = process.argv.slice(2);
const store = new SqliteStore({ path: dbPath!, busyTimeoutMs: 10_000 });
const row = JSON.parse(rowJson!) as Row;
process.stdout.write('ready\n');
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (line !== 'go') return;
  store.record(row).then(
    (inserted) => {
      process.stdout.write(`inserted=${inserted}\n`);
      process.exit(0);
    },
    (error: unknown) => {
      process.stdout.write(`error=${String(error)}\n`);
      process.exit(1);
    },
  );
});
