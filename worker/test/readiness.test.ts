import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { postPush } from '../../local/lib/worker-process';
import { createGeminiClient, GeminiAnalyzer } from '../src/adapters/analyzers/gemini-analyzer';
import { SqliteStore } from '../src/adapters/stores/sqlite-store';
import { loadConfig } from '../src/config';
import { DEFAULT_GEMINI_MODEL } from '../src/contract/models';
import { type RunningWorker, serve } from '../src/main';
import { pushBody } from './support/builders';
import { type FakeGemini, startFakeGemini } from './support/fake-gemini';
import { MemoryLogger, MemoryReader } from './support/fakes';

/*
 * The worker's readiness: at start-up, once, it asks Gemini for the configured model; a model
 * Gemini does not serve (404) keeps `/healthz`, the Cloud Run startup probe, at 503, so the revision
 * never becomes ready, and is logged once at ERROR as a configuration fault naming the settings.
 * The real @google/genai client talks to fake-gemini (worker/test/support/fake-gemini.ts).
 */

const httpOptions = { fetch: (...args: Parameters<typeof fetch>) => fetch(...args) };
const TEXT = 'Invoice No INV-9\nTotal due: €10.00\n';

describe('readiness: the configured model, checked once at start-up', () => {
  let dir: string;
  let fake: FakeGemini;
  let logger: MemoryLogger;
  let store: SqliteStore;
  let worker: RunningWorker | undefined;

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'docline-ready-'));
    fake = await startFakeGemini();
    logger = new MemoryLogger();
    store = new SqliteStore({ path: path.join(dir, 'docline.sqlite') });
  });
  afterEach(async () => {
    await worker?.stop(1_000);
    worker = undefined;
    await fake.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function start(): Promise<string> {
    const reader = new MemoryReader();
    reader.put('acme-invoices-dev', '2026/11/facture-0042.txt', '1764460800123456', TEXT);
    const analyzer = new GeminiAnalyzer({
      client: createGeminiClient({ apiKey: 'test-key', baseUrl: fake.url, httpOptions }),
      model: DEFAULT_GEMINI_MODEL,
      logger,
    });
    worker = await serve(
      loadConfig({ DOCLINE_DATA_DIR: dir, PORT: '0' }),
      { store, reader, analyzer },
      logger,
    );
    await worker.checked;
    return `http://127.0.0.1:${worker.port}`;
  }

  it('is ready when Gemini serves the model, after one models.get however often the probe asks', async () => {
    const url = await start();
    for (let i = 0; i < 3; i++) expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect(fake.modelLookups.map((l) => l.model)).toEqual([DEFAULT_GEMINI_MODEL]);
    expect(fake.requests).toEqual([]);
  });

  it('answers /healthz 503 for a model Gemini answers 404, and logs it once at ERROR naming the settings', async () => {
    fake.retire(DEFAULT_GEMINI_MODEL);
    const url = await start();
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${url}/healthz`);
      expect(res.status).toBe(503);
      expect(await res.json()).toMatchObject({ status: 'unavailable', error: 'configuration' });
    }
    expect(fake.modelLookups).toHaveLength(1);
    const errors = logger.entries.filter((e) => e.severity === 'ERROR');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ error: 'configuration', code: 'analyzer_model_not_found' });
    expect(errors[0]!.message).toMatch(/GEMINI_MODEL \(the stack's docline:geminiModel\)/);
  });

  it('answers a delivery that reaches it anyway 503 configuration, with no row: never a rejected document', async () => {
    fake.retire(DEFAULT_GEMINI_MODEL);
    const url = await start();
    const res = await postPush(url, pushBody('1', { size: TEXT.length }));
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ error: 'configuration' });
    expect(store.documents()).toEqual([]);
  });
});
