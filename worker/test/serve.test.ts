import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { postPush } from '../../local/lib/worker-process';
import { SqliteStore } from '../src/adapters/stores/sqlite-store';
import { loadConfig } from '../src/config';
import { serve } from '../src/main';
import { pushBody } from './support/builders';
import { MemoryLogger, MemoryReader, ScriptedAnalyzer } from './support/fakes';

describe('serve().stop() (what SIGTERM calls)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'docline-serve-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('lets an in-flight delivery finish and record its row before closing', async () => {
    const config = loadConfig({ DOCLINE_DATA_DIR: dir, PORT: '0' });
    const store = new SqliteStore({ path: path.join(dir, 'docline.sqlite') });
    const reader = new MemoryReader();
    const analyzer = new ScriptedAnalyzer().hold();
    const text = 'Invoice No INV-9\nTotal due: €10.00\n';
    reader.put('acme-invoices-dev', '2026/11/facture-0042.txt', '1764460800123456', text);
    const worker = await serve(config, { store, reader, analyzer }, new MemoryLogger());

    const inFlight = postPush(`http://127.0.0.1:${worker.port}`, pushBody('1', { size: text.length }));
    await analyzer.arrived(1);
    const stopping = worker.stop();
    analyzer.release();
    const res = await inFlight;
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok', messageId: '1' });
    await stopping;
    // The store is closed only after the request recorded its row.
    const reopened = new SqliteStore({ path: path.join(dir, 'docline.sqlite') });
    expect(reopened.documents()).toHaveLength(1);
    await reopened.close();
  });
});
