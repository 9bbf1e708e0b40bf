import { findDate } from '../src/adapters/analyzers/offline/dates';
import { extractInvoice } from '../src/adapters/analyzers/offline/invoice';
import { textLines } from '../src/adapters/analyzers/offline/text';

/** The offline parsers on layouts beyond the French and English ones they were first written for. */

const read = (text: string) => extractInvoice(textLines(text));

describe('European dates', () => {
  it.each([
    ['7. Mai 2014', '2014-05-07'],
    ['19 april 2014', '2014-04-19'],
    ['18 maart 2014', '2014-03-18'],
    ['5 de marzo de 2026', '2026-03-05'],
    ['12 dicembre 2026', '2026-12-12'],
    ['1. März 2026', '2026-03-01'],
    ['8-9-2022', '2022-09-08'],
    ['04.04.2018', '2018-04-04'],
    ['August 3 , 2014', '2014-08-03'],
  ])('reads %s as %s', (text, iso) => {
    expect(findDate(text)).toBe(iso);
  });
});

describe('labels in German, Dutch, Spanish and Italian', () => {
  it('reads a German invoice', () => {
    const analysis = read(
      [
        'Muster Handel GmbH',
        'Hauptstraße 1, 80331 München',
        '',
        'Rechnungsnr.\t30064443',
        'Rechnungsdatum\t7. Mai 2014',
        'Zahlbar bis 21.05.2014',
        '',
        'Nettobetrag\t100,00 €',
        'MwSt. 19 %\t19,00 €',
        'Gesamtbetrag\t119,00 €',
      ].join('\n'),
    );
    expect(analysis).toMatchObject({
      document_type: 'invoice',
      supplier_name: 'Muster Handel GmbH',
      invoice_number: '30064443',
      issue_date: '2014-05-07',
      due_date: '2014-05-21',
      net_amount: 100,
      tax_amount: 19,
      total_amount: 119,
      currency: 'EUR',
    });
  });

  it('reads a Dutch invoice whose form puts its labels above its values', () => {
    const analysis = read(
      [
        'Factuuradres',
        'Strategic Corp',
        '',
        'Klant\tOrder\tFactuur datum\tFactuur\tVervaldatum',
        'SCONL0303\tSCONL0004\t8-9-2022\tVF1005193039\t22-9-2022',
        '',
        'Exclusief BTW\t€ 593,36\tSubtotaal\t€ 717,97',
        'BTW 21%\t€ 124,61',
        'Totaal\t€ 717,97',
      ].join('\n'),
    );
    expect(analysis).toMatchObject({
      invoice_number: 'VF1005193039',
      issue_date: '2022-09-08',
      due_date: '2022-09-22',
      net_amount: 593.36,
      tax_amount: 124.61,
      total_amount: 717.97,
    });
  });

  it('reads Spanish and Italian totals and numbers', () => {
    expect(
      read(
        'Factura nº F-77\nFecha de factura: 5 de marzo de 2026\nBase imponible\t200,00\nIVA 21%\t42,00\nTotal factura\t242,00 €',
      ),
    ).toMatchObject({
      invoice_number: 'F-77',
      issue_date: '2026-03-05',
      net_amount: 200,
      tax_amount: 42,
      total_amount: 242,
    });
    expect(
      read(
        'Fattura n. 2026/15\nData fattura: 12 dicembre 2026\nImponibile\t50,00\nIVA 22%\t11,00\nTotale documento\t61,00 €',
      ),
    ).toMatchObject({
      invoice_number: '2026/15',
      issue_date: '2026-12-12',
      net_amount: 50,
      tax_amount: 11,
      total_amount: 61,
    });
  });

  it('takes a Gutschrift for a credit note', () => {
    expect(read('Gutschrift Nr. G-12\nGesamtbetrag\t-50,00 €').document_type).toBe('credit_note');
  });
});

describe('totals by arithmetic', () => {
  it('takes the net, tax and total that add up over a later line of the same label', () => {
    const analysis = read(
      [
        'ACME Ltd',
        'Invoice No: 12',
        'Rechnungssumme ohne USt.\t198,00',
        'Gesamtbetrag der Zuschläge\t0,00',
        'Steuerbetrag\t37,62',
        'Bruttosumme\t235,62',
        'Zahlbetrag\t235,62',
      ].join('\n'),
    );
    expect(analysis).toMatchObject({ net_amount: 198, tax_amount: 37.62, total_amount: 235.62 });
  });

  it('accepts a zero tax when net and total are equal', () => {
    const analysis = read(
      'Physio\nRechnung Nr. R18-31\nNettobetrag\t380,00\nUSt 0 %\t0,00\nGesamtbetrag\t380,00',
    );
    expect(analysis).toMatchObject({ net_amount: 380, tax_amount: 0, total_amount: 380 });
  });
});

describe('the seller', () => {
  it('is the name after its label, past the lines of numbers in its block', () => {
    const analysis = read(
      [
        'Verkäufer:',
        'Nummer : 549910',
        'MUSTER-Autovermietung',
        'Musterstr. 99',
        '',
        'Käufer:',
        'MUSTER-KUNDE GMBH',
      ].join('\n'),
    );
    expect(analysis.supplier_name).toBe('MUSTER-Autovermietung');
    expect(analysis.customer_name).toBe('MUSTER-KUNDE GMBH');
  });

  it('is the letterhead’s name with a legal form, not the title beside it', () => {
    expect(read('FACTUUR.\tCoolblue B.V.\nWeena 664\nFactuurnummer: 993548900').supplier_name).toBe(
      'Coolblue B.V.',
    );
  });

  it('is never a name that only starts like a label ("Fromagerie" is not "From")', () => {
    expect(read('Facture n° F-1\nFacturé à : Fromagerie du Trièves\nTotal TTC\t12,00 €').customer_name).toBe(
      'Fromagerie du Trièves',
    );
  });
});

describe('dates beside their number, and due dates in sentences', () => {
  it('takes the date on the number’s line over an earlier date of the page', () => {
    const analysis = read(
      'Stylesheet-Version: 2.0 vom 18.10.2018\n\nHandelsrechnung Nr. 471113 vom 13.06.2018\nTotal\t1,00 €',
    );
    expect(analysis).toMatchObject({ invoice_number: '471113', issue_date: '2018-06-13' });
    expect(
      read('Facture n°562044387 du 02 Juillet 2015\nDate limite de paiement le 05 Juillet 2015'),
    ).toMatchObject({
      issue_date: '2015-07-02',
      due_date: '2015-07-05',
    });
  });

  it.each([
    [
      'Zahlbar innerhalb 30 Tagen netto bis 04.04.2018, 3% Skonto innerhalb 10 Tagen bis 15.03.2018.',
      '2018-04-04',
    ],
    ['Please remit until 2019-07-01.', '2019-07-01'],
  ])('reads the due date of "%s"', (sentence, iso) => {
    expect(read(`Rechnung Nr. 1 vom 01.03.2018\n${sentence}`).due_date).toBe(iso);
  });

  it('takes a seller named like its label ("Lieferant GmbH" under "Verkäufer:"), not its street', () => {
    const text =
      'Verkäufer:\nNummer\t: 549910\nGlobale Nummer: 4000001123452 (GTIN)\nLieferant GmbH\nLieferantenstraße 20';
    expect(read(text).supplier_name).toBe('Lieferant GmbH');
  });
});
