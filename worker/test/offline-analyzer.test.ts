import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PdfWriter } from '../../samples/pdf-writer';
import {
  detectCurrency,
  findAmounts,
  parseAmount,
  parseNumber,
  parsePercent,
  roundCents,
} from '../src/adapters/analyzers/offline/amounts';
import { findDate } from '../src/adapters/analyzers/offline/dates';
import { findSiren, findSiret, findVatId, sirenFrom } from '../src/adapters/analyzers/offline/ids';
import { detectLanguage, emptyAnalysis, extractInvoice } from '../src/adapters/analyzers/offline/invoice';
import { parseLineItems } from '../src/adapters/analyzers/offline/line-items';
import { textLines } from '../src/adapters/analyzers/offline/text';
import { OfflineAnalyzer } from '../src/adapters/analyzers/offline-analyzer';
import { placedTextToLines } from '../src/adapters/pdf/pdf-text';
import { type Analysis, parseAnalysis } from '../src/contract/analysis';
import { checkContent } from '../src/core/document-checks';
import { RejectionError } from '../src/core/errors';

const SAMPLES = join(__dirname, '..', '..', 'samples');
const CONTENT_TYPES: Record<string, string> = {
  pdf: 'application/pdf',
  txt: 'text/plain',
  png: 'image/png',
  jpg: 'image/jpeg',
};
const contentTypeOf = (file: string) => CONTENT_TYPES[file.split('.').pop()!]!;
/** The bytes of samples/`file`. */
const sample = (file: string) => readFileSync(join(SAMPLES, file));
const expected = JSON.parse(readFileSync(join(SAMPLES, 'expected.json'), 'utf8')) as Record<string, Analysis>;

const analyzer = new OfflineAnalyzer();
const analyze = (bytes: Buffer, contentType: string, name = 'doc') =>
  analyzer.analyze({ bytes, contentType, name });
const analyzeText = async (text: string) =>
  (await analyze(Buffer.from(text, 'utf8'), 'text/plain; charset=utf-8')).analysis;

async function pdfWithoutText(): Promise<Buffer> {
  const pdf = new PdfWriter();
  pdf.addPage(595, 842).drawRectangle({ x: 50, y: 600, width: 300, height: 150, fill: [0.8, 0.8, 0.8] });
  return pdf.save();
}

describe('OfflineAnalyzer', () => {
  it('has an expectation for at least 12 invoices, half French and half English', () => {
    const invoices = Object.entries(expected).filter(([file]) => file.startsWith('invoices/'));
    expect(invoices.length).toBeGreaterThanOrEqual(12);
    const french = invoices.filter(([, analysis]) => analysis.language === 'fr');
    expect(french.length * 2).toBe(invoices.length);
  });

  // The scan and the photo need OCR: worker/test/ocr.test.ts reads them.
  const textSamples = Object.keys(expected).filter((file) => !/^other\/(scan|photo)-/u.test(file));
  it.each(textSamples)('reads samples/%s as the generator wrote it', async (file) => {
    const bytes = sample(file);
    const result = await analyze(bytes, contentTypeOf(file), file);
    expect(result.analysis).toEqual(expected[file]);
    expect(parseAnalysis(result.analysis).ok).toBe(true);
  });

  it('reports the offline model and no token usage', async () => {
    const result = await analyze(sample('invoices/fr-02-facture-maintenance.txt'), 'text/plain');
    expect(result.model).toBe('offline');
    expect(result.usage).toEqual({ promptTokens: 0, outputTokens: 0, totalTokens: 0 });
  });

  it.each([
    ['image/png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0])],
    ['image/jpeg', Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10])],
    ['image/webp', Buffer.from('RIFF\0\0\0\0WEBPVP8 ', 'latin1')],
  ])('gives an image (%s) a valid analysis with every field empty: there is no OCR', async (type, bytes) => {
    const { analysis } = await analyze(bytes, type);
    expect(analysis).toEqual(emptyAnalysis());
    expect(parseAnalysis(analysis).ok).toBe(true);
  });

  it('gives a PDF without a text layer a valid analysis with every field empty', async () => {
    const { analysis } = await analyze(await pdfWithoutText(), 'application/pdf');
    expect(analysis).toEqual(emptyAnalysis());
    expect(parseAnalysis(analysis).ok).toBe(true);
  });

  it('gives an empty text an empty analysis', async () => {
    expect(await analyzeText('')).toEqual(emptyAnalysis());
    expect(await analyzeText(' \n\t\n')).toEqual(emptyAnalysis());
  });

  it('refuses, for good, bytes that pdf.js cannot open', async () => {
    const bytes = sample('bad/not-a-pdf.pdf');
    const failure = analyze(bytes, 'application/pdf', 'bad/not-a-pdf.pdf');
    await expect(failure).rejects.toBeInstanceOf(RejectionError);
    await expect(failure).rejects.toMatchObject({
      code: 'analysis_failed',
      cause: expect.objectContaining({ name: 'InvalidPDFException' }),
    });
  });

  it('refuses, for good, a truncated PDF', async () => {
    const whole = sample('invoices/en-01-invoice-design.pdf');
    const failure = analyze(whole.subarray(0, whole.length / 2), 'application/pdf');
    await expect(failure).rejects.toMatchObject({ code: 'analysis_failed' });
  });

  it('leaves the caller its bytes: pdf.js reads a copy', async () => {
    const bytes = sample('invoices/fr-01-facture-conseil.pdf');
    const length = bytes.length;
    await analyze(bytes, 'application/pdf');
    expect(bytes.length).toBe(length);
    expect((await analyze(bytes, 'application/pdf')).analysis.invoice_number).toBe('F-2026-0142');
  });
});

describe('the bad samples', () => {
  const limits = { maxObjectBytes: 1_000_000, allowedContentTypes: Object.values(CONTENT_TYPES) };

  it.each([
    ['bad/not-a-pdf.pdf', 'content_mismatch'],
    ['bad/empty.txt', 'empty_object'],
    ['bad/not-a-png.png', 'content_mismatch'],
    ['bad/binary-with-nul.txt', 'content_mismatch'],
  ])('%s is refused by the content check with %s', (file, reason) => {
    const bytes = sample(file);
    expect(() => checkContent(contentTypeOf(file), bytes, limits)).toThrow(
      expect.objectContaining({ code: reason }),
    );
  });

  it('the unreadable but valid documents pass the content check', () => {
    for (const file of ['other/receipt-photo.png', 'other/scanned-invoice.pdf']) {
      expect(() => checkContent(contentTypeOf(file), sample(file), limits)).not.toThrow();
    }
  });
});

describe('amounts', () => {
  it.each([
    ['1 234,56 €', 1234.56],
    ['1\u00a0234,56\u00a0€', 1234.56],
    ['1\u202f234,56\u00a0€', 1234.56],
    ['1 234 567,89 €', 1234567.89],
    ['1.234,56 EUR', 1234.56],
    ['€1,234.56', 1234.56],
    ['1,234.56 GBP', 1234.56],
    ['$1,234.56', 1234.56],
    ["CHF 1'234.50", 1234.5],
    ['120,5', 120.5],
    ['0,125', 0.125],
    ['-120,00 €', -120],
    ['-€450.00', -450],
    ['€-450.00', -450],
  ])('reads %j as %d', (text, value) => {
    expect(parseAmount(text)).toBe(value);
  });

  it('reads a lone separator before three digits as thousands, unless it is the decimal mark of the language', () => {
    expect(parseNumber('1.234')).toBe(1234);
    expect(parseNumber('1.234', ',')).toBe(1234);
    expect(parseNumber('1.234', '.')).toBe(1.234);
    expect(parseNumber('1,234', ',')).toBe(1.234);
    expect(parseNumber('1,234', '.')).toBe(1234);
  });

  it('attaches the currency written next to each amount', () => {
    expect(findAmounts('Total  €1,234.56').map((a) => a.currency)).toEqual(['EUR']);
    expect(findAmounts('1,234.56 GBP').map((a) => a.currency)).toEqual(['GBP']);
    expect(findAmounts('$12.00 and 3,00 CHF').map((a) => [a.value, a.currency])).toEqual([
      [12, 'USD'],
      [3, 'CHF'],
    ]);
    expect(findAmounts('Montant 1 000,00').map((a) => a.currency)).toEqual([null]);
  });

  it('skips percentages, dates and references', () => {
    expect(findAmounts('TVA 20 %  200,00 €').map((a) => a.value)).toEqual([200]);
    expect(findAmounts('TVA 5,5%').map((a) => a.value)).toEqual([]);
    expect(findAmounts('Facture F-2026-0142 du 30/11/2026')).toEqual([]);
  });

  it('keeps two columns apart when two spaces separate them', () => {
    expect(findAmounts('12  1 450,00').map((a) => a.value)).toEqual([12, 1450]);
  });

  it('reads percentages', () => {
    expect(parsePercent('5,5 %')).toBe(5.5);
    expect(parsePercent('20%')).toBe(20);
    expect(parsePercent('20')).toBeNull();
  });

  it('finds the currency a document is written in', () => {
    expect(detectCurrency('Total TTC 1 200,00 €\nTVA 200,00 €')).toBe('EUR');
    expect(detectCurrency('Total due £1,200.00')).toBe('GBP');
    expect(detectCurrency('Amount due: $80.00')).toBe('USD');
    expect(detectCurrency('Montant : 1 200,00 CHF')).toBe('CHF');
    expect(detectCurrency('no money here')).toBeNull();
  });

  it('rounds to cents, without a negative zero', () => {
    expect(roundCents(0.1 + 0.2)).toBe(0.3);
    expect(roundCents(1234.5649)).toBe(1234.56);
    expect(roundCents(-0.001)).toBe(0);
  });
});

describe('dates', () => {
  it.each([
    ['30/11/2026', '2026-11-30'],
    ['30.11.2026', '2026-11-30'],
    ['2026-11-30', '2026-11-30'],
    ['Lyon, le 30 novembre 2026', '2026-11-30'],
    ['1er décembre 2026', '2026-12-01'],
    ['5 août 2026', '2026-08-05'],
    ['30 November 2026', '2026-11-30'],
    ['November 30, 2026', '2026-11-30'],
    ['Nov 30, 2026', '2026-11-30'],
    ['3rd March 2026', '2026-03-03'],
    // German, Dutch, Spanish and Italian dates, and other European layouts.
    ['7. Mai 2014', '2014-05-07'],
    ['19 april 2014', '2014-04-19'],
    ['18 maart 2014', '2014-03-18'],
    ['5 de marzo de 2026', '2026-03-05'],
    ['12 dicembre 2026', '2026-12-12'],
    ['1. März 2026', '2026-03-01'],
    ['8-9-2022', '2022-09-08'],
    ['04.04.2018', '2018-04-04'],
    ['August 3 , 2014', '2014-08-03'],
  ])('reads %j as %s', (text, iso) => {
    expect(findDate(text)).toBe(iso);
  });

  it('reads numeric dates day first, in English too', () => {
    expect(findDate('Invoice date: 04/11/2026')).toBe('2026-11-04');
  });

  it('refuses days that are not in the calendar', () => {
    expect(findDate('31/02/2026')).toBeNull();
    expect(findDate('30 brumaire 2026')).toBeNull();
  });

  it('returns the first date written', () => {
    expect(findDate('Période du 1er novembre 2026 au 30/11/2026')).toBe('2026-11-01');
  });
});

describe('identifiers', () => {
  it('reads a SIREN written in groups, after SIREN or RCS', () => {
    expect(findSiren('SIREN : 123 456 789')).toBe('123456789');
    expect(findSiren('RCS Lyon 812 345 674')).toBe('812345674');
    expect(findSiren('SIREN 12345678')).toBeNull();
  });

  it('reads a SIRET of 14 digits', () => {
    expect(findSiret('SIRET : 812 345 674 00015')).toBe('81234567400015');
    expect(findSiret('SIRET : 812 345 674')).toBeNull();
  });

  it('finds the SIREN inside a SIRET or a French VAT id', () => {
    expect(sirenFrom('81234567400015', null)).toBe('812345674');
    expect(sirenFrom(null, 'FR12812345674')).toBe('812345674');
    expect(sirenFrom(null, 'GB123456789')).toBeNull();
  });

  it.each([
    ['TVA intracommunautaire : FR 12 345678901', 'FR12345678901'],
    ['N° TVA : FR12345678901 - RCS Paris', 'FR12345678901'],
    ['VAT No: GB123456789', 'GB123456789'],
    ['VAT No: GB 284 1937 52', 'GB284193752'],
    ['USt-IdNr. DE123456789', 'DE123456789'],
    ['VAT number: NL 8123.45.678.B01', 'NL812345678B01'],
    ['VAT Reg. No: IE 4821937KH', 'IE4821937KH'],
  ])('reads the VAT id in %j', (text, id) => {
    expect(findVatId(text)).toBe(id);
  });

  it('does not take capitals or bank details for a VAT id', () => {
    expect(findVatId('INVOICE FOR SERVICES RENDERED')).toBeNull();
    expect(findVatId('IBAN FR76 3000 6000 0112 3456 7890 189')).toBeNull();
    expect(findVatId('DE12345')).toBeNull();
  });
});

describe('PDF text layout', () => {
  const at = (str: string, x: number, y: number, width = str.length * 5) => ({
    str,
    x,
    y,
    width,
    fontSize: 10,
  });

  it('reads lines top to bottom and puts a tab between columns, a space between words', () => {
    const lines = placedTextToLines([
      at('Total TTC', 320, 500, 45),
      at('1 234,56 €', 490, 500, 50),
      at('Facture', 50, 700, 35),
      at('n° 12', 87, 700, 25),
      at('', 0, 600, 0),
    ]);
    expect(lines).toEqual(['Facture n° 12', '', 'Total TTC\t1 234,56 €']);
  });

  it('leaves a blank line where lines are far apart, as between blocks', () => {
    const lines = placedTextToLines([
      at('Client :', 50, 700),
      at('Mme Dupont', 50, 685),
      at('Total', 50, 640),
    ]);
    expect(lines).toEqual(['Client :', 'Mme Dupont', '', 'Total']);
  });
});

describe('invoice fields', () => {
  it('computes the missing third of net, tax and total', () => {
    expect(extractInvoice(textLines('Facture n° 1\nTotal HT  100,00 €\nTVA 20 %  20,00 €'))).toMatchObject({
      net_amount: 100,
      tax_amount: 20,
      total_amount: 120,
    });
    expect(extractInvoice(textLines('Invoice No: 7\nSubtotal  $10.10\nTotal due  $12.12'))).toMatchObject({
      net_amount: 10.1,
      tax_amount: 2.02,
      total_amount: 12.12,
    });
    expect(extractInvoice(textLines('Invoice No: 7\nTotal due  $12.12'))).toMatchObject({
      net_amount: null,
      tax_amount: null,
      total_amount: 12.12,
    });
  });

  it('tells French from English, and neither from other languages', () => {
    expect(detectLanguage('Facture n° 12 du 30/11/2026, total TTC à payer par le client')).toBe('fr');
    expect(detectLanguage('Invoice number 12: the total amount is due within 30 days')).toBe('en');
    expect(detectLanguage('Rechnung Nr. 12, Gesamtbetrag zahlbar innerhalb von 30 Tagen')).toBe('other');
  });

  it('does not take a customer number for the customer', async () => {
    const analysis = await analyzeText(
      'ACME Conseil\nFacture n° F-1\nClient n° C-12\n\nClient :\nMme Dupont\n',
    );
    expect(analysis.customer_name).toBe('Mme Dupont');
    expect(analysis.supplier_name).toBe('ACME Conseil');
  });

  it('numbers a credit note by its own number, not the invoice it cancels', async () => {
    const analysis = await analyzeText(
      "Facture d'origine n° F-2026-0098\nAvoir n° AV-7\nTotal TTC  -12,00 €\n",
    );
    expect(analysis.document_type).toBe('credit_note');
    expect(analysis.invoice_number).toBe('AV-7');
    expect(analysis.total_amount).toBe(-12);
  });

  it('takes the supplier ids outside the customer block', async () => {
    const analysis = await analyzeText(
      'Atelier Sud\nTVA intracommunautaire : FR 40 123456789\n\nBill to:\nNorth Ltd\nVAT No: GB123456789\n',
    );
    expect(analysis.supplier_vat_id).toBe('FR40123456789');
    expect(analysis.supplier_siren).toBe('123456789');
  });

  it('reads line items from the columns of a header it recognises', () => {
    const lines = textLines(
      'Description        Qty   Unit price   VAT   Amount\nDesign work          2      $100.00   20%  $200.00\n  continued\n\nTotal  $240.00',
    );
    expect(parseLineItems(lines, '.').items).toEqual([
      { description: 'Design work continued', quantity: 2, unit_price: 100, amount: 200, vat_rate: 20 },
    ]);
  });

  it('reads line items from the right when a row has fewer cells than the header', () => {
    const lines = textLines(
      'Désignation   Qté   Prix unitaire HT   TVA   Montant HT\nConseil   3   100,00   300,00',
    );
    expect(parseLineItems(lines, ',').items).toEqual([
      { description: 'Conseil', quantity: 3, unit_price: 100, amount: 300, vat_rate: null },
    ]);
  });
});
