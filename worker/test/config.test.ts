import path from 'node:path';
import { ConfigError, loadConfig } from '../src/config';
import { DELIVERY_DEFAULTS } from '../src/contract/settings';

describe('loadConfig', () => {
  it('runs on embedded defaults when nothing is set: SQLite, local bucket, offline analyzer', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8080,
      dataDir: path.resolve('.docline'),
      dedupKeyMode: 'object',
      maxObjectBytes: DELIVERY_DEFAULTS.maxObjectBytes,
      store: { kind: 'sqlite', path: path.resolve('.docline/docline.sqlite') },
      reader: { kind: 'local', root: path.resolve('.docline/bucket') },
      analyzer: { kind: 'offline' },
      pushAuth: null,
      workerVersion: 'dev',
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('selects the cloud adapters from their settings', () => {
    const config = loadConfig({
      BIGQUERY_TABLE: 'acme-dev.docline.rows',
      BIGQUERY_LOCATION: 'EU',
      WRITE_MODE: 'append',
      DOCLINE_READER: 'gcs',
      GOOGLE_CLOUD_PROJECT: 'acme-dev',
      DOCLINE_ANALYZER: 'gemini',
      GEMINI_MODEL: 'gemini-2.5-pro',
      K_REVISION: 'docline-worker-00042-abc',
      PUSH_AUTH_AUDIENCE: 'https://worker.run.app/push',
      PUSH_AUTH_SERVICE_ACCOUNT: 'push@acme-dev.iam.gserviceaccount.com',
    });
    expect(config.store).toEqual({
      kind: 'bigquery',
      table: 'acme-dev.docline.rows',
      location: 'EU',
      dedupWindowDays: DELIVERY_DEFAULTS.dedupWindowDays,
      maximumBytesBilled: DELIVERY_DEFAULTS.maximumBytesBilled,
      writeMode: 'append',
    });
    expect(config.reader.kind).toBe('gcs');
    expect(config.analyzer).toMatchObject({
      kind: 'gemini',
      project: 'acme-dev',
      model: 'gemini-2.5-pro',
      apiKey: undefined,
    });
    expect(config.workerVersion).toBe('docline-worker-00042-abc');
    expect(config.pushAuth).toEqual({
      audience: 'https://worker.run.app/push',
      serviceAccount: 'push@acme-dev.iam.gserviceaccount.com',
    });
  });

  it('uses Gemini in API-key mode when GEMINI_API_KEY is set', () => {
    expect(loadConfig({ GEMINI_API_KEY: 'k' }).analyzer).toMatchObject({ kind: 'gemini', apiKey: 'k' });
  });

  it('lists every problem in one error', () => {
    let error: unknown;
    try {
      loadConfig({
        PORT: 'eighty',
        DEDUP_KEY: 'both',
        MAX_OBJECT_BYTES: '0',
        BIGQUERY_TABLE: 'not a table',
        MAXIMUM_BYTES_BILLED: '1000',
        DEDUP_WINDOW_DAYS: '3',
        DOCLINE_ANALYZER: 'gemini',
        PUSH_AUTH_AUDIENCE: 'x',
        ALLOWED_CONTENT_TYPES: 'application/pdf,not a type',
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    for (const name of [
      'PORT',
      'DEDUP_KEY',
      'MAX_OBJECT_BYTES',
      'BIGQUERY_TABLE',
      'MAXIMUM_BYTES_BILLED',
      'DEDUP_WINDOW_DAYS',
      'GEMINI_API_KEY',
      'PUSH_AUTH_SERVICE_ACCOUNT',
      'ALLOWED_CONTENT_TYPES',
    ]) {
      expect(problems).toContain(name);
    }
    expect((error as ConfigError).problems).toHaveLength(9);
  });

  it('calls Gemini next to the data unless GOOGLE_CLOUD_LOCATION says otherwise', () => {
    const vertex = { DOCLINE_ANALYZER: 'gemini', GOOGLE_CLOUD_PROJECT: 'acme-dev' };

    expect(loadConfig(vertex).analyzer).toMatchObject({ location: 'europe-west1' });
    expect(loadConfig({ ...vertex, BIGQUERY_LOCATION: 'US' }).analyzer).toMatchObject({
      location: 'us-central1',
    });
    expect(loadConfig({ ...vertex, GOOGLE_CLOUD_LOCATION: 'global' }).analyzer).toMatchObject({
      location: 'global',
    });
  });

  it('refuses append mode without BigQuery', () => {
    expect(() => loadConfig({ WRITE_MODE: 'append' })).toThrow('WRITE_MODE=append needs BIGQUERY_TABLE');
  });
});
