/**
 * A test composition of the worker: the production composition root (loadConfig → buildAdapters →
 * serve) with fault switches wrapped around the adapters. Only the reliability suites start it;
 * no production configuration can reach these switches, because main.ts never reads them.
 *
 * Switches (environment of this process only):
 * - FAULT_CRASH_AT=after_read|after_analysis|after_record and FAULT_CRASH_NAME=<object name>: the
 *   process SIGKILLs itself at that point, once (a marker file in the data dir remembers it).
 * - FAULT_HOLD_NAME=<object name>: the first analysis of that object waits until a second analysis
 *   of the same object has started (a redelivery overlapping the first request), then both go on.
 * - FAULT_BIGQUERY_URL=<url>: the store is the BigQuery store on that local server (BIGQUERY_TABLE
 *   names the table), instead of a client for the real service.
 * - FAULT_PUSH_CERTS=<JSON {kid: PEM}>: push tokens are verified against these keys instead of
 *   Google's certificates (PUSH_AUTH_AUDIENCE and PUSH_AUTH_SERVICE_ACCOUNT as in production).
 *
 * Every analysis appends one line to `<data dir>/analyses.log` before it starts, so the count
 * survives a SIGKILL.
 */
import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../../src/config';
import type { Analyzer, BatchStore, ObjectRef, Reader } from '../../../src/core/ports';
import { JsonLogger } from '../../../src/log';
import { type Adapters, buildAdapters, buildBaseStore, serve } from '../../../src/main';
import { ANALYSES_LOG, type AnalysisLogLine, type CrashPoint } from './fault-switches';

async function main(): Promise<void> {
  const env = process.env;
  const config = loadConfig(env);
  const logger = new JsonLogger({ level: config.logLevel });

  const crashAt = env.FAULT_CRASH_AT as CrashPoint | undefined;
  const crashName = env.FAULT_CRASH_NAME;
  const crashMarker = path.join(
    config.dataDir,
    `crashed-${crashAt}-${Buffer.from(crashName ?? '').toString('hex')}`,
  );
  const crash = (point: CrashPoint, name: string) => {
    if (point !== crashAt || name !== crashName || existsSync(crashMarker)) return;
    writeFileSync(crashMarker, `${process.pid}\n`);
    process.kill(process.pid, 'SIGKILL');
  };

  const analysesLog = path.join(config.dataDir, ANALYSES_LOG);
  const holdName = env.FAULT_HOLD_NAME;
  const started = new Map<string, number>();
  const waiting = new Map<string, () => void>();

  // The store group commit goes around, under the fault switches below.
  let inner: BatchStore;
  if (env.FAULT_BIGQUERY_URL) {
    if (config.store.kind !== 'bigquery') throw new Error('FAULT_BIGQUERY_URL needs BIGQUERY_TABLE');
    const { BigQueryStore } = await import('../../../src/adapters/stores/bigquery-store.js');
    const { localBigQuery } = await import('../../../../sim/bigquery-rest.js');
    const [project] = config.store.table.split('.');
    inner = new BigQueryStore({
      bigquery: await localBigQuery(env.FAULT_BIGQUERY_URL, project!),
      table: config.store.table,
      location: config.store.location,
      logger,
    });
  } else inner = await buildBaseStore(config, logger);
  const lookups = new Map<string, number>();
  const lookedUp = (key: string) => {
    const count = (lookups.get(key) ?? 0) + 1;
    lookups.set(key, count);
    // The second lookup of the held object is the overlapping redelivery: let the first go on.
    if (holdName && count >= 2 && key.includes(`/${holdName}#`)) waiting.get(holdName)?.();
  };
  const recordingStore: BatchStore = {
    seenMany: (keys) => {
      for (const key of keys) lookedUp(key);
      return inner.seenMany(keys);
    },
    // The crash comes after the batch's MERGE and before any delivery's answer.
    async recordMany(rows) {
      const inserted = await inner.recordMany(rows);
      for (const row of rows) if (row.object_name) crash('after_record', row.object_name);
      return inserted;
    },
    ping: () => inner.ping(),
    close: async () => inner.close?.(),
  };

  // Group commit goes around the fault switches, as production puts it around the store.
  const adapters: Adapters = await buildAdapters(config, logger, recordingStore);

  const reader: Reader = {
    async read(ref: ObjectRef, maxBytes: number) {
      const bytes = await adapters.reader.read(ref, maxBytes);
      crash('after_read', ref.name);
      return bytes;
    },
  };

  const analyzer: Analyzer = {
    async analyze(input) {
      const line: AnalysisLogLine = { name: input.name, pid: process.pid };
      appendFileSync(analysesLog, `${JSON.stringify(line)}\n`);
      const count = (started.get(input.name) ?? 0) + 1;
      started.set(input.name, count);
      if (input.name === holdName && count === 1) {
        // Held until the overlapping redelivery arrives (its lookup, below); a bound keeps a missing
        // redelivery visible as a slow answer instead of a hung worker.
        await new Promise<void>((resolve) => {
          waiting.set(input.name, resolve);
          setTimeout(resolve, 120_000).unref();
        });
      }
      const result = await adapters.analyzer.analyze(input);
      crash('after_analysis', input.name);
      return result;
    },
  };

  let authenticate = adapters.authenticate;
  if (env.FAULT_PUSH_CERTS) {
    if (!config.pushAuth)
      throw new Error('FAULT_PUSH_CERTS needs PUSH_AUTH_AUDIENCE and PUSH_AUTH_SERVICE_ACCOUNT');
    const { createPushVerifier } = await import('../../../src/adapters/push-auth.js');
    const certificates = JSON.parse(env.FAULT_PUSH_CERTS) as Record<string, string>;
    authenticate = createPushVerifier({ ...config.pushAuth, certificates: async () => certificates });
  }

  // A delivery reads the memo first (and skips the lookup when it holds nothing): the second
  // read of one memo key is the overlapping redelivery too.
  const memoReads = new Map<string, number>();
  const memo = adapters.memo && {
    ...adapters.memo,
    get: (key: string) => {
      const count = (memoReads.get(key) ?? 0) + 1;
      memoReads.set(key, count);
      if (holdName && count >= 2 && started.get(holdName) === 1) waiting.get(holdName)?.();
      return adapters.memo!.get(key);
    },
    create: adapters.memo.create.bind(adapters.memo),
    lease: adapters.memo.lease.bind(adapters.memo),
    renew: adapters.memo.renew.bind(adapters.memo),
  };
  const worker = await serve(
    config,
    {
      ...adapters,
      ...(memo ? { memo } : {}),
      reader,
      analyzer,
      authenticate,
    },
    logger,
  );
  process.once('SIGTERM', () => {
    void worker.stop().then(() => process.exit(0));
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
