import { readFileSync } from 'node:fs';
import { En16931Reader } from '../../src/adapters/e-invoice/en16931-reader';
import { MemoryMemoStore } from '../../src/adapters/memo-stores/memory-memo-store';
import { QuotaGate } from '../../src/adapters/quota-gate';
import { DEFAULT_CONTENT_TYPES } from '../../src/contract/settings';
import { contentMatches } from '../../src/core/document-checks';
import type { HandlerDeps } from '../../src/core/handle';
import { AnalysisMemo } from '../../src/core/memo';
import { deflated, pdfWith, ublInvoice } from '../support/e-invoice-builders';
import { fixture } from '../support/e-invoices';
import { deliverer, failWrites, handlerDeps } from '../support/handler';

/** handle() with the e-invoice reader: what reaches the row, the analyzer and the admission line. */

function setup(overrides: Partial<HandlerDeps> = {}) {
  const built = handlerDeps({
    limits: { maxObjectBytes: 20 * 1024 * 1024, allowedContentTypes: DEFAULT_CONTENT_TYPES },
    eInvoices: new En16931Reader(),
    ...overrides,
  });
  return { ...built, deliver: deliverer(built) };
}

/** Resolves once `condition` holds, checking after each turn of the event loop (at most 10,000). */
async function until(condition: () => boolean): Promise<void> {
  for (let turn = 0; !condition(); turn++) {
    if (turn > 10_000) throw new Error('the condition never held');
    await new Promise((resolve) => setImmediate(resolve));
  }
}

const FACTUR_X = fixture('factur-x-fr', 'Facture_FR_BASICWL.pdf');

describe('handle, with e-invoices', () => {
  it('reads a Factur-X PDF while the admission line is full, without entering it', async () => {
    const gate = new QuotaGate({ maxInFlight: 1, maxWaitMs: 60_000 });
    const { deliver, analyzer } = setup({ admission: gate });
    analyzer.hold();
    // A plain invoice takes the only place in the line and is held there by the analyzer.
    const plain = deliver('FACTURE N° F-1\nTotal TTC : 12,00 €\n', {
      name: 'a.txt',
      contentType: 'text/plain',
    });
    await analyzer.arrived(1);
    const waiting = deliver('FACTURE N° F-2\n', { name: 'b.txt', contentType: 'text/plain' });
    await until(() => gate.queued === 1);

    const structured = await deliver(readFileSync(FACTUR_X.path), {
      name: 'Facture_FR_BASICWL.pdf',
      contentType: 'application/pdf',
    });
    expect(structured.row).toMatchObject({ status: 'ok', model: 'e-invoice:factur-x', total_tokens: 0 });
    expect(gate.queued).toBe(1);
    expect(analyzer.calls.map((c) => c.name)).toEqual(['a.txt']);

    analyzer.release();
    await Promise.all([plain, waiting]);
    expect(analyzer.calls.map((c) => c.name)).toEqual(['a.txt', 'b.txt']);
  });

  it('analyses the picture of a PDF whose XML is unusable, and records why in the row’s reason', async () => {
    const { deliver, analyzer, reader } = setup();
    const pdf = await pdfWith('FACTURE F-2026-0042', deflated(ublInvoice({ omitTotal: true })));
    const { outcome, row } = await deliver(pdf, { name: 'hybrid.pdf', contentType: 'application/pdf' });
    expect(outcome).toMatchObject({ status: 'ok', analysed: true, fallback: 'e_invoice_incomplete' });
    expect(outcome.detail).toMatch(/BT-112/);
    expect(row).toMatchObject({
      status: 'ok',
      reason: 'e_invoice_incomplete',
      model: 'scripted',
      total_tokens: 1500,
    });
    expect(analyzer.calls).toHaveLength(1);
    // Read once to look for the XML, once more inside the line for the analyzer.
    expect(reader.reads).toHaveLength(2);
  });

  it('writes from a memo hit the reason and the checks of a PDF whose XML is unusable, as the paying delivery would have', async () => {
    const memo = new AnalysisMemo(new MemoryMemoStore(), { ttlMs: 86_400_000 });
    const { deliver, analyzer, store } = setup({ memo });
    failWrites(store, 1);
    const pdf = await pdfWith('FACTURE F-2026-0042', deflated(ublInvoice({ omitTotal: true })));
    const spec = { name: 'hybrid.pdf', contentType: 'application/pdf' };
    // The first delivery pays, keeps the analysis and fails to write; its retry takes it from the memo.
    await expect(deliver(pdf, spec, '1')).rejects.toMatchObject({ code: 'store_busy' });
    const { outcome, row } = await deliver(pdf, spec, '1');
    expect(outcome).toMatchObject({ status: 'ok', memo: 'hit', fallback: 'e_invoice_incomplete' });
    expect(row).toMatchObject({ status: 'ok', reason: 'e_invoice_incomplete', model: 'scripted' });
    expect(analyzer.calls).toHaveLength(1);
  });

  it('analyses an ordinary PDF as before, with no reason', async () => {
    const { deliver, analyzer } = setup();
    const { row } = await deliver(await pdfWith('FACTURE'), {
      name: 'plain.pdf',
      contentType: 'application/pdf',
    });
    expect(row).toMatchObject({ status: 'ok', reason: null, model: 'scripted' });
    expect(analyzer.calls).toHaveLength(1);
  });

  it('reads a UBL upload declared text/xml, and rejects an XML that is no invoice without analysing it', async () => {
    const { deliver, analyzer } = setup();
    const ubl = await deliver(ublInvoice(), { name: 'f.xml', contentType: 'text/xml; charset=utf-8' });
    expect(ubl.row).toMatchObject({ status: 'ok', model: 'e-invoice:ubl', total_tokens: 0 });
    expect(ubl.row!.analysis).toMatchObject({ invoice_number: 'F-2026-0042', total_amount: 1234.56 });

    const other = await deliver('<order><id>1</id></order>', {
      name: 'o.xml',
      contentType: 'application/xml',
    });
    expect(other.outcome).toMatchObject({ status: 'rejected', reason: 'not_an_e_invoice' });
    expect(other.outcome.detail).toMatch(/root is \{\}order/);
    expect(other.row).toMatchObject({ status: 'rejected', reason: 'not_an_e_invoice', analysis: null });
    expect(analyzer.calls).toHaveLength(0);
  });

  it('answers a hostile XML upload with a rejected row, never an error for Pub/Sub to retry', async () => {
    const { deliver, analyzer } = setup();
    const laughs = ublInvoice({
      prolog: '<!DOCTYPE Invoice [<!ENTITY a "ha"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>',
      id: '&b;',
    });
    const { outcome, row } = await deliver(laughs, {
      name: 'laughs.xml',
      contentType: 'application/xml',
    });
    expect(outcome).toMatchObject({ status: 'rejected', reason: 'not_an_e_invoice' });
    expect(outcome.detail).toMatch(/declares a DTD/);
    expect(row).toMatchObject({ status: 'rejected', reason: 'not_an_e_invoice' });
    expect(analyzer.calls).toHaveLength(0);
  });

  it('rejects bytes declared as XML that are not markup as content_mismatch', async () => {
    const { deliver } = setup();
    const { row } = await deliver('%PDF-1.7 not xml', { name: 'x.xml', contentType: 'application/xml' });
    expect(row).toMatchObject({ status: 'rejected', reason: 'content_mismatch' });
  });

  it('without the reader, treats a Factur-X PDF as any PDF (the analyzer pays)', async () => {
    const { deliver, analyzer } = setup({ eInvoices: undefined });
    const { row } = await deliver(readFileSync(FACTUR_X.path), {
      name: 'f.pdf',
      contentType: 'application/pdf',
    });
    expect(row).toMatchObject({ model: 'scripted' });
    expect(analyzer.calls).toHaveLength(1);
  });
});

describe('contentMatches for XML', () => {
  it.each([
    ['<?xml version="1.0"?><a/>', true],
    ['\ufeff  \n<Invoice/>', true],
    ['Facture', false],
    ['', false],
  ])('%j → %s', (text, expected) => {
    expect(contentMatches('application/xml', Buffer.from(text))).toBe(expected);
    expect(contentMatches('text/xml', Buffer.from(text))).toBe(expected);
  });
});
