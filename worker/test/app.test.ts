import request from 'supertest';
import type { SqliteStore } from '../src/adapters/stores/sqlite-store';
import { ANSWER_TABLE } from '../src/answers';
import { createApp } from '../src/app';
import {
  ConfigurationError,
  DependencyRefusedError,
  PushAuthError,
  TransientError,
} from '../src/core/errors';
import type { Logger, Store } from '../src/core/ports';
import { JsonLogger } from '../src/log';
import { pushBody } from './support/builders';
import { docsTableRows } from './support/docs-table';
import { MemoryLogger } from './support/fakes';
import { handlerDeps } from './support/handler';

const INVOICE = 'Invoice No INV-7\nTotal due: €1,234.56\n';

function setup(
  options: { store?: Store; authenticate?: (h: string | undefined) => Promise<void>; logger?: Logger } = {},
) {
  const { reader, analyzer, deps } = handlerDeps(options.store ? { store: options.store } : {});
  const logger = new MemoryLogger();
  const app = createApp({
    ...deps,
    logger: options.logger ?? logger,
    pushBodyLimitBytes: 16 * 1024,
    projectId: 'acme-dev',
    authenticate: options.authenticate,
    monotonicMs: () => 0,
  });
  const upload = (id: string, bytes = INVOICE) => {
    const body = pushBody(id, { size: bytes.length });
    reader.put('acme-invoices-dev', '2026/11/facture-0042.txt', '1764460800123456', bytes);
    return body;
  };
  return { app, store: deps.store, reader, analyzer, logger, upload };
}

const failingStore = (error: Error): Store => {
  const fail = () => Promise.reject(error);
  return { seen: fail, record: fail, ping: fail };
};
const busyStore = () => failingStore(new TransientError('store_busy', 'the store is busy'));

describe('POST /push', () => {
  it('answers 200 ok for a processed document, and 200 duplicate for its redelivery', async () => {
    const { app, upload } = setup();
    const body = upload('1');
    const res = await request(app).post('/push').send(body);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok', messageId: '1' });
    const again = await request(app).post('/push').send(body);
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ status: 'duplicate', messageId: '1' });
  });

  it('answers 200 rejected with the reason for a document that can never be processed', async () => {
    const { app, upload } = setup();
    const res = await request(app)
      .post('/push')
      .send(upload('1', 'x'.repeat(2000)));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'rejected', messageId: '1', reason: 'too_large' });
  });

  it('answers 503 for a transient failure, so that Pub/Sub retries', async () => {
    const { app, upload } = setup({ store: busyStore() });
    const res = await request(app).post('/push').send(upload('1'));
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ error: 'transient', message: 'the store is busy', cause: 'store_busy' });
  });

  // The ERROR line's `error` field is what the stack's alerts match (the dependency-outage alert among them).
  it.each([
    [
      'a configuration fault (the service is at fault, not the document)',
      new ConfigurationError('bytes_billed_limit', 'raise MAXIMUM_BYTES_BILLED'),
      { error: 'configuration' },
      'raise MAXIMUM_BYTES_BILLED',
    ],
    [
      'a dependency that refuses the worker, not the document',
      new DependencyRefusedError('analyzer_precondition', 'Gemini refused the project: billing'),
      { error: 'dependency_refused', cause: 'analyzer_precondition' },
      'a dependency refuses the worker: Gemini refused the project',
    ],
  ])('answers 503 for %s and logs it at ERROR', async (_, failure, answer, logged) => {
    const { app, upload, logger } = setup({ store: failingStore(failure) });
    const res = await request(app).post('/push').send(upload('1'));
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject(answer);
    const line = logger.entries.find((e) => e.severity === 'ERROR');
    expect(line?.message).toContain(logged);
    expect(line?.error).toBe(answer.error);
  });

  it('answers 500 without details for an unexpected failure', async () => {
    const { app, upload } = setup({ store: failingStore(new Error('secret internals')) });
    const res = await request(app).post('/push').send(upload('1'));
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ error: 'internal', message: 'unexpected failure; see the worker logs' });
  });

  it.each([
    ['a body that is not JSON', '{not json', 'the push body is not JSON'],
    ['JSON that is no envelope', JSON.stringify({ hello: 'world' }), 'not a Pub/Sub push envelope'],
    ['an envelope without messageId', JSON.stringify({ message: { data: '' } }), 'no message.messageId'],
    ['an empty messageId', JSON.stringify({ message: { messageId: '' } }), 'no message.messageId'],
  ])('answers 400 for %s', async (_title, body, message) => {
    const { app, store } = setup();
    const res = await request(app).post('/push').set('content-type', 'application/json').send(body);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('bad_envelope');
    expect(res.body.message).toContain(message);
    expect((store as SqliteStore).documents()).toHaveLength(0);
  });

  it('answers 413 for a body over the limit', async () => {
    const { app } = setup();
    const body = pushBody('1');
    (body.message as { attributes: Record<string, string> }).attributes.huge = 'x'.repeat(20 * 1024);
    const res = await request(app).post('/push').send(body);
    expect(res.status).toBe(413);
    expect(res.body.error).toBe('too_large_body');
  });

  it('answers 401 and 403 from the push authenticator, before any work', async () => {
    const { app, upload, reader } = setup({
      authenticate: async (header) => {
        if (!header) throw new PushAuthError('unauthenticated', 'no token');
        if (header !== 'Bearer good') throw new PushAuthError('forbidden', 'wrong token');
      },
    });
    const body = upload('1');
    expect((await request(app).post('/push').send(body)).status).toBe(401);
    expect((await request(app).post('/push').set('authorization', 'Bearer bad').send(body)).status).toBe(403);
    expect(reader.reads).toHaveLength(0);
    expect((await request(app).post('/push').set('authorization', 'Bearer good').send(body)).status).toBe(
      200,
    );
  });

  it('never answers 202 (the emulator treats it as a nack)', () => {
    expect(ANSWER_TABLE.map((r) => r.http)).not.toContain(202);
  });

  it('logs one structured line per message with the trace, key, status, latency and tokens', async () => {
    const { app, upload, logger } = setup();
    await request(app)
      .post('/push')
      .set('traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01')
      .send(upload('1'));
    const lines = logger.entries.filter((e) => e.messageId === '1');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      severity: 'INFO',
      message: 'ok',
      status: 'ok',
      dedupKey: 'gs://acme-invoices-dev/2026/11/facture-0042.txt#1764460800123456',
      latencyMs: 0,
      tokens: 1500,
      'logging.googleapis.com/trace': 'projects/acme-dev/traces/0af7651916cd43dd8448eb211c80319c',
    });
    expect(JSON.stringify(lines[0])).not.toContain('Total due');
  });
});

describe('POST /push outcome lines', () => {
  it("logs the outcome of every delivery at LOG_LEVEL=ERROR, so the stack's metrics never go blind", async () => {
    const lines: string[] = [];
    const quiet = new JsonLogger({ level: 'ERROR', write: (l) => lines.push(l) });
    const { app, upload } = setup({ logger: quiet });
    const busy = setup({ logger: quiet, store: busyStore() });

    await request(app).post('/push').send(upload('1')).expect(200);
    await request(app).post('/push').send(upload('1')).expect(200);
    await request(busy.app).post('/push').send(busy.upload('2')).expect(503);

    expect(
      lines
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .map((l) => [l.messageId, l.status, l.httpStatus]),
    ).toEqual([
      ['1', 'ok', 200],
      ['1', 'duplicate', 200],
      ['2', 'error', 503],
    ]);
  });
});

describe('POST /push failure lines', () => {
  it('logs an unexpected failure at ERROR with its stack trace and cause, for Error Reporting', async () => {
    const lines: string[] = [];
    const logger = new JsonLogger({ write: (l) => lines.push(l) });
    const bug = new TypeError('cannot read the row', { cause: new RangeError('index 3 is out of range') });
    const { app, upload } = setup({ logger, store: failingStore(bug) });

    await request(app).post('/push').send(upload('1')).expect(500);

    const line = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.severity === 'ERROR');
    expect(line?.error).toBe('internal');
    expect(line?.stack_trace).toMatch(/^TypeError: cannot read the row\n\s+at /);
    expect(line?.stack_trace).toMatch(/\nCaused by: RangeError: index 3 is out of range\n\s+at /);
  });
});

describe('GET /healthz', () => {
  it('answers 200 when the store is reachable and 503 when it is not', async () => {
    expect((await request(setup().app).get('/healthz')).status).toBe(200);
    const down = setup({ store: failingStore(new Error('down')) });
    expect((await request(down.app).get('/healthz')).status).toBe(503);
  });
});

describe('the answer table in docs/architecture.md', () => {
  it('lists every row of the answer table, and no other', () => {
    expect(docsTableRows('docs/architecture.md', 'answer-table')).toEqual(
      ANSWER_TABLE.map((r) => [
        r.situation,
        String(r.http),
        `\`${'status' in r ? r.status : r.error}\``,
        r.row,
        r.pubsub,
      ]),
    );
  });
});
