import type { Analysis } from '../../worker/src/contract/analysis';
import { parsePush } from '../../worker/src/core/event';
import { handle } from '../../worker/src/core/handle';
import type { EInvoiceReader, EInvoiceValidationRecord } from '../../worker/src/core/ports';
import { pushBody } from '../../worker/test/support/builders';
import { sampleAnalysis } from '../../worker/test/support/fakes';
import { handlerDeps } from '../../worker/test/support/handler';
import { type ReviewBackend, reviewQueue } from '../lib/review-server';

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
  return { row: store.rowsFor(outcome.dedupKey)[0]!, queue: await reviewQueue(backend) };
}

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
