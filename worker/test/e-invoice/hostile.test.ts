import { readFileSync } from 'node:fs';
import { En16931Reader } from '../../src/adapters/e-invoice/en16931-reader';
import { mayCarryAttachment } from '../../src/adapters/e-invoice/factur-x';
import { XML_LIMITS } from '../../src/adapters/e-invoice/xml';
import { RejectionError } from '../../src/core/errors';
import type { EInvoiceReading } from '../../src/core/ports';
import { deflated, hostileTargets, pdfWith, ublInvoice } from '../support/e-invoice-builders';
import { fixtures } from '../support/e-invoices';

/**
 * Hostile XML, as a bare upload and inside a Factur-X PDF. Every attack gets a defined answer: a
 * bare XML is rejected (`not_an_e_invoice`, with the cause in the detail); a PDF falls back to the
 * analysis of its picture (`e_invoice_unreadable`). Nothing is fetched, expanded or recursed into.
 */

const reader = new En16931Reader();

/** The refusal of a bare XML upload: its detail, or a failure when it was not refused. */
async function refusal(xml: string | Buffer): Promise<string> {
  try {
    const reading = await reader.read({
      bytes: Buffer.from(xml),
      contentType: 'application/xml',
      name: 'up.xml',
    });
    throw new Error(`not refused: ${JSON.stringify(reading).slice(0, 200)}`);
  } catch (error) {
    if (!(error instanceof RejectionError)) throw error;
    expect(error.code).toBe('not_an_e_invoice');
    return error.message;
  }
}

/** What the reader makes of the PDF `bytes`. */
const readPdf = (bytes: Buffer, name = 'hybrid.pdf'): Promise<EInvoiceReading> =>
  reader.read({ bytes, contentType: 'application/pdf', name });

/** What the reader makes of a PDF carrying `xml` as its factur-x.xml. */
const inPdf = async (xml: string | Buffer) => readPdf(await pdfWith('FACTURE F-2026-0042', deflated(xml)));

describe('hostile XML', () => {
  const targets = hostileTargets();
  const xxeFile = () =>
    ublInvoice({
      prolog: `<!DOCTYPE Invoice [<!ENTITY xxe SYSTEM "file://${targets.dir}/secret.txt">]>`,
      id: '&xxe;',
    });
  const xxeUrl = () =>
    ublInvoice({ prolog: `<!DOCTYPE Invoice [<!ENTITY xxe SYSTEM "${targets.url}/entity">]>`, id: '&xxe;' });
  const externalDtd = () => ublInvoice({ prolog: `<!DOCTYPE Invoice SYSTEM "${targets.url}/invoice.dtd">` });
  const parameterEntity = () =>
    ublInvoice({ prolog: `<!DOCTYPE Invoice [<!ENTITY % remote SYSTEM "${targets.url}/p.dtd"> %remote;]>` });
  const billionLaughs = () => {
    const levels = ['<!ENTITY lol0 "lol">'];
    for (let i = 1; i <= 9; i++) levels.push(`<!ENTITY lol${i} "${`&lol${i - 1};`.repeat(10)}">`);
    return ublInvoice({ prolog: `<!DOCTYPE Invoice [${levels.join('')}]>`, id: '&lol9;' });
  };

  it.each([
    ['an external file entity (XXE)', xxeFile],
    ['an external URL entity (XXE)', xxeUrl],
    ['an external DTD', externalDtd],
    ['a parameter entity', parameterEntity],
    ['billion laughs', billionLaughs],
  ])('refuses %s as a declared DTD, and never reads, fetches or expands anything', async (_, build) => {
    const started = performance.now();
    const detail = await refusal(build());
    expect(detail).toMatch(/declares a DTD/);
    expect(detail).not.toMatch(/TOP-SECRET|FETCHED|lollol/);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(targets.requests).toEqual([]);
  });

  it('refuses a DTD whatever the case it is written in', async () => {
    expect(await refusal(ublInvoice({ prolog: `<!doctype Invoice SYSTEM "${targets.url}/x.dtd">` }))).toMatch(
      /declares a DTD/,
    );
    expect(targets.requests).toEqual([]);
  });

  it('refuses an entity that no DTD declares, rather than keep it as text', async () => {
    expect(await refusal(ublInvoice({ id: '&xxe;' }))).toMatch(/undeclared entity "&xxe;"/);
  });

  it('decodes only the predefined entities and character references', async () => {
    const reading = await reader.read({
      bytes: Buffer.from(ublInvoice({ id: 'A&amp;B&#x2d;&#49;&lt;' })),
      contentType: 'application/xml',
      name: 'ok.xml',
    });
    expect(reading).toMatchObject({ kind: 'read', result: { analysis: { invoice_number: 'A&B-1<' } } });
    expect(reading.kind === 'read' && reading.result.analysis.supplier_name).toBe('Atelier Dupont & Fils');
  });

  it(`refuses nesting deeper than ${XML_LIMITS.maxDepth} elements without recursing into it`, async () => {
    const depth = 100_000;
    const deep = ublInvoice({ id: `${'<x>'.repeat(depth)}1${'</x>'.repeat(depth)}` });
    expect(await refusal(deep)).toMatch(/nested|nests deeper/i);
  });

  it(`refuses an XML over ${XML_LIMITS.maxBytes} bytes before parsing it`, async () => {
    const huge = ublInvoice({ id: 'x'.repeat(XML_LIMITS.maxBytes) });
    expect(await refusal(huge)).toMatch(/over the cap of 5242880/);
  });

  it('refuses malformed XML, two roots, and bytes that are not UTF-8', async () => {
    expect(await refusal(ublInvoice().replace('</cbc:IssueDate>', '</cbc:DueDate>'))).toMatch(/malformed/);
    expect(await refusal(`${ublInvoice()}<Invoice/>`)).toMatch(/malformed|root elements/);
    expect(await refusal(Buffer.from(ublInvoice().replace('UTF-8', 'UTF-16'), 'utf16le'))).toMatch(
      /not UTF-8/,
    );
  });

  it('rejects XML that is no EN 16931 invoice, naming its root', async () => {
    expect(await refusal('<html><body>Facture</body></html>')).toMatch(/root is \{\}html, not a CII/);
    const wrongNamespace = ublInvoice().replace('xsd:Invoice-2', 'xsd:Order-2');
    expect(await refusal(wrongNamespace)).toMatch(/Order-2\}Invoice, not a CII/);
  });

  it('rejects an invoice without a required term, naming the term', async () => {
    expect(await refusal(ublInvoice({ omitTotal: true }))).toMatch(/BT-112 \(total_amount\) is missing/);
  });

  const DTD = /declares a DTD/;
  it.each([
    ['carries an external file entity', 'e_invoice_unreadable', DTD, () => inPdf(xxeFile())],
    ['carries an external URL entity', 'e_invoice_unreadable', DTD, () => inPdf(xxeUrl())],
    ['carries billion laughs', 'e_invoice_unreadable', DTD, () => inPdf(billionLaughs())],
    [
      'carries a compressed bomb, whose inflating stops at the XML cap',
      'e_invoice_unreadable',
      /over the XML cap of 5242880 bytes once inflated/,
      () => inPdf(Buffer.alloc(XML_LIMITS.maxBytes * 4, 0x20)),
    ],
    [
      'stores its attachment with a filter the reader does not decode',
      'e_invoice_unreadable',
      /LZWDecode/,
      async () => readPdf(await pdfWith('FACTURE', { stored: Buffer.from('x'), filter: 'LZWDecode' })),
    ],
    ['lacks a required term', 'e_invoice_incomplete', /BT-112/, () => inPdf(ublInvoice({ omitTotal: true }))],
  ] as const)('falls back to the picture when a PDF %s (%s)', async (_, reason, detail, read) => {
    expect(await read()).toMatchObject({ kind: 'fallback', reason, detail: expect.stringMatching(detail) });
    expect(targets.requests).toEqual([]);
  });
});

describe('PDFs without a usable e-invoice attachment', () => {
  it.each([
    ['finds none in an ordinary PDF', () => pdfWith('FACTURE F-2026-0042')],
    [
      'ignores an attachment that is not named as an e-invoice',
      () => pdfWith('FACTURE', { ...deflated(ublInvoice()), filename: 'terms.xml' }),
    ],
    [
      'leaves bytes that pdf.js cannot parse to the analyzer',
      async () => Buffer.from('%PDF-1.7\n this is not a PDF body'),
    ],
  ])('%s', async (_, build) => {
    expect(await readPdf(await build())).toEqual({ kind: 'none' });
  });

  it('reads a ZUGFeRD or XRechnung attachment as it reads factur-x.xml', async () => {
    for (const filename of ['ZUGFeRD-invoice.xml', 'xrechnung.xml']) {
      const reading = await readPdf(await pdfWith('RECHNUNG', { ...deflated(ublInvoice()), filename }));
      expect(reading).toMatchObject({ kind: 'read', result: { model: 'e-invoice:factur-x' } });
    }
  });

  it('skips parsing a PDF whose bytes name no embedded file, and parses every Factur-X fixture', async () => {
    expect(mayCarryAttachment(await pdfWith('FACTURE F-2026-0042'))).toBe(false);
    for (const f of [...fixtures('factur-x-fr'), ...fixtures('factur-x-fr-invalid')]) {
      expect(mayCarryAttachment(readFileSync(f.path))).toBe(true);
    }
    // Without any `EmbeddedFile` marker, the file name stored as it is still shows.
    const pdf = await pdfWith('FACTURE', deflated(ublInvoice()));
    const unmarked = Buffer.from(
      pdf.toString('latin1').replaceAll('EmbeddedFile', 'AttachedThing'),
      'latin1',
    );
    expect(unmarked.includes('EmbeddedFile')).toBe(false);
    expect(mayCarryAttachment(unmarked)).toBe(true);
  });
});
