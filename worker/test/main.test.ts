import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { GeminiAnalyzer } from '../src/adapters/analyzers/gemini-analyzer';
import { OfflineAnalyzer } from '../src/adapters/analyzers/offline-analyzer';
import { FileMemoStore } from '../src/adapters/memo-stores/file-memo-store';
import { GcsMemoStore } from '../src/adapters/memo-stores/gcs-memo-store';
import { GcsReader } from '../src/adapters/readers/gcs-reader';
import { LocalBucketReader } from '../src/adapters/readers/local-bucket';
import { BigQueryStore } from '../src/adapters/stores/bigquery-store';
import { GroupCommitStore } from '../src/adapters/stores/group-commit-store';
import { SqliteStore } from '../src/adapters/stores/sqlite-store';
import { loadConfig } from '../src/config';
import { buildAdapters } from '../src/main';
import { MemoryLogger } from './support/fakes';

describe('buildAdapters (the composition root)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'docline-main-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  /** The adapters the composition root builds for `env` over the test's data folder. */
  const build = (env: Record<string, string> = {}) =>
    buildAdapters(loadConfig({ DOCLINE_DATA_DIR: dir, ...env }), new MemoryLogger());

  it('picks the embedded adapters when no cloud setting is given', async () => {
    const adapters = await build();
    expect(adapters.store).toBeInstanceOf(GroupCommitStore);
    expect(inner(adapters.store)).toBeInstanceOf(SqliteStore);
    // The offline analyzer is free: no memo in front of it unless asked for.
    expect(adapters.memo).toBeUndefined();
    expect(adapters.reader).toBeInstanceOf(LocalBucketReader);
    expect(adapters.analyzer).toBeInstanceOf(OfflineAnalyzer);
    expect(adapters.authenticate).toBeUndefined();
    await adapters.store.close?.();
  });

  it('keeps the memo in the data folder when asked for, without a bucket', async () => {
    const adapters = await build({ MEMO: 'on' });
    expect(adapters.memo).toBeInstanceOf(FileMemoStore);
    await adapters.store.close?.();
  });

  it('picks BigQuery, Cloud Storage, Gemini and push-token verification from their settings', async () => {
    const adapters = await build({
      BIGQUERY_TABLE: 'acme-dev.docline.rows',
      DOCLINE_READER: 'gcs',
      GEMINI_API_KEY: 'test-key',
      PUSH_AUTH_AUDIENCE: 'https://docline-dev.docline.invalid/push',
      PUSH_AUTH_SERVICE_ACCOUNT: 'push@acme-dev.iam.gserviceaccount.com',
      MEMO_BUCKET: 'acme-dev-docline-memo',
    });
    expect(inner(adapters.store)).toBeInstanceOf(BigQueryStore);
    expect(adapters.memo).toBeInstanceOf(GcsMemoStore);
    expect(adapters.reader).toBeInstanceOf(GcsReader);
    expect(adapters.analyzer).toBeInstanceOf(GeminiAnalyzer);
    await expect(adapters.authenticate?.(undefined)).rejects.toMatchObject({ code: 'unauthenticated' });
  });

  it('keeps no memo when it is switched off, and writes through group commit all the same', async () => {
    const adapters = await build({ MEMO: 'off' });
    expect(inner(adapters.store)).toBeInstanceOf(SqliteStore);
    expect(adapters.memo).toBeUndefined();
    await adapters.store.close?.();
  });
});

/** The store a group-commit decorator wraps. */
function inner(store: unknown): unknown {
  return (store as { inner: unknown }).inner;
}
