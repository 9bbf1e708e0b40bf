import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../src/config';
import {
  afterAnswerMs,
  DELIVERY_DEFAULTS,
  deliveryPathMs,
  MEMO_CALL_TIMEOUT_MS,
  MEMO_CALLS_AFTER_ANSWER,
  MERGE_PACE_STRETCH,
  MIN_STATEMENT_MS,
  SETTINGS,
} from '../src/contract/settings';
import { ConfigError } from '../src/core/errors';

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
      redeliveryWindowDays: DELIVERY_DEFAULTS.redeliveryWindowDays,
      maximumBytesBilled: DELIVERY_DEFAULTS.maximumBytesBilled,
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
        REDELIVERY_WINDOW_DAYS: '3',
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
      'REDELIVERY_WINDOW_DAYS',
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

  it('turns group commit on by default, with no DML pacing on SQLite', () => {
    const config = loadConfig({ DOCLINE_DATA_DIR: '/tmp/docline-config' });
    // SQLite has no per-table DML budget: a batch goes as soon as the previous commit is back.
    expect(config.groupCommit).toEqual({
      maxRows: DELIVERY_DEFAULTS.batchMaxRows,
      maxWaitMs: 0,
      minIntervalMs: 0,
    });
  });

  it('keeps a memo by default only in front of a paid analyzer, in a local folder without a bucket', () => {
    // The offline analyzer is free: nothing to keep.
    expect(loadConfig({}).memo).toBeNull();
    expect(loadConfig({ MEMO: 'on' }).memo).toMatchObject({ kind: 'file' });
    const config = loadConfig({ DOCLINE_DATA_DIR: '/tmp/docline-config', GEMINI_API_KEY: 'k' });
    expect(config.memo).toEqual({
      kind: 'file',
      root: '/tmp/docline-config/memo',
      ttlMs: DELIVERY_DEFAULTS.redeliveryWindowDays * 86_400_000,
    });
  });

  it('awaits a Gemini call until the deadline less the memo calls and the write that follow the answer', () => {
    const bigquery = loadConfig({ BIGQUERY_TABLE: 'acme-dev.docline.rows', GEMINI_API_KEY: 'k' });
    const paced = bigquery.groupCommit!;
    // The keep, the write's lease and its renewal; then the write at its most stretched pace.
    expect(bigquery.analyzer).toMatchObject({
      kind: 'gemini',
      afterAnswerMs:
        3 * MEMO_CALL_TIMEOUT_MS +
        paced.maxWaitMs +
        MERGE_PACE_STRETCH * paced.minIntervalMs +
        MIN_STATEMENT_MS,
    });
    // The same write part as the longest delivery path counts, so the two cannot drift apart.
    const settings = { batchMaxWaitMs: paced.maxWaitMs, mergeMinIntervalMs: paced.minIntervalMs };
    const path = deliveryPathMs({ ...DELIVERY_DEFAULTS, ...settings });
    expect(afterAnswerMs(settings)).toBe(MEMO_CALLS_AFTER_ANSWER * MEMO_CALL_TIMEOUT_MS + path.write);
    // SQLite takes no pace: the memo calls and one statement follow the answer.
    expect(loadConfig({ GEMINI_API_KEY: 'k' }).analyzer).toMatchObject({
      afterAnswerMs: 3 * MEMO_CALL_TIMEOUT_MS + MIN_STATEMENT_MS,
    });
  });

  it("paces group commit by BigQuery's DML budget when the store is BigQuery, unless told otherwise", () => {
    const bigquery = { BIGQUERY_TABLE: 'acme-dev.docline.rows' };
    expect(loadConfig(bigquery).groupCommit).toEqual({
      maxRows: DELIVERY_DEFAULTS.batchMaxRows,
      maxWaitMs: DELIVERY_DEFAULTS.batchMaxWaitMs,
      minIntervalMs: DELIVERY_DEFAULTS.mergeMinIntervalMs,
    });
    expect(DELIVERY_DEFAULTS.mergeMinIntervalMs).toBe(5_000);
    expect(loadConfig({ ...bigquery, MERGE_MIN_INTERVAL_MS: '8000' }).groupCommit?.minIntervalMs).toBe(8_000);
    expect(loadConfig({ MERGE_MIN_INTERVAL_MS: '250', BATCH_MAX_WAIT_MS: '20' }).groupCommit).toMatchObject({
      maxWaitMs: 20,
      minIntervalMs: 250,
    });
  });

  it('keeps the memo in a bucket when MEMO_BUCKET is set, for as long as the redelivery window', () => {
    const config = loadConfig({
      GEMINI_API_KEY: 'k',
      BIGQUERY_TABLE: 'acme-dev.docline.rows',
      REDELIVERY_WINDOW_DAYS: '20',
      MEMO_BUCKET: 'acme-dev-docline-memo',
    });
    expect(config.memo).toEqual({ kind: 'gcs', bucket: 'acme-dev-docline-memo', ttlMs: 20 * 86_400_000 });
  });

  it('names every wrong group-commit or memo setting', () => {
    expect(() =>
      loadConfig({
        BATCH_MAX_ROWS: '5000',
        BATCH_MAX_WAIT_MS: '-1',
        MEMO_BUCKET: 'Not A Bucket',
      }),
    ).toThrow(
      expect.objectContaining({
        problems: [
          'BATCH_MAX_ROWS must be a whole number from 1 to 2000 (got "5000").',
          'BATCH_MAX_WAIT_MS must be a whole number from 0 to 10000 (got "-1").',
          expect.stringContaining('MEMO_BUCKET must be a Cloud Storage bucket name'),
        ],
      }),
    );
    expect(() => loadConfig({ BATCH_MAX_ROWS: '5000', BATCH_MAX_WAIT_MS: 'soon' })).toThrow(
      expect.objectContaining({
        problems: [
          'BATCH_MAX_ROWS must be a whole number from 1 to 2000 (got "5000").',
          'BATCH_MAX_WAIT_MS must be a whole number from 0 to 10000 (got "soon").',
        ],
      }),
    );
  });

  it('refuses GROUP_COMMIT, a setting no more, instead of ignoring it', () => {
    for (const value of ['off', 'on'])
      expect(() => loadConfig({ GROUP_COMMIT: value })).toThrow(
        expect.objectContaining({
          problems: [
            expect.stringMatching(
              /^GROUP_COMMIT is no longer a setting: every write goes through group commit .*Remove it\.$/,
            ),
          ],
        }),
      );
  });

  it('switches the memo off on request', () => {
    const config = loadConfig({ MEMO: 'off', MEMO_BUCKET: 'ignored-bucket' });
    expect(config.memo).toBeNull();
  });
});

describe('the settings table, on the worker side', () => {
  it('is what config.ts reads: every row with a variable, and no other', () => {
    const source = readFileSync(path.join(__dirname, '../src/config.ts'), 'utf8');
    // Every setting config.ts reads (through `read('key')`).
    const read = new Set([...source.matchAll(/\bread\(\s*'(\w+)'/g)].map((m) => m[1]!));
    const withVariable = Object.entries(SETTINGS).filter(([, s]) => 'env' in s);
    expect([...read].sort()).toEqual(withVariable.map(([key]) => key).sort());
    // No variable is read around the table.
    expect(source).not.toMatch(/env(\.[A-Z]|\['[A-Z])/);
  });

  it("checks each value against its row's bounds, naming the variable", () => {
    expect(() => loadConfig({ ANALYZER_MAX_IN_FLIGHT: '1001', PUSH_BODY_LIMIT_BYTES: '10' })).toThrow(
      expect.objectContaining({
        problems: [
          'PUSH_BODY_LIMIT_BYTES must be a whole number from 1024 to 16777216 (got "10").',
          'ANALYZER_MAX_IN_FLIGHT must be a whole number from 1 to 1000 (got "1001").',
        ],
      }),
    );
  });
});
