import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BigQueryStore } from '../src/adapters/bigquery-store';
import { GcsReader } from '../src/adapters/gcs-reader';
import { GeminiAnalyzer } from '../src/adapters/gemini-analyzer';
import { LocalBucketReader } from '../src/adapters/local-bucket';
import { OfflineAnalyzer } from '../src/adapters/offline-analyzer';
import { SqliteStore } from '../src/adapters/sqlite-store';
import { loadConfig } from '../src/config';
import { buildAdapters } from '../src/main';
import { MemoryLogger } from './support/fakes';

describe('buildAdapters (the composition root)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'docline-main-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('picks the embedded adapters when no cloud setting is given', async () => {
    const adapters = await buildAdapters(loadConfig({ DOCLINE_DATA_DIR: dir }), new MemoryLogger());
    expect(adapters.store).toBeInstanceOf(SqliteStore);
    expect(adapters.reader).toBeInstanceOf(LocalBucketReader);
    expect(adapters.analyzer).toBeInstanceOf(OfflineAnalyzer);
    expect(adapters.authenticate).toBeUndefined();
    await adapters.store.close?.();
  });

  it('picks BigQuery, Cloud Storage, Gemini and push-token verification from their settings', async () => {
    const config = loadConfig({
      DOCLINE_DATA_DIR: dir,
      BIGQUERY_TABLE: 'acme-dev.docline.rows',
      DOCLINE_READER: 'gcs',
      GEMINI_API_KEY: 'test-key',
      PUSH_AUTH_AUDIENCE: 'https://docline-dev.docline.invalid/push',
      PUSH_AUTH_SERVICE_ACCOUNT: 'push@acme-dev.iam.gserviceaccount.com',
    });
    const adapters = await buildAdapters(config, new MemoryLogger());
    expect(adapters.store).toBeInstanceOf(BigQueryStore);
    expect(adapters.reader).toBeInstanceOf(GcsReader);
    expect(adapters.analyzer).toBeInstanceOf(GeminiAnalyzer);
    await expect(adapters.authenticate?.(undefined)).rejects.toMatchObject({ code: 'unauthenticated' });
  });
});
