import { emptyAnalysis, readInvoice } from '../src/adapters/analyzers/offline/invoice';
import type { Analysis } from '../src/contract/analysis';
import {
  assess,
  fieldConfidences,
  luhnValid,
  parseReview,
  reviewReasons,
  sirenValid,
  siretValid,
  type Thresholds,
  vatIdValid,
} from '../src/core/review';

const invoice = (overrides: Partial<Analysis> = {}): Analysis => ({
  ...emptyAnalysis(),
  document_type: 'invoice',
  language: 'fr',
  supplier_name: 'Atelier Ravel SAS',
  invoice_number: 'F-2026-0142',
  issue_date: '2026-11-30',
  currency: 'EUR',
  net_amount: 100,
  tax_amount: 20,
  total_amount: 120,
  ...overrides,
});

/** Every field of every read source confident from 0.6 up. */
const at = (t: number): Thresholds => {
  const all = Object.fromEntries(
    ['supplier_name', 'invoice_number', 'issue_date', 'due_date', 'currency', 'net_amount', 'tax_amount']
      .concat(['total_amount', 'supplier_siren', 'supplier_siret', 'supplier_vat_id'])
      .map((f) => [f, t]),
  );
  return { text_layer: all, ocr: all, gemini: all };
};

describe('check digits', () => {
  it('checks SIREN and SIRET by Luhn, La Poste’s SIRETs by the sum of their digits', () => {
    expect(luhnValid('732829320')).toBe(true);
    expect(sirenValid('732 829 320')).toBe(true);
    expect(sirenValid('732829321')).toBe(false);
    expect(sirenValid('73282932')).toBe(false);
    expect(siretValid('73282932000074')).toBe(true);
    expect(siretValid('73282932000075')).toBe(false);
    // La Poste: 356 000 000 then an establishment, the digits summing to a multiple of 5.
    expect(siretValid('35600000000010')).toBe(true);
    expect(siretValid('35600000000011')).toBe(false);
  });

  it('checks a French VAT id’s key against its SIREN, and leaves other countries’ ids alone', () => {
    // key = (12 + 3 × (443061841 mod 97)) mod 97 = 64
    expect(vatIdValid('FR64443061841')).toBe(true);
    expect(vatIdValid('FR 64 443 061 841')).toBe(true);
    expect(vatIdValid('FR65443061841')).toBe(false);
    expect(vatIdValid('FR6444306184')).toBe(false);
    expect(vatIdValid('FRX4443061841')).toBe(true);
    expect(vatIdValid('DE123456789')).toBe(true);
  });
});

describe('the review verdict', () => {
  it('is none for a complete invoice whose fields are confident and add up', () => {
    const result = { analysis: invoice(), model: 'e-invoice:factur-x' };
    expect(assess(result).review).toBe('none');
    expect(assess(result).confidence.total_amount).toEqual({
      source: 'e_invoice_xml',
      how: 'stated',
      confidence: 1,
    });
  });

  it('names the arithmetic beyond a cent of rounding, and not within it', () => {
    const xml = 'e-invoice:cii';
    expect(assess({ analysis: invoice({ total_amount: 120.01 }), model: xml }).review).toBe('none');
    expect(assess({ analysis: invoice({ total_amount: 120.02 }), model: xml }).review).toBe('arithmetic');
  });

  it('names each required field missing, by document type', () => {
    const reasons = reviewReasons(invoice({ invoice_number: null, currency: null }), {}, at(0));
    expect(reasons).toEqual(['missing:invoice_number', 'missing:currency']);
    // A receipt has no number to give.
    expect(reviewReasons(invoice({ document_type: 'receipt', invoice_number: null }), {}, at(0))).toEqual([]);
    expect(parseReview(assess({ analysis: emptyAnalysis(), model: 'offline' }).review)).toEqual([
      'missing:supplier_name',
      'missing:invoice_number',
      'missing:issue_date',
      'missing:currency',
      'missing:total_amount',
    ]);
  });

  it('names an identifier failing its check, even one the XML states', () => {
    const analysis = invoice({ supplier_siren: '732829321', supplier_vat_id: 'FR65443061841' });
    expect(parseReview(assess({ analysis, model: 'e-invoice:ubl' }).review)).toEqual([
      'check_digit:supplier_siren',
      'check_digit:supplier_vat_id',
    ]);
  });

  it('names the fields below their source’s threshold', () => {
    const read = { analysis: invoice(), model: 'offline' };
    const confidence = fieldConfidences(read);
    expect(reviewReasons(read.analysis, confidence, at(0.6))).toEqual([]);
    expect(reviewReasons(read.analysis, confidence, at(0.95))).toEqual([
      'low_confidence:supplier_name',
      'low_confidence:invoice_number',
      'low_confidence:issue_date',
      'low_confidence:currency',
    ]);
    const never = { ...at(0.6), text_layer: { ...at(0.6).text_layer, currency: null } };
    expect(reviewReasons(read.analysis, confidence, never)).toEqual(['low_confidence:currency']);
  });
});

describe('field confidence', () => {
  /** What a German invoice's page says of its fields: the seller's `block`, then `dates`, then `after`. */
  const agreed = (block: string[], dates = ['Rechnungsdatum: 05.03.2018'], after: string[] = []) =>
    readInvoice([
      'Verkäufer:',
      ...block,
      '',
      'Rechnungsnummer: 4711',
      ...dates,
      '',
      ...after,
      'Nettobetrag  100,00',
      'MwSt. 19 %  19,00',
      'Gesamtbetrag  119,00',
    ]).agreed;

  it('follows how the offline analyzer found each field, raised by amounts that add up', () => {
    const { analysis, how } = readInvoice([
      'Atelier Ravel SAS',
      'Facture n° F-2026-0142',
      'Date : 30/11/2026',
      'SIRET : 732 829 320 00074',
      'Total HT  100,00 €',
      'TVA 20 %  20,00 €',
      'Total TTC  120,00 €',
    ]);
    const readings = Object.fromEntries(
      Object.entries(how).map(([f, h]) => [f, { source: 'text_layer' as const, how: h }]),
    );
    const c = fieldConfidences({ analysis, model: 'offline', readings });
    expect(c.invoice_number).toMatchObject({ source: 'text_layer', how: 'labelled' });
    expect(c.total_amount).toMatchObject({ how: 'cross_checked', confidence: 0.97 });
    expect(c.supplier_siren).toMatchObject({ how: 'derived' });
    // A SIRET with a valid check digit is surer than one read after its label alone.
    expect(c.supplier_siret!.confidence).toBeGreaterThan(0.9);
  });

  it('takes the date on a labelled number’s line for labelled, and a guessed date for a guess', () => {
    const titled = readInvoice([
      'Lieferant GmbH',
      'Rechnung Nr. 471113 vom 13.06.2018',
      'Gesamtbetrag 119,00',
    ]);
    expect(titled.analysis.issue_date).toBe('2018-06-13');
    expect(titled.how.issue_date).toBe('labelled');
    const dated = readInvoice(['Lieferant GmbH', 'Paris, le 30 novembre 2026', 'Total TTC 120,00 €']);
    expect(dated.how.issue_date).toBe('guess');
  });

  it('is not raised by net + tax = total when one of the three was computed from the other two', () => {
    // "Subtotaal 717,97" read as the net, the total 717,97 beside it: the tax is derived as 0.00,
    // and the three add up whatever the net really is.
    const readings = {
      net_amount: { source: 'text_layer' as const, how: 'labelled' as const },
      tax_amount: { source: 'text_layer' as const, how: 'derived' as const },
      total_amount: { source: 'text_layer' as const, how: 'labelled' as const },
    };
    const c = fieldConfidences({
      analysis: invoice({ net_amount: 717.97, tax_amount: 0, total_amount: 717.97 }),
      model: 'offline',
      readings,
    });
    expect(c.net_amount).toMatchObject({ how: 'labelled', confidence: 0.9 });
    expect(c.total_amount).toMatchObject({ how: 'labelled', confidence: 0.9 });
    expect(c.tax_amount).toMatchObject({ how: 'derived', confidence: 0.8 });
  });

  it('is raised for a value another place of the page bears out, lowered for one alone or contradicted', () => {
    const named = (agreement?: 'borne_out' | 'alone' | 'contradicted') =>
      fieldConfidences({
        analysis: invoice(),
        model: 'offline',
        readings: {
          supplier_name: { source: 'text_layer', how: 'labelled', ...(agreement ? { agreement } : {}) },
        },
      }).supplier_name!.confidence;
    expect(named('borne_out')).toBeGreaterThan(named());
    expect(named('alone')).toBeLessThan(named());
    expect(named('contradicted')).toBeLessThan(named('alone'));
  });

  it('learns from the offline analyzer what the page says of the seller’s name and the issue date', () => {
    // A legal form, or the name written again (a footer), bears it out; a word alone does not.
    expect(agreed(['Lieferant GmbH']).supplier_name).toBe('borne_out');
    expect(agreed(['Artikel']).supplier_name).toBe('alone');
    expect(agreed(['Artikel'], ['Rechnungsdatum: 05.03.2018', 'Artikel']).supplier_name).toBe('borne_out');
    // The page names it as the buyer: the other party's name, not the seller's.
    const buyer = ['Käufer:', 'Kunden AG', 'Hauptstraße 1', ''];
    expect(agreed(['Kunden AG'], undefined, buyer).supplier_name).toBe('contradicted');
    // A due date a month on bears the issue date out; a misread year sets it apart from every other date.
    const due = 'Fällig am: 04.04.2018';
    expect(agreed(['Lieferant GmbH'], ['Rechnungsdatum: 05.03.2018', due]).issue_date).toBe('borne_out');
    expect(agreed(['Lieferant GmbH'], ['Rechnungsdatum: 05.03.2017', due]).issue_date).toBe('alone');
    // One date on the page: nothing to compare it with.
    expect(agreed(['Lieferant GmbH']).issue_date).toBeUndefined();
  });

  it('doubts a seller’s name that the page writes on, onto the line under it', () => {
    const seller = (...block: string[]) => agreed(block).supplier_name;
    // A name too long for its column, wrapped: the value read may be its first line only.
    expect(seller('Stadtwerke Beispielstadt', 'Energie und Wasser', 'Hauptstraße 5')).toBe('contradicted');
    // A name, then a contact (a tuning invoice's seller block): the page does not say where the name ends.
    expect(seller('Physiotherapeutin', 'Tanja Tinder', 'Musterstraße 12')).toBe('contradicted');
    // In a column of its own, a column apart from the next line's cell: the same.
    expect(seller('Stadtwerke Beispielstadt    Kundennummer', 'Energie und Wasser')).toBe('contradicted');
    // An address or an identifier under the name does not go on with it; a legal form ends a name.
    expect(seller('Stadtwerke Beispielstadt', 'Hauptstraße 5')).toBe('alone');
    expect(seller('Lieferant GmbH', 'Vertrieb Süd', 'Hauptstraße 5')).toBe('borne_out');
    // A blank line between: another block, not the name's second line.
    expect(seller('Stadtwerke Beispielstadt', '', 'Energie und Wasser')).toBe('alone');
  });

  it('weighs OCR’s word confidence half as much on a value the page checks', () => {
    const read = (agreement?: 'borne_out') =>
      fieldConfidences({
        analysis: invoice(),
        model: 'offline+ocr:tesseract',
        readings: {
          supplier_name: {
            source: 'ocr',
            how: 'labelled',
            ocrConfidence: 50,
            ...(agreement ? { agreement } : {}),
          },
        },
      }).supplier_name!.confidence;
    // 0.9 × (0.6 + 0.4 × 0.5) unchecked; (0.9 + 0.05) × (0.8 + 0.2 × 0.5) borne out.
    expect(read()).toBeCloseTo(0.72, 3);
    expect(read('borne_out')).toBeCloseTo(0.855, 3);
  });

  it('is lowered by a failed check digit, amounts that do not add up, a due date before the issue', () => {
    const base = fieldConfidences({ analysis: invoice({ supplier_siren: '732829320' }), model: 'offline' });
    const bad = fieldConfidences({
      analysis: invoice({
        supplier_siren: '732829321',
        total_amount: 130,
        due_date: '2026-11-01',
      }),
      model: 'offline',
    });
    expect(bad.supplier_siren!.confidence).toBeLessThan(base.supplier_siren!.confidence);
    expect(bad.net_amount!.confidence).toBeLessThan(base.net_amount!.confidence);
    expect(bad.issue_date!.confidence).toBeLessThan(base.issue_date!.confidence);
  });

  it('is scaled by OCR’s word confidence, and tells the source of a result that does not say', () => {
    const reading = (ocrConfidence: number) => ({
      analysis: invoice(),
      model: 'offline+ocr:tesseract',
      readings: { invoice_number: { source: 'ocr' as const, how: 'labelled' as const, ocrConfidence } },
    });
    const sure = fieldConfidences(reading(95)).invoice_number!;
    const doubtful = fieldConfidences(reading(40)).invoice_number!;
    expect(doubtful.confidence).toBeLessThan(sure.confidence);
    expect(fieldConfidences(reading(95)).supplier_name).toMatchObject({ source: 'ocr', how: 'unknown' });
    expect(fieldConfidences({ analysis: invoice(), model: 'gemini-2.5-flash' }).currency).toMatchObject({
      source: 'gemini',
      how: 'model',
    });
    // A field without a value has no entry.
    expect(fieldConfidences({ analysis: invoice(), model: 'offline' }).due_date).toBeUndefined();
  });
});
