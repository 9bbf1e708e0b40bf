import { readFileSync } from 'node:fs';
import { OfflineAnalyzer } from '../src/adapters/analyzers/offline-analyzer';
import { En16931Reader } from '../src/adapters/e-invoice/en16931-reader';
import { PdfJsParser } from '../src/adapters/pdf/pdfjs-parser';
import { DEFAULT_CONTENT_TYPES } from '../src/contract/settings';
import { deflated, pdfWith, ublInvoice } from './support/e-invoice-builders';
import { fixture } from './support/e-invoices';
import { deliverer, handlerDeps } from './support/handler';

/**
 * One PDF, one parse: the e-invoice reader (before the admission line) and the offline analyzer
 * (inside it) read each delivery's PDF from one pdf.js load, whatever the reader finds.
 */

function setup(options: { shared: boolean }) {
  const pdf = new PdfJsParser();
  const own = new PdfJsParser();
  const analyzer = new OfflineAnalyzer({ pdf: options.shared ? pdf : own });
  const built = handlerDeps({
    limits: { maxObjectBytes: 20 * 1024 * 1024, allowedContentTypes: DEFAULT_CONTENT_TYPES },
    eInvoices: new En16931Reader(options.shared ? pdf : undefined),
    analyzer,
  });
  return { pdf, deliver: deliverer(built), reader: built.reader, analyzerLoads: () => own.loads };
}

const FACTUR_X = fixture('factur-x-fr', 'Facture_FR_BASICWL.pdf');
const asPdf = { contentType: 'application/pdf' };

describe('each PDF is parsed once per delivery', () => {
  it('an ordinary PDF: the reader sees no attachment in its bytes, the analyzer parses it', async () => {
    const { pdf, deliver } = setup({ shared: true });
    const { row } = await deliver(await pdfWith('FACTURE F-2026-0042\nTotal TTC : 12,00 €'), {
      name: 'plain.pdf',
      ...asPdf,
    });
    expect(row).toMatchObject({ status: 'ok', model: 'offline' });
    expect(row?.analysis).toMatchObject({ invoice_number: 'F-2026-0042' });
    expect(pdf.loads).toBe(1);
  });

  it('a Factur-X PDF: read from its XML, one load, no analysis', async () => {
    const { pdf, deliver } = setup({ shared: true });
    const { row } = await deliver(readFileSync(FACTUR_X.path), { name: FACTUR_X.file, ...asPdf });
    expect(row).toMatchObject({ status: 'ok', model: 'e-invoice:factur-x' });
    expect(pdf.loads).toBe(1);
  });

  it('a PDF whose XML is unusable: the analyzer takes the reader’s parse, though it reads the bytes again', async () => {
    const { pdf, deliver, reader } = setup({ shared: true });
    const bytes = await pdfWith('FACTURE F-2026-0042', deflated(ublInvoice({ omitTotal: true })));
    const { row } = await deliver(bytes, { name: 'hybrid.pdf', ...asPdf });
    expect(row).toMatchObject({
      status: 'ok',
      model: 'offline',
      reason: 'e_invoice_incomplete',
    });
    expect(row?.analysis).toMatchObject({ invoice_number: 'F-2026-0042' });
    expect(reader.reads).toHaveLength(2);
    expect(pdf.loads).toBe(1);
  });

  it('without the shared parser the same delivery parses the PDF twice (what sharing saves)', async () => {
    const { pdf, deliver, analyzerLoads } = setup({ shared: false });
    const bytes = await pdfWith('FACTURE F-2026-0042', deflated(ublInvoice({ omitTotal: true })));
    await deliver(bytes, { name: 'hybrid.pdf', ...asPdf });
    // The reader's own parser read the attachment; the analyzer's parser made a second load.
    expect(pdf.loads).toBe(0);
    expect(analyzerLoads()).toBe(1);
  });

  it('keeps a handed-over parse for the same bytes only, and only a few of them', async () => {
    const pdf = new PdfJsParser({ keptParses: 2 });
    const documents = await Promise.all(['A-1', 'A-2', 'A-3'].map((n) => pdfWith(`FACTURE ${n}`)));
    for (const bytes of documents) pdf.keep(bytes, await pdf.parse(bytes));
    expect(pdf.loads).toBe(3);
    // The oldest was pushed out: parsed again. The two last are taken once each, then gone.
    await pdf.parse(documents[0]!);
    await pdf.parse(documents[2]!);
    await pdf.parse(documents[2]!);
    expect(pdf.loads).toBe(5);
  });
});
