import { QuotaGate } from '../src/adapters/quota-gate';
import { RATE_LIMITED, RejectionError, TransientError } from '../src/core/errors';
import { parsePush } from '../src/core/event';
import { type HandlerDeps, handle } from '../src/core/handle';
import { type ObjectSpec, pushBody } from './support/builders';
import { transient } from './support/fakes';
import { handlerDeps } from './support/handler';

const INVOICE = 'FACTURE N° F-2026-0042\nTotal TTC : 1 234,56 €\n';

function setup(overrides: Partial<HandlerDeps> = {}) {
  const { store, reader, analyzer, deps } = handlerDeps(overrides);
  /** Uploads an object to the fake bucket and returns the push body announcing it. */
  const upload = (messageId: string, spec: ObjectSpec & { bytes?: string | Buffer } = {}) => {
    const bytes = spec.bytes ?? INVOICE;
    const body = pushBody(messageId, { size: Buffer.from(bytes).length, ...spec });
    reader.putAnnounced(body, bytes);
    return body;
  };
  const run = (body: unknown) => handle(parsePush(body), deps);
  return { store, reader, analyzer, deps, upload, run };
}

describe('handle', () => {
  it('processes a new document into one ok row with its analysis and tokens', async () => {
    const { store, run, upload, analyzer } = setup();
    const outcome = await run(upload('1'));
    expect(outcome).toMatchObject({ status: 'ok', messageId: '1', analysed: true });
    const [row] = store.rowsFor(outcome.dedupKey);
    expect(row).toMatchObject({
      status: 'ok',
      message_id: '1',
      object_uri: 'gs://acme-invoices-dev/2026/11/facture-0042.txt#1764460800123456',
      generation: '1764460800123456',
      model: 'scripted',
      total_tokens: 1500,
      processed_at: '2026-11-30T04:00:00.000Z',
    });
    expect(analyzer.calls[0]?.bytes.toString()).toBe(INVOICE);
  });

  it('reads exactly the generation named by the event', async () => {
    const { reader, run, upload } = setup();
    await run(upload('1', { generation: '1764460800999999' }));
    expect(reader.reads).toEqual([
      { bucket: 'acme-invoices-dev', name: '2026/11/facture-0042.txt', generation: '1764460800999999' },
    ]);
  });

  it('acks a redelivery as duplicate without calling the reader or the analyzer', async () => {
    const { reader, analyzer, run, upload } = setup();
    const body = upload('1');
    await run(body);
    const again = await run(body);
    expect(again).toMatchObject({ status: 'duplicate', duplicateAt: 'seen', analysed: false });
    expect(reader.reads).toHaveLength(1);
    expect(analyzer.calls).toHaveLength(1);
  });

  it('lets one of two racing deliveries win when both miss seen(): one ok, one duplicate, one row', async () => {
    const { store, analyzer, run, upload } = setup();
    const body = upload('1');
    analyzer.hold();
    const racing = [run(body), run(body)];
    await analyzer.arrived(2); // both passed seen() and are analysing
    analyzer.release();
    const outcomes = await Promise.all(racing);
    expect(outcomes.map((o) => o.status).sort()).toEqual(['duplicate', 'ok']);
    expect(outcomes.find((o) => o.status === 'duplicate')?.duplicateAt).toBe('record');
    expect(store.rowsFor(outcomes[0]!.dedupKey)).toHaveLength(1);
    expect(analyzer.calls.length).toBeLessThanOrEqual(2);
  });

  it('absorbs a doubled notification in object mode: two messageIds, one generation → one ok, one duplicate', async () => {
    const { store, analyzer, run, upload } = setup();
    const first = await run(upload('1'));
    const second = await run(upload('2'));
    expect([first.status, second.status]).toEqual(['ok', 'duplicate']);
    expect(store.documents()).toHaveLength(1);
    expect(analyzer.calls).toHaveLength(1);
  });

  it('treats a re-upload (new generation) as new work in object mode', async () => {
    const { store, run, upload } = setup();
    await run(upload('1', { generation: '100' }));
    const reupload = await run(upload('2', { generation: '101', overwroteGeneration: '100' }));
    expect(reupload.status).toBe('ok');
    expect(store.documents().map((r) => r.generation)).toEqual(['100', '101']);
  });

  it('keys by messageId in message mode: a doubled notification becomes two ok rows', async () => {
    const { store, run, upload } = setup({ dedupKeyMode: 'message' });
    const first = await run(upload('1'));
    const second = await run(upload('2'));
    expect([first.status, second.status]).toEqual(['ok', 'ok']);
    expect([first.dedupKey, second.dedupKey]).toEqual(['1', '2']);
    expect(store.view('duplicate_objects')).toHaveLength(1);
    const redelivery = await run(upload('1'));
    expect(redelivery.status).toBe('duplicate');
  });

  it('leaves no row on a transient analyzer failure, and the retry succeeds', async () => {
    const { store, analyzer, run, upload } = setup();
    const body = upload('1');
    analyzer.failNext(transient());
    await expect(run(body)).rejects.toThrow('the analyzer answered 503');
    expect(store.documents()).toHaveLength(0);
    expect((await run(body)).status).toBe('ok');
    expect(store.documents()).toHaveLength(1);
  });

  it('keys a non-FINALIZE event by its messageId so it never suppresses the document', async () => {
    const { store, run, upload } = setup();
    const deleted = await run(upload('1', { eventType: 'OBJECT_DELETE' }));
    expect(deleted).toMatchObject({ status: 'rejected', reason: 'unsupported_event_type', dedupKey: '1' });
    const finalize = await run(upload('2'));
    expect(finalize.status).toBe('ok');
    // …and the document's row does not suppress a later event about the same object.
    const metadata = await run(upload('3', { eventType: 'OBJECT_METADATA_UPDATE' }));
    expect(metadata.status).toBe('rejected');
    expect(store.documents()).toHaveLength(3);
  });

  describe('rejects what can never be processed, with a row that says why', () => {
    const cases: Array<[string, (s: ReturnType<typeof setup>) => unknown]> = [
      ['unsupported_event_type', (s) => s.upload('1', { eventType: 'OBJECT_ARCHIVE' })],
      ['unsupported_content_type', (s) => s.upload('1', { contentType: 'application/zip' })],
      ['empty_object', (s) => s.upload('1', { bytes: '' })],
      ['too_large', (s) => s.upload('1', { bytes: 'x'.repeat(2048) })],
      [
        'object_gone',
        () => pushBody('1', { generation: '999' }), // announced, never stored
      ],
      ['content_mismatch', (s) => s.upload('1', { contentType: 'application/pdf', bytes: 'not a pdf' })],
      ['invalid_name', (s) => s.upload('1', { name: '../../etc/passwd' })],
      [
        'invalid_notification',
        () => {
          const body = pushBody('1');
          (body.message as { data: string }).data = '%%%';
          return body;
        },
      ],
    ];
    it.each(cases)('%s', async (reason, makeBody) => {
      const s = setup();
      const outcome = await s.run(makeBody(s));
      expect(outcome).toMatchObject({ status: 'rejected', reason });
      expect(outcome.detail).toEqual(expect.any(String));
      const [row] = s.store.rowsFor(outcome.dedupKey);
      expect(row).toMatchObject({ status: 'rejected', reason, analysis: null });
      expect(s.analyzer.calls).toHaveLength(0);
    });

    it('analysis_failed and safety_blocked from the analyzer, with the tokens the refusal cost', async () => {
      for (const reason of ['analysis_failed', 'safety_blocked'] as const) {
        const s = setup();
        const usage = { promptTokens: 900, outputTokens: 40, totalTokens: 940 };
        s.analyzer.failNext(new RejectionError(reason, 'refused', { usage }));
        const outcome = await s.run(s.upload('1'));
        expect(outcome).toMatchObject({ status: 'rejected', reason, analysed: true, usage });
        expect(s.store.rowsFor(outcome.dedupKey)[0]).toMatchObject({
          reason,
          prompt_tokens: 900,
          output_tokens: 40,
          total_tokens: 940,
        });
      }
    });

    it('checks the declared size before downloading', async () => {
      const s = setup();
      const outcome = await s.run(pushBody('1', { size: 5000 }));
      expect(outcome.reason).toBe('too_large');
      expect(s.reader.reads).toHaveLength(0);
    });
  });

  describe('with admission to the paid work', () => {
    it('reads a document only once admitted: a delivery waiting its turn holds no bytes', async () => {
      const gate = new QuotaGate({ maxInFlight: 1, maxWaitMs: 60_000 });
      const { reader, analyzer, run, upload } = setup({ admission: gate });
      analyzer.hold();
      const first = run(upload('1', { name: 'a.txt' }));
      const second = run(upload('2', { name: 'b.txt' }));
      await analyzer.arrived(1);
      expect(reader.reads.map((r) => r.name)).toEqual(['a.txt']);
      expect(gate.queued).toBe(1);
      analyzer.release();
      await expect(Promise.all([first, second])).resolves.toMatchObject([{ status: 'ok' }, { status: 'ok' }]);
      expect(reader.reads.map((r) => r.name)).toEqual(['a.txt', 'b.txt']);
    });

    it('waits out a spent quota inside the delivery and writes one row with the paid analysis', async () => {
      const gate = new QuotaGate({ maxInFlight: 4, maxWaitMs: 60_000, initialPauseMs: 1, maxPauseMs: 2 });
      const { store, analyzer, run, upload } = setup({ admission: gate });
      analyzer.failNext(
        new TransientError(RATE_LIMITED, 'Gemini: 429'),
        new TransientError(RATE_LIMITED, 'Gemini: 429'),
      );
      const outcome = await run(upload('1'));
      expect(outcome).toMatchObject({ status: 'ok', analysed: true });
      expect(analyzer.calls).toHaveLength(3);
      expect(store.rowsFor(outcome.dedupKey)).toHaveLength(1);
    });

    it('answers a delivery never admitted with the 429 as a transient failure, and writes nothing', async () => {
      const gate = new QuotaGate({ maxInFlight: 1, maxWaitMs: 0 });
      const { store, analyzer, run, upload } = setup({ admission: gate });
      analyzer.hold();
      const first = run(upload('1', { name: 'a.txt' }));
      await analyzer.arrived(1);
      const second = run(upload('2', { name: 'b.txt' }));
      await expect(second).rejects.toMatchObject({ code: RATE_LIMITED });
      analyzer.release();
      const outcome = await first;
      expect(store.rowsFor(outcome.dedupKey)).toHaveLength(1);
      expect(analyzer.calls).toHaveLength(1);
    });
  });
});
