import { readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { listDeadLetters } from '../../../local/lib/dead-letter-subscription';
import { LOCAL_BUCKET, LOCAL_NAMES, type Pipeline, startPipeline } from '../../../local/lib/pipeline';
import type { WorkerLogLine } from '../../../local/lib/worker-process';
import type { SqliteStore } from '../../src/adapters/stores/sqlite-store';
import { dataDirLayout } from '../../src/contract/data-dir';
import type { RejectionReason } from '../../src/core/errors';
import { objectUri } from '../../src/core/event';
import { notificationAttributes, objectResource, pushBody } from '../support/builders';
import {
  blockedCandidateResponse,
  blockedPromptResponse,
  type FakeGemini,
  geminiResponse,
  startFakeGemini,
} from '../support/fake-gemini';
import {
  analysesByName,
  FAULTY_WORKER,
  isAnswer,
  LogAudit,
  openRows,
  peakRssBytes,
  recordCase,
  rowCount,
  sampleInvoices,
  tempDataDir,
  waitUntil,
} from './support/harness';

/*
 * Hostile and bad input: a table of requests sent over HTTP to the running worker process (test
 * composition, SQLite, Gemini's local stand-in), each with the answer and the row it must get.
 * Then the cases a publisher could produce go through the Pub/Sub emulator too, and hostile object
 * names go through the local bucket, which must never be escaped.
 */

const SUITE = 'hostile';
const MAX_OBJECT_BYTES = 64 * 1024;
const BODY_LIMIT_BYTES = 256 * 1024;
const GEMINI_KEY = 'gemini-key-hostile-never-logged';
const SECRET = 'TOP-SECRET-OUTSIDE-THE-BUCKET';
const MAX_PEAK_RSS_BYTES = 512 * 1024 * 1024;
const invoice = sampleInvoices()[0]!;

type RowOutcome = 'ok' | 'rejected' | 'duplicate' | 'none';

interface Request {
  /** A raw body, or a value sent as JSON. */
  body: unknown;
  raw?: boolean;
  contentType?: string;
}

interface HostileCase {
  case: string;
  /** Builds the request for messageId `id`; may store objects or script the analyzer first. */
  build: (id: string) => Promise<Request>;
  http: number;
  /** `status` of a 200 answer, `error` of any other. */
  answer: string;
  reason?: RejectionReason;
  row: RowOutcome;
  /** Whether a publisher can produce it (attributes + data): it also goes through the emulator. */
  publishable?: boolean;
}

describe('hostile and bad input (worker process over HTTP, Pub/Sub emulator, local bucket)', () => {
  const data = tempDataDir('hostile');
  const audit = new LogAudit();
  let pipeline: Pipeline;
  let rows: SqliteStore;
  let gemini: FakeGemini;
  let url: string;

  beforeAll(async () => {
    gemini = await startFakeGemini();
    pipeline = await startPipeline({
      dataDir: data.dir,
      settings: {
        minRetryBackoffSeconds: 1,
        maxRetryBackoffSeconds: 2,
        maxDeliveryAttempts: 5,
        maxObjectBytes: MAX_OBJECT_BYTES,
        pushBodyLimitBytes: BODY_LIMIT_BYTES,
      },
      workerEntry: FAULTY_WORKER,
      workerEnv: { DOCLINE_ANALYZER: 'gemini', GEMINI_API_KEY: GEMINI_KEY, GEMINI_BASE_URL: gemini.url },
    });
    audit.watch(pipeline.worker);
    url = pipeline.worker.url;
    rows = openRows(data.dir);
    writeFileSync(path.join(data.dir, 'outside-secret.txt'), `${SECRET}\n`);
  });

  afterAll(async () => {
    await rows?.close();
    await pipeline?.stop();
    await gemini?.stop();
    data.cleanup();
  });

  /** Stores an object and returns the push body that announces it. */
  async function stored(
    id: string,
    name: string,
    bytes: Buffer,
    contentType = 'text/plain',
    declaredSize = bytes.length,
  ): Promise<Record<string, unknown>> {
    const { resource } = await pipeline.bucket.put(LOCAL_BUCKET, name, bytes, contentType);
    return pushBody(id, {
      bucket: LOCAL_BUCKET,
      name,
      generation: resource.generation,
      contentType,
      size: declaredSize,
    });
  }

  /** A push body for an object that need not exist. */
  const announced = (id: string, spec: Parameters<typeof pushBody>[1] = {}) =>
    pushBody(id, { bucket: LOCAL_BUCKET, name: `hostile/${id}.txt`, ...spec });

  /** Edits the message of a push body. */
  function edit(body: Record<string, unknown>, change: (message: Record<string, unknown>) => void) {
    change(body.message as Record<string, unknown>);
    return body;
  }
  const attributes = (m: Record<string, unknown>) => m.attributes as Record<string, string>;
  const setData = (m: Record<string, unknown>, value: unknown) => {
    m.data = Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64');
  };
  const withoutId = (id: string, change: (m: Record<string, unknown>) => void) =>
    edit(announced(id), (m) => {
      delete m.messageId;
      delete m.message_id;
      change(m);
    });
  const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

  const rejected = (reason: RejectionReason, publishable = true) => ({
    http: 200,
    answer: 'rejected',
    reason,
    row: 'rejected' as const,
    publishable,
  });
  const badEnvelope = { http: 400, answer: 'bad_envelope', row: 'none' as const };
  const tooLargeBody = { http: 413, answer: 'too_large_body', row: 'none' as const };
  const processed = (publishable?: boolean) => ({ http: 200, answer: 'ok', row: 'ok' as const, publishable });
  /**
   * A build storing `bytes` as `hostile/<id>.txt` (announced as `declaredSize` bytes) once `before`
   * (scripting the analyzer) has run.
   */
  const storing =
    (bytes: Buffer, before = () => {}, declaredSize?: number) =>
    async (id: string): Promise<Request> => {
      before();
      return { body: await stored(id, `hostile/${id}.txt`, bytes, 'text/plain', declaredSize) };
    };
  /** A case announcing an object that need not exist, `spec` over the defaults: refused for `reason`. */
  const announcing = (
    name: string,
    spec: Parameters<typeof pushBody>[1],
    reason: RejectionReason,
    publishable = true,
  ): HostileCase => ({
    case: name,
    build: async (id) => ({ body: announced(id, spec) }),
    ...rejected(reason, publishable),
  });
  /** A build announcing an object that need not exist, its message edited by `change`. */
  const editing =
    (change: (m: Record<string, unknown>, id: string) => void) =>
    async (id: string): Promise<Request> => ({ body: edit(announced(id), (m) => change(m, id)) });
  /** A build whose message carries the messageId `value` (only as `messageId`). */
  const messageId = (value: (id: string) => unknown) => async (id: string) => ({
    body: withoutId(id, (m) => Object.assign(m, { messageId: value(id) })),
  });

  const cases: HostileCase[] = [
    // Not an envelope: 400, no row; Pub/Sub would retry, then dead-letter.
    { case: 'not JSON', build: async () => ({ body: 'this is { not JSON', raw: true }), ...badEnvelope },
    { case: 'empty body', build: async () => ({ body: '', raw: true }), ...badEnvelope },
    { case: 'JSON array', build: async () => ({ body: [] }), ...badEnvelope },
    { case: 'JSON string', build: async () => ({ body: 'message' }), ...badEnvelope },
    { case: 'JSON null', build: async () => ({ body: 'null', raw: true }), ...badEnvelope },
    { case: 'JSON but no envelope', build: async () => ({ body: { hello: 'world' } }), ...badEnvelope },
    { case: 'message is not an object', build: async () => ({ body: { message: 'hi' } }), ...badEnvelope },
    { case: 'missing messageId', build: async (id) => ({ body: withoutId(id, () => {}) }), ...badEnvelope },
    { case: 'empty messageId', build: messageId(() => ''), ...badEnvelope },
    { case: 'messageId with a slash', build: messageId((id) => `${id}/x`), ...badEnvelope },
    { case: 'messageId with whitespace', build: messageId((id) => `${id} x`), ...badEnvelope },
    { case: 'messageId over 256 characters', build: messageId(() => 'x'.repeat(300)), ...badEnvelope },
    { case: 'messageId is a number', build: messageId(() => 12345), ...badEnvelope },
    {
      case: 'attribute value is not a string',
      build: editing((m) => Object.assign(attributes(m), { size: 12 })),
      ...badEnvelope,
    },
    {
      case: 'deliveryAttempt negative',
      build: async (id) => ({ body: { ...announced(id), deliveryAttempt: -1 } }),
      ...badEnvelope,
    },
    {
      case: 'deeply nested JSON (60,000 levels)',
      build: async (id) => ({
        body: `{"message":{"messageId":"${id}","attributes":{"x":${nested(60_000)}}}}`,
        raw: true,
      }),
      ...badEnvelope,
    },
    {
      case: 'unsupported charset',
      build: async (id) => ({ body: announced(id), contentType: 'application/json; charset=koi8-r' }),
      ...badEnvelope,
    },
    // Over the body limit: 413, no row.
    {
      case: 'body over the limit (data)',
      build: editing((m) => setData(m, 'x'.repeat(BODY_LIMIT_BYTES))),
      ...tooLargeBody,
    },
    {
      case: 'huge attribute value over the limit',
      build: editing((m) => Object.assign(attributes(m), { x: 'y'.repeat(BODY_LIMIT_BYTES) })),
      ...tooLargeBody,
    },
    // A notification that can never be work: 200, a rejected row keyed by the messageId.
    {
      case: 'attributes missing',
      build: editing((m) => delete m.attributes),
      ...rejected('invalid_notification', false),
    },
    {
      case: 'objectGeneration attribute missing',
      build: editing((m) => delete attributes(m).objectGeneration),
      ...rejected('invalid_notification'),
    },
    {
      case: 'data not base64',
      build: editing((m) => Object.assign(m, { data: '!!not base64!!' })),
      ...rejected('invalid_notification', false),
    },
    { case: 'data missing', build: editing((m) => delete m.data), ...rejected('invalid_notification') },
    {
      case: 'data not JSON',
      build: editing((m) => setData(m, 'name=x; generation=1')),
      ...rejected('invalid_notification'),
    },
    {
      case: 'data JSON but not an object resource',
      build: editing((m) => setData(m, { kind: 'storage#bucket' })),
      ...rejected('invalid_notification'),
    },
    {
      case: 'attributes name another object than data',
      build: editing((m) => Object.assign(attributes(m), { objectId: 'hostile/other.txt' })),
      ...rejected('invalid_notification'),
    },
    {
      case: 'attributes name another generation than data',
      build: editing((m) => Object.assign(attributes(m), { objectGeneration: '1764460800999999' })),
      ...rejected('invalid_notification'),
    },
    {
      case: 'payloadFormat NONE',
      build: editing((m) => Object.assign(attributes(m), { payloadFormat: 'NONE' })),
      ...rejected('invalid_notification'),
    },
    {
      case: 'payloadFormat missing',
      build: editing((m) => delete attributes(m).payloadFormat),
      ...rejected('invalid_notification'),
    },
    announcing('generation non-numeric', { generation: 'latest' }, 'invalid_notification'),
    announcing('generation negative', { generation: '-1764460800123456' }, 'invalid_notification'),
    announcing('generation beyond int64', { generation: '9223372036854775808' }, 'invalid_notification'),
    announcing('generation with a leading zero', { generation: '01764460800123456' }, 'invalid_notification'),
    announcing('bucketId with a path', { bucket: '../docline-local' }, 'invalid_notification'),
    announcing('event type OBJECT_DELETE', { eventType: 'OBJECT_DELETE' }, 'unsupported_event_type'),
    announcing(
      'event type OBJECT_METADATA_UPDATE',
      { eventType: 'OBJECT_METADATA_UPDATE' },
      'unsupported_event_type',
    ),
    announcing('event type OBJECT_ARCHIVE', { eventType: 'OBJECT_ARCHIVE' }, 'unsupported_event_type'),
    announcing("name with '..' segments", { name: 'hostile/../../outside-secret.txt' }, 'invalid_name'),
    announcing("name '..'", { name: '..' }, 'invalid_name'),
    announcing('absolute path name', { name: '/etc/passwd' }, 'invalid_name'),
    announcing('backslash traversal name', { name: '..\\..\\outside-secret.txt' }, 'invalid_name'),
    announcing('name with NUL', { name: 'hostile/a\u0000.txt' }, 'invalid_name'),
    announcing('name over 1024 bytes', { name: `hostile/${'é'.repeat(520)}.txt` }, 'invalid_name'),
    announcing('name with a lone surrogate', { name: 'hostile/\ud800.txt' }, 'invalid_name', false),
    announcing(
      'huge attribute value under the limit (objectId 50 KB)',
      { name: `hostile/${'n'.repeat(50_000)}` },
      'invalid_name',
    ),
    // Documents that exist but can never be analysed: 200, a rejected row keyed by the object.
    {
      case: 'declared PDF that is not a PDF',
      build: async (id) => ({
        body: await stored(
          id,
          `hostile/${id}.pdf`,
          Buffer.from('plain text, no PDF header'),
          'application/pdf',
        ),
      }),
      ...rejected('content_mismatch'),
    },
    {
      case: 'text that is binary (NUL bytes)',
      build: storing(Buffer.from([0x41, 0, 0x42])),
      ...rejected('content_mismatch'),
    },
    { case: 'zero bytes', build: storing(Buffer.alloc(0)), ...rejected('empty_object') },
    {
      case: 'zero bytes declared as 120',
      build: storing(Buffer.alloc(0), () => {}, 120),
      ...rejected('empty_object'),
    },
    announcing('declared size over the limit', { size: MAX_OBJECT_BYTES + 1 }, 'too_large'),
    {
      case: 'actual size over the limit (declared small)',
      build: storing(Buffer.alloc(MAX_OBJECT_BYTES + 10, 'a'), () => {}, 100),
      ...rejected('too_large'),
    },
    {
      case: 'a generation that no longer exists (overwritten)',
      build: async (id) => {
        const body = await stored(id, `hostile/${id}.txt`, invoice.bytes);
        await pipeline.bucket.put(LOCAL_BUCKET, `hostile/${id}.txt`, invoice.bytes, 'text/plain');
        return { body };
      },
      ...rejected('object_gone'),
    },
    announcing(
      'a generation that never existed (int64 max)',
      { generation: '9223372036854775807' },
      'object_gone',
    ),
    announcing(
      'content type not allowed (application/zip)',
      { contentType: 'application/zip' },
      'unsupported_content_type',
    ),
    {
      case: 'content type missing',
      build: editing((m, id) => {
        const resource = objectResource({ bucket: LOCAL_BUCKET, name: `hostile/${id}.txt` });
        delete resource.contentType;
        setData(m, resource);
      }),
      ...rejected('unsupported_content_type'),
    },
    // The analyzer answers badly: 200, a rejected row.
    {
      case: 'analyzer output not JSON',
      build: storing(invoice.bytes, () => {
        gemini.respondWith(
          geminiResponse('Sure! Here is the invoice: …'),
          geminiResponse('{"document_type": '),
        );
      }),
      ...rejected('analysis_failed', false),
    },
    {
      case: 'analyzer output breaks the schema',
      build: storing(invoice.bytes, () => {
        const wrong = { document_type: 'spaceship', total_amount: 'a lot', line_items: 'none' };
        gemini.respondWith(geminiResponse(wrong), geminiResponse(wrong));
      }),
      ...rejected('analysis_failed', false),
    },
    {
      case: 'analyzer blocks the prompt (safety)',
      build: storing(invoice.bytes, () => gemini.respondWith(blockedPromptResponse('SAFETY'))),
      ...rejected('safety_blocked', false),
    },
    {
      case: 'analyzer withholds its answer (finishReason PROHIBITED_CONTENT)',
      build: storing(invoice.bytes, () => gemini.respondWith(blockedCandidateResponse('PROHIBITED_CONTENT'))),
      ...rejected('safety_blocked', false),
    },
    {
      case: 'analyzer refuses the document (400)',
      build: storing(invoice.bytes, () => gemini.failNext(400, 1, 'The document has no pages.')),
      ...rejected('analysis_failed', false),
    },
    // Valid but unusual: processed.
    {
      case: 'Unicode object name',
      build: async (id) => ({ body: await stored(id, `factures/été/№${id}-請求書-🧾.txt`, invoice.bytes) }),
      ...processed(true),
    },
    {
      case: 'SQL in the object name',
      build: async (id) => ({ body: await stored(id, `x'); DROP TABLE rows; --${id}.txt`, invoice.bytes) }),
      ...processed(true),
    },
    {
      case: 'SQL quotes and backslashes in the object name',
      build: async (id) => ({
        body: await stored(id, `Robert\\"); DELETE FROM rows WHERE ("1"="1 ${id}.txt`, invoice.bytes),
      }),
      ...processed(true),
    },
    {
      case: 'SQL in the messageId',
      build: async (id) => ({
        body: edit(announced(id, { eventType: 'OBJECT_DELETE' }), (m) => {
          m.messageId = `${id}'OR'1'='1';DROP_TABLE_rows;--`;
          m.message_id = m.messageId;
        }),
      }),
      ...rejected('unsupported_event_type', false),
    },
    {
      case: 'a huge unknown attribute under the limit (100 KB)',
      build: async (id) => ({
        body: edit(await stored(id, `hostile/${id}.txt`, invoice.bytes), (m) =>
          Object.assign(attributes(m), { goog_extra: 'z'.repeat(100_000) }),
        ),
      }),
      ...processed(),
    },
    {
      case: 'JSON sent as text/plain',
      build: async (id) => ({
        body: await stored(id, `hostile/${id}.txt`, invoice.bytes),
        contentType: 'text/plain',
      }),
      ...processed(),
    },
  ];

  async function send(request: Request): Promise<{ http: number; body: Record<string, unknown> }> {
    const res = await fetch(`${url}/push`, {
      method: 'POST',
      headers: { 'content-type': request.contentType ?? 'application/json' },
      body: request.raw ? String(request.body) : JSON.stringify(request.body),
    });
    return { http: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  const messageIdOf = (request: Request): string | undefined => {
    const message = (request.body as { message?: { messageId?: unknown } } | undefined)?.message;
    return typeof message?.messageId === 'string' ? message.messageId : undefined;
  };

  const sent = new Map<string, { request: Request; expected: HostileCase }>();

  it(`answers each of ${cases.length} hostile requests as defined, with a clear reason, and stays up`, async () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
    const baselineRss = peakRssBytes(pipeline.worker.child.pid);
    const mismatches: string[] = [];
    let index = 0;
    for (const c of cases) {
      index += 1;
      const id = `h${String(index).padStart(3, '0')}`;
      const totalBefore = rowCount(data.dir);
      const request = await c.build(id);
      const answer = await send(request);
      const messageId = messageIdOf(request) ?? id;
      sent.set(messageId, { request, expected: c });
      const health = await fetch(`${url}/healthz`);
      const byMessage = rows.rowsWhere('message_id', messageId);
      const totalAfter = rowCount(data.dir);
      const observedRow: RowOutcome =
        byMessage.length === 1
          ? (byMessage[0]!.status as RowOutcome)
          : byMessage.length === 0
            ? 'none'
            : 'duplicate';
      const label = (answer.body.status ?? answer.body.error) as string;
      const reason = answer.body.reason as string | undefined;
      const explanation = String(answer.body.detail ?? answer.body.message ?? '');
      const expected = `${c.http} ${c.answer}${c.reason ? ` ${c.reason}` : ''}, row ${c.row}`;
      const observed = `${answer.http} ${label}${reason ? ` ${reason}` : ''}, row ${observedRow}`;
      // A processed document needs no explanation; anything else must say why.
      const clear = c.answer === 'ok' || explanation.length >= 10;
      const pass =
        expected === observed &&
        clear &&
        health.status === 200 &&
        (c.row === 'none' ? totalAfter === totalBefore : totalAfter === totalBefore + 1);
      if (!pass) mismatches.push(`${c.case}: expected ${expected}, observed ${observed} (${explanation})`);
      recordCase({
        suite: SUITE,
        case: c.case,
        expected,
        observed: clear ? observed : `${observed}, no reason`,
        rows: byMessage.length,
        analyses: analysesByName(data.dir).get(String(byMessage[0]?.object_name ?? '')) ?? 0,
        pass,
      });
    }
    const peak = peakRssBytes(pipeline.worker.child.pid);
    recordCase({
      suite: SUITE,
      case: 'worker memory over the corpus',
      expected: `peak RSS < ${MAX_PEAK_RSS_BYTES / 2 ** 20} MiB, process alive`,
      observed: `peak RSS ${Math.round((peak ?? 0) / 2 ** 20)} MiB (start ${Math.round((baselineRss ?? 0) / 2 ** 20)} MiB), ${pipeline.worker.child.exitCode === null ? 'process alive' : 'process exited'}`,
      rows: '-',
      analyses: '-',
      pass: peak !== null && peak < MAX_PEAK_RSS_BYTES && pipeline.worker.child.exitCode === null,
    });
    expect(mismatches).toEqual([]);
    expect(pipeline.worker.child.exitCode).toBeNull();
    expect(peak).not.toBeNull();
    expect(peak!).toBeLessThan(MAX_PEAK_RSS_BYTES);
  });

  it('answers a request sent again (a redelivery) as a duplicate, and adds no row', async () => {
    const [messageId, first] = [...sent.entries()].find(([, s]) => s.expected.row === 'ok')!;
    const again = await send(first.request);
    const byMessage = rows.rowsWhere('message_id', messageId);
    recordCase({
      suite: SUITE,
      case: 'the same valid request again',
      expected: '200 duplicate, 1 row',
      observed: `${again.http} ${again.body.status}, ${byMessage.length} row`,
      rows: byMessage.length,
      analyses: '-',
    });
    expect(again).toEqual({ http: 200, body: { status: 'duplicate', messageId } });
    expect(byMessage).toHaveLength(1);
  });

  it('stores hostile values verbatim, as values: the table and its views are intact', () => {
    const hostile = [...sent.values()].filter((s) => /SQL/.test(s.expected.case));
    const names = hostile
      .map(
        (s) =>
          (s.request.body as { message: { attributes: Record<string, string> } }).message.attributes.objectId,
      )
      .filter((n): n is string => typeof n === 'string');
    const stored = names.flatMap((n) => rows.rowsWhere('object_name', n));
    const sqlMessageId = [...sent.keys()].find((k) => k.includes("'OR'"))!;
    const viewsReadable = (['documents', 'duplicate_objects', 'delivery_stats'] as const).every((v) =>
      Array.isArray(rows.view(v)),
    );
    recordCase({
      suite: SUITE,
      case: 'SQL-hostile keys stored as values',
      expected: `${names.length} names + 1 messageId, each one row; views readable`,
      observed: `${stored.length} names + ${rows.rowsWhere('message_id', sqlMessageId).length} messageId, each one row; views ${viewsReadable ? 'readable' : 'broken'}`,
      rows: stored.length + 1,
      analyses: '-',
    });
    expect(stored.map((r) => r.object_name).sort()).toEqual([...names].sort());
    expect(rows.rowsWhere('message_id', sqlMessageId)).toHaveLength(1);
    expect(viewsReadable).toBe(true);
    expect(rows.view('delivery_stats').length).toBeGreaterThan(0);
    expect(rows.keysRecordedTwice()).toEqual([]);
  });

  it('turns every publishable hostile notification into one row, or a dead letter, through the emulator', async () => {
    const publishable = [...sent.values()].filter((s) => s.expected.publishable);
    const oversized = 'hostile/oversized-data.txt';
    const messages = publishable.map((s) => {
      const message = (s.request.body as { message: { data?: string; attributes?: Record<string, string> } })
        .message;
      return {
        data: Buffer.from(message.data ?? '', 'base64'),
        attributes: message.attributes ?? {},
      };
    });
    const ids = await pipeline.pubsub.publish(LOCAL_NAMES.topic, messages);
    // A notification whose data is over the worker's body limit: refused (413) until dead-lettered.
    await pipeline.pubsub.publish(LOCAL_NAMES.topic, [
      { data: Buffer.alloc(BODY_LIMIT_BYTES, 'd'), attributes: { objectId: oversized } },
    ]);
    const answers = await Promise.all(
      ids.map((id) => pipeline.worker.waitForLine((l) => l.messageId === id && isAnswer(l), 60_000)),
    );
    const letter = await waitUntil(
      'the oversized notification in the dead-letter subscription',
      async () =>
        (await listDeadLetters(pipeline.pubsub, LOCAL_NAMES.deadLetterSubscription)).find(
          (l) => l.attributes.objectId === oversized,
        ),
      120_000,
      500,
    );
    const rowOf = (a: WorkerLogLine) => rows.rowsFor(String(a.dedupKey));
    const withoutRow = answers.filter((a) => rowOf(a).length !== 1);
    const statusMismatch = answers.filter((a, i) => {
      const expected = publishable[i]!.expected.row;
      // A document the HTTP run already recorded is a duplicate now: its row must say what was expected.
      return (a.status === 'duplicate' ? rowOf(a)[0]?.status : a.status) !== expected;
    });
    recordCase({
      suite: SUITE,
      case: `${ids.length} hostile notifications + 1 oversized via the emulator`,
      expected: `${ids.length} answered with a row; 0 status mismatches; oversized dead-lettered`,
      observed: `${answers.length - withoutRow.length} answered with a row; ${statusMismatch.length} status mismatches; oversized ${letter ? 'dead-lettered' : 'lost'}`,
      rows: answers.length - withoutRow.length,
      analyses: '-',
    });
    expect(withoutRow).toEqual([]);
    expect(statusMismatch).toEqual([]);
    expect(letter.attributes.objectId).toBe(oversized);
  });

  it('keeps every hostile object name inside the bucket folder', async () => {
    const accepted = [
      '..%2f..%2foutside-secret.txt',
      '....//....//outside-secret.txt',
      '.../.../outside-secret.txt',
      '~/.ssh/id_rsa.txt',
      '$(touch pwned).txt',
      'C:\\Windows\\System32\\drivers.txt',
      ` leading space and trailing space .txt`,
      '\u202Etxt.exe',
      `${'deep/'.repeat(150)}leaf.txt`,
      'NUL.txt',
    ];
    const refused = [
      '../outside-secret.txt',
      '/etc/passwd',
      'a/../../outside-secret.txt',
      '.\\..\\outside-secret.txt',
    ];
    const uploads = await Promise.all(
      accepted.map((name) => pipeline.upload(name, invoice.bytes, { contentType: 'text/plain' })),
    );
    const uris = uploads.map((u) => objectUri(u.resource.bucket, u.resource.name, u.resource.generation));
    // Names the bucket refuses to store are announced by hand, as a hostile publisher could.
    const forged = await pipeline.pubsub.publish(
      LOCAL_NAMES.topic,
      refused.map((name) => ({
        data: JSON.stringify(objectResource({ bucket: LOCAL_BUCKET, name })),
        attributes: notificationAttributes({ bucket: LOCAL_BUCKET, name }),
      })),
    );
    const refusedOk = await Promise.all(
      refused.map(async (name) => {
        await expect(
          pipeline.bucket.put(LOCAL_BUCKET, name, Buffer.from(SECRET), 'text/plain'),
        ).rejects.toThrow();
        return true;
      }),
    );
    await Promise.all(
      uris.map((uri) => pipeline.worker.waitForLine((l) => l.objectUri === uri && isAnswer(l), 60_000)),
    );
    const forgedAnswers = await Promise.all(
      forged.map((id) => pipeline.worker.waitForLine((l) => l.messageId === id && isAnswer(l), 60_000)),
    );
    const okRows = uris.flatMap((u) => rows.rowsWhere('object_uri', u)).filter((r) => r.status === 'ok');
    const outside = filesOutsideBucket(data.dir);
    const strays = bucketFilesOffLayout(path.join(data.dir, 'bucket'));
    const leakedSecret = [...rows.view('documents'), ...rows.rowsWhere('status', 'rejected')].filter((r) =>
      JSON.stringify(r).includes(SECRET),
    );
    recordCase({
      suite: SUITE,
      case: 'hostile names through the local bucket',
      expected: `${accepted.length} stored inside, ${refused.length} refused → invalid_name; 0 files outside; secret unread`,
      observed: `${okRows.length} stored inside, ${forgedAnswers.filter((a) => a.reason === 'invalid_name').length} refused → invalid_name; ${outside.length + strays.length} files outside; secret ${leakedSecret.length ? 'READ' : 'unread'}`,
      rows: okRows.length + forgedAnswers.length,
      analyses: '-',
    });
    expect(refusedOk).toHaveLength(refused.length);
    expect(okRows.map((r) => r.object_name).sort()).toEqual([...accepted].sort());
    expect(forgedAnswers.map((a) => [a.status, a.reason])).toEqual(
      refused.map(() => ['rejected', 'invalid_name']),
    );
    expect(outside).toEqual([]);
    expect(strays).toEqual([]);
    expect(leakedSecret).toEqual([]);
  });

  it('never logs document content or credentials', () => {
    audit.expectNoLeaks(SUITE, [...sampleInvoices().flatMap((s) => s.secrets), GEMINI_KEY, SECRET], 40);
  });
});

/** Files the worker or the bucket wrote outside `bucket/`, other than the pipeline's own. */
function filesOutsideBucket(dataDir: string): string[] {
  // The data folder's own entries come from its one layout (the memo folder included).
  const layout = dataDirLayout(dataDir);
  const own = new Set([
    ...[layout.sqlite, `${layout.sqlite}-wal`, `${layout.sqlite}-shm`].map((f) => path.basename(f)),
    ...Object.entries(layout)
      .filter(([entry]) => entry !== 'root')
      .map(([, f]) => path.basename(f)),
    'analyses.log',
    'outside-secret.txt',
  ]);
  return readdirSync(dataDir).filter((f) => !own.has(f));
}

/** Files under the bucket root that are not `<bucket>/<sha256>/<generation>[.json]`. */
function bucketFilesOffLayout(root: string): string[] {
  const strays: string[] = [];
  for (const entry of readdirSync(root, { recursive: true, withFileTypes: true })) {
    const relative = path.relative(root, path.join(entry.parentPath, entry.name));
    const parts = relative.split(path.sep);
    const ok =
      parts[0] === LOCAL_BUCKET &&
      (parts.length === 1 ||
        (/^[0-9a-f]{64}$/.test(parts[1]!) &&
          (parts.length === 2 || (parts.length === 3 && /^\d+(\.json)?$/.test(parts[2]!)))));
    if (!ok) strays.push(relative);
  }
  return strays;
}
