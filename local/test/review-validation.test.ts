import type { AddressInfo } from 'node:net';
import { sampleAnalysis } from '../../sim/samples';
import type { Analysis } from '../../worker/src/contract/analysis';
import { correctionOf } from '../../worker/src/contract/corrections';
import { parsePush } from '../../worker/src/core/event';
import { handle } from '../../worker/src/core/handle';
import type { EInvoiceReader, EInvoiceValidationRecord } from '../../worker/src/core/ports';
import { pushBody } from '../../worker/test/support/builders';
import { handlerDeps } from '../../worker/test/support/handler';
import { createReviewServer, type ReviewBackend, type ReviewItem, reviewQueue } from '../lib/review-server';

const FALLBACK = 'e_invoice_incomplete' as const;

/** A complete invoice as an e-invoice's XML states it (no identifiers): alone, it asks for no review. */
const STATED: Analysis = sampleAnalysis({ supplier_vat_id: null, supplier_siren: null });

/** An e-invoice reader that reads every document as {@link STATED}, with the given validation. */
function readerWith(kind: 'read' | 'fallback', validation: EInvoiceValidationRecord): EInvoiceReader {
  return {
    accepts: () => true,
    read: async () =>
      kind === 'read'
        ? {
            kind,
            result: {
              analysis: STATED,
              model: 'e-invoice:cii',
              usage: { promptTokens: 0, outputTokens: 0, totalTokens: 0 },
            },
            validation,
          }
        : { kind, reason: FALLBACK, detail: 'the XML has no total', validation },
  };
}

async function rowOf(eInvoices: EInvoiceReader) {
  const { store, reader, deps } = handlerDeps({ eInvoices });
  const body = pushBody('1', { size: 12 });
  const attrs = (body.message as { attributes: Record<string, string> }).attributes;
  reader.put(attrs.bucketId!, attrs.objectId!, attrs.objectGeneration!, 'FACTURE 0142');
  const outcome = await handle(parsePush(body), deps);
  const backend: ReviewBackend = {
    documents: async (where) => store.correctedDocuments(where),
    corrections: async (key) => store.corrections(key),
    correct: (correction) => store.correct(correction),
    picture: async () => undefined,
  };
  return { row: store.rowsFor(outcome.dedupKey)[0]!, queue: await reviewQueue(backend), store, backend };
}

/** The review server over `backend`, listening; `post` sends a correction (or a mark) as the page does. */
async function serving(backend: ReviewBackend) {
  const server = createReviewServer({ backend, who: 'claire' });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const post = async (body: Record<string, unknown>) => {
    const answer = await fetch(`${base}/api/corrections`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: answer.status, body: (await answer.json()) as Record<string, unknown> };
  };
  return { post, close: () => new Promise((resolve) => server.close(resolve)) };
}

/** A validation whose picture and XML disagree on the seller and the total. */
const SELLER_AND_TOTAL = {
  verdict: 'invalid',
  failed: ['BR-CO-15'],
  picture: {
    compared: ['total_amount', 'seller'],
    unread: [],
    disagreements: [{ field: 'seller' }, { field: 'total_amount' }],
  },
};

describe('the review verdict of an e-invoice takes its validation', () => {
  it('is none for a valid e-invoice whose fields need nobody', async () => {
    const { row, queue } = await rowOf(readerWith('read', { verdict: 'valid', failed: [] }));
    expect(row.review).toBe('none');
    expect(queue).toEqual([]);
  });

  it('names a failed EN 16931 validation, and the review page lists the row', async () => {
    const validation = { verdict: 'invalid', failed: ['BR-CO-15'] };
    const { row, queue } = await rowOf(readerWith('read', validation));
    expect(row.review).toBe('e_invoice_invalid');
    expect(row.e_invoice_validation).toMatchObject({ failed: ['BR-CO-15'] });
    expect(queue.map((item) => [item.dedup_key, item.review, item.open])).toEqual([
      [row.dedup_key, ['e_invoice_invalid'], ['e_invoice_invalid']],
    ]);
  });

  it('names a failed validation on a row whose picture was analysed instead of its XML', async () => {
    const { row } = await rowOf(readerWith('fallback', { verdict: 'invalid', failed: ['BR-16'] }));
    expect(row.reason).toBe(FALLBACK);
    expect(row.review?.split(' ')).toContain('e_invoice_invalid');
  });

  it('names each field a hybrid PDF’s picture and XML disagree on', async () => {
    const validation = {
      verdict: 'valid',
      failed: [],
      picture: { compared: ['total_amount'], unread: [], disagreements: [{ field: 'total_amount' }] },
    };
    const { row } = await rowOf(readerWith('read', validation));
    expect(row.review).toBe('picture_xml_disagree:total_amount');
  });
});

describe('a reason no field correction closes is marked dealt with', () => {
  it('closes e_invoice_invalid by a mark with a why, once, leaving the analysis and the row as they were', async () => {
    const { row, store, backend } = await rowOf(
      readerWith('read', { verdict: 'invalid', failed: ['BR-CO-15'] }),
    );
    const { post, close } = await serving(backend);
    try {
      const mark = {
        dedup_key: row.dedup_key,
        field: 'e_invoice_invalid',
        value: 'dealt_with',
        replaces: null,
      };
      // Without a why: refused, in words, and nothing written.
      expect(await post({ ...mark, why: ' ' })).toEqual({
        status: 400,
        body: { error: expect.stringMatching(/e_invoice_invalid.*needs a why/) },
      });
      expect(store.corrections(row.dedup_key)).toEqual([]);
      const first = await post({ ...mark, why: 'BR-CO-15: the supplier’s rounding, booked as sent' });
      expect(first.status).toBe(200);
      expect(first.body).toMatchObject({ status: 'recorded' });
      const item = first.body.item as ReviewItem;
      expect(item).toMatchObject({
        review: ['e_invoice_invalid'],
        open: [],
        markable: ['e_invoice_invalid'],
      });
      expect(item.latest.e_invoice_invalid).toMatchObject({ value: '"dealt_with"', corrected_by: 'claire' });
      // The same mark again (a retry, a second tab): already there, one record.
      expect((await post({ ...mark, why: 'again' })).body).toMatchObject({ status: 'already' });
      expect(store.corrections(row.dedup_key)).toHaveLength(1);
      // Never a second row, never an update of the row, and no value changed.
      expect(store.rowsFor(row.dedup_key)).toEqual([row]);
      expect(store.correctedDocuments({ dedupKey: row.dedup_key })[0]!.analysis).toEqual(row.analysis);
      expect((await reviewQueue(backend)).map((i) => i.open)).toEqual([[]]);
    } finally {
      await close();
    }
  });

  it('closes picture_xml_disagree:seller by its mark and the total’s disagreement by a correction of the total', async () => {
    const { row, store, backend, queue } = await rowOf(readerWith('read', SELLER_AND_TOTAL));
    expect(queue[0]).toMatchObject({
      open: ['picture_xml_disagree:seller', 'picture_xml_disagree:total_amount', 'e_invoice_invalid'],
      markable: ['picture_xml_disagree:seller', 'e_invoice_invalid'],
    });
    const correct = (field: string, value: unknown, why?: string) =>
      store.correct(
        correctionOf(
          { dedupKey: row.dedup_key, field, value, replaces: null, by: 'claire', ...(why ? { why } : {}) },
          new Date(),
        ),
      );
    await correct(
      'picture_xml_disagree:seller',
      'dealt_with',
      'the same company: its trading name on the picture',
    );
    expect((await reviewQueue(backend))[0]!.open).toEqual([
      'picture_xml_disagree:total_amount',
      'e_invoice_invalid',
    ]);
    await correct('total_amount', STATED.total_amount);
    expect((await reviewQueue(backend))[0]!.open).toEqual(['e_invoice_invalid']);
  });

  it('refuses a mark of a reason the row does not carry, or of a reason a field correction closes', async () => {
    const { row, store, backend } = await rowOf(
      readerWith('read', { verdict: 'invalid', failed: ['BR-16'] }),
    );
    const { post, close } = await serving(backend);
    try {
      const mark = (field: string) =>
        post({ dedup_key: row.dedup_key, field, value: 'dealt_with', replaces: null, why: 'seen' });
      expect(await mark('picture_xml_disagree:seller')).toEqual({
        status: 400,
        body: { error: expect.stringContaining('not a review reason') },
      });
      expect((await mark('low_confidence:total_amount')).status).toBe(400);
      expect(store.corrections(row.dedup_key)).toEqual([]);
    } finally {
      await close();
    }
  });
});
