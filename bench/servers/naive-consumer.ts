import path from 'node:path';
import { loadConfig } from '../../worker/src/config';
import { JsonLogger } from '../../worker/src/log';
import { buildAdapters, serve } from '../../worker/src/main';
import { NaiveSqliteStore } from './naive-store';

/**
 * Server (b) of the benchmark: the plain Cloud Run + Pub/Sub sample (parse, process, insert, no
 * dedup) built from the worker's own modules, so that it differs from the worker (c) by the dedup
 * only: the same app (zod envelope + notification through parsePush, the same answers and the same
 * one INFO log line per message), the same LocalBucketReader and OfflineAnalyzer from the same
 * composition code, and an insert into SQLite, but with a store that never looks and never refuses.
 */
async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const logger = new JsonLogger({ level: config.logLevel });
  const adapters = await buildAdapters(config, logger);
  // buildAdapters opened the worker's store; the naive consumer uses its own file instead.
  await adapters.store.close?.();
  const store = new NaiveSqliteStore({ path: path.join(config.dataDir, 'naive.sqlite') });
  const worker = await serve(config, { ...adapters, store }, logger);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      worker.stop().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
