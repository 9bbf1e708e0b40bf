import { extractInvoice } from '../src/adapters/analyzers/offline/invoice';
import { textLines } from '../src/adapters/analyzers/offline/text';

/** The offline parsers on layouts beyond the French and English ones they were first written for. */

/** The analysis of `text`, or of `lines` one under the other. */
const read = (text: string | string[]) =>
  extractInvoice(textLines(Array.isArray(text) ? text.join('\n') : text));

describe('labels in German, Dutch, Spanish and Italian', () => {
  it('reads a German invoice', () => {
    const analysis = read([
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
    ]);
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
    const analysis = read([
      'Factuuradres',
      'Strategic Corp',
      '',
      'Klant\tOrder\tFactuur datum\tFactuur\tVervaldatum',
      'SCONL0303\tSCONL0004\t8-9-2022\tVF1005193039\t22-9-2022',
      '',
      'Exclusief BTW\t€ 593,36\tSubtotaal\t€ 717,97',
      'BTW 21%\t€ 124,61',
      'Totaal\t€ 717,97',
    ]);
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
    const analysis = read([
      'ACME Ltd',
      'Invoice No: 12',
      'Rechnungssumme ohne USt.\t198,00',
      'Gesamtbetrag der Zuschläge\t0,00',
      'Steuerbetrag\t37,62',
      'Bruttosumme\t235,62',
      'Zahlbetrag\t235,62',
    ]);
    expect(analysis).toMatchObject({ net_amount: 198, tax_amount: 37.62, total_amount: 235.62 });
  });

  it('takes no tax from an items row whose rate column names the VAT, nor a tax total twice', () => {
    // An items table it does not recognise, a per-rate summary, then the tax total under another
    // name; the gross total's label is unreadable (its letters spaced apart), so the tax decides it.
    const analysis = read([
      'Taxi GmbH',
      'Rechnung Nr. TX-471102 vom 30.10.2019',
      'Pos\tBeschreibung\tNettopreis\tMenge\tSteuer\tEntgelt',
      '1\tGrundpreis\t3,90\t1 Stk\t7 % VAT (S)\t3,90',
      '',
      '2\tStadtfahrt\t2,00\t6 Stk\t7 % VAT (S)\t13,00',
      '',
      'VAT (S)\t16,90\t7\t1,18',
      '',
      'Rechnungssumme ohne USt.\t16,90',
      'Steuerbetrag\t1,18',
      'Br uttosumme\t18,08',
    ]);
    expect(analysis).toMatchObject({ net_amount: 16.9, tax_amount: 1.18, total_amount: 18.08 });
    // Two rates whose taxes differ are still added up.
    expect(read('Nettobetrag\t200,00\nMwSt 19 %\t19,00\nMwSt 7 %\t7,00').tax_amount).toBe(26);
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
    const analysis = read([
      'Verkäufer:',
      'Nummer : 549910',
      'MUSTER-Autovermietung',
      'Musterstr. 99',
      '',
      'Käufer:',
      'MUSTER-KUNDE GMBH',
    ]);
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

describe('general rules for layouts not seen before', () => {
  it('takes the seller from a letter’s return address line, and the customer from the window under it', () => {
    const analysis = read([
      'Bei Spiel GmbH  ●  Ecke 12  ●  12345 Stadthausen',
      'phone (555) 23 78 -0',
      'Theodor Est',
      'Bahnstr. 42',
      '88802 Spielkreis',
      '',
      'Rechnung Nr. RE-507 vom 10.06.2019',
      'Gesamtbetrag\t119,00 €',
    ]);
    expect(analysis).toMatchObject({ supplier_name: 'Bei Spiel GmbH', customer_name: 'Theodor Est' });
    // With commas and dashes between its parts too.
    expect(
      read(['QualityHosting AG - Uferweg 40-42 - D-63571 Gelnhausen', '', 'iViveLabs Ltd.', 'Hong Kong']),
    ).toMatchObject({ supplier_name: 'QualityHosting AG', customer_name: 'iViveLabs Ltd.' });
  });

  it('takes the name under a delivery-address heading in the window, not the heading', () => {
    // The FNFE-MPE Factur-X examples' layout: the window's first line is the heading of its block.
    const analysis = read([
      "Au bon moulin SARL - 1242 chemin de l'olive - 84340 Malaucène - France",
      '+33 4 50 44 68 99 - http://www.aubonmoulin.fr',
      'TVA : FR11999999998 - SIRET : 99999999800010 - APE : 4778C',
      '',
      'Facture FA-2017-0010',
      '',
      'Adresse de livraison',
      'Ma jolie boutique',
      '35 rue de la République',
      '69001 Lyon',
    ]);
    expect(analysis).toMatchObject({
      supplier_name: 'Au bon moulin SARL',
      customer_name: 'Ma jolie boutique',
    });
    expect(
      read(['Bei Spiel GmbH - Ecke 12 - 12345 Stadthausen', '', 'Delivery Address:', 'Me gusta olive'])
        .customer_name,
    ).toBe('Me gusta olive');
  });

  it('prefers the currency a label names over the symbols of the amounts', () => {
    const analysis = read([
      'Rechnungswährung\t: GBP',
      'Währung der Umsatzsteuerbuchung : EUR',
      'Gesamtbetrag\t100,00 EUR',
    ]);
    expect(analysis.currency).toBe('GBP');
    // A word after "currency" is no code.
    expect(read('Currency conversion applied\nTotal\t€ 12.00').currency).toBe('EUR');
  });

  it('reads a due date under a column header, a line or two below', () => {
    const analysis = read([
      'Rechnungsdatum: 01.10.2018',
      '',
      'Beschreibung\tFälligkeit\tTeilzahlung',
      'Bitte überweisen Sie bis',
      '21.11.2018',
    ]);
    expect(analysis).toMatchObject({ issue_date: '2018-10-01', due_date: '2018-11-21' });
    expect(read('Zahlbar ohne Abschlag bis\t20.11.2018').due_date).toBe('2018-11-20');
  });

  it('reads a summary table of net, tax and total columns, and not an items table', () => {
    const analysis = read([
      'Artikel\tOmschrijving\tPrijs\tTotaal',
      'E103184\tOnderhoudsset\t49,99\t49,99',
      '',
      'BTW %\tGrondslag\tBTW bedrag\tTotaal',
      '21 %\t41,31\t8,68\t49,99',
    ]);
    expect(analysis).toMatchObject({ net_amount: 41.31, tax_amount: 8.68, total_amount: 49.99 });
  });

  it.each([
    ['Rechnungs-Nr.: RE-2024-001', 'RE-2024-001'],
    ['Belegnummer\t4711', '4711'],
    ['Gutschrift (Selbst ausgestellte Rechnung) Nr. 471102', '471102'],
    ['Handelsrechnung (380) Nr. 471102 vom 05.06.2018', '471102'],
    ['Invoice ID: INV-88', 'INV-88'],
    ['Re.-Nr.: 2024-17', '2024-17'],
    ['Inv. No. 5521', '5521'],
  ])('reads the invoice number of %s', (line, number) => {
    expect(read(`${line}\nTotal\t12,00 €`).invoice_number).toBe(number);
  });

  it('reads a self-billed Gutschrift as an invoice, and any other Gutschrift as a credit note', () => {
    expect(read('Gutschrift (Selbst ausgestellte Rechnung) Nr. 471102\nTotal\t12,00 €').document_type).toBe(
      'invoice',
    );
    expect(read('Gutschrift Nr. 471102\nTotal\t-12,00 €').document_type).toBe('credit_note');
  });

  it('does not take another document’s number for the invoice’s', () => {
    expect(read('Rechnung zu Bestellung Nr. 4711 vom 01.03.2018\nTotal\t12,00 €').invoice_number).toBeNull();
  });

  it('reads a form: a heading over bare fields', () => {
    const analysis = read([
      'Rechnungsdaten',
      'Nummer: 471102',
      'Datum: 05.03.2018',
      '',
      'Verkäufer',
      'Name: Lieferant GmbH',
      'Straße: Lieferantenstraße 20',
      '',
      'Käufer',
      'Name: Kunden AG Mitte',
    ]);
    expect(analysis).toMatchObject({
      invoice_number: '471102',
      issue_date: '2018-03-05',
      supplier_name: 'Lieferant GmbH',
      customer_name: 'Kunden AG Mitte',
    });
  });

  it('reads a form whose fields have their values a column apart, under each party’s heading', () => {
    const analysis = read([
      'Verkäufer',
      'Nummer:\t549910',
      'Name:\tLieferant GmbH',
      'Anschrift:\tLieferantenstraße 20',
      'DE 80333 München',
      '',
      'Käufer/Leistungsempfänger',
      'Nummer:\tGE2020211',
      'Name:\tKunden AG Mitte',
      '',
      'Bruttosumme\t235,62',
    ]);
    expect(analysis).toMatchObject({ supplier_name: 'Lieferant GmbH', customer_name: 'Kunden AG Mitte' });
  });

  it('reads a label over its value in the same column of a two-column form', () => {
    expect(read('Rechnungsnummer\tRechnungsdatum\n471102\t05.03.2018').invoice_number).toBe('471102');
  });

  it('takes no phone or account number for an amount, and no registration number for a tax', () => {
    const analysis = read([
      'Service tax #: AAACW8725FSD001\tPhone: 8756390642',
      'Grand Total\t319.00',
      'Rs -40.00 discount',
    ]);
    expect(analysis).toMatchObject({
      total_amount: 319,
      tax_amount: null,
      net_amount: null,
      currency: 'INR',
    });
  });

  it('takes no label without its value, and no legal form alone, for a name', () => {
    const analysis = read([
      'Verkäufer:',
      'Globale Nummer:',
      '4000001123452 (GTIN)',
      'GmbH',
      'Lieferant GmbH',
      'Lieferantenstraße 20',
    ]);
    expect(analysis.supplier_name).toBe('Lieferant GmbH');
  });

  it('takes no heading or remark for a seller', () => {
    expect(read('Retail Invoices/Bill\n\nTotal\t12,00 €').supplier_name).toBeNull();
    expect(
      read('Service Provider:\n(Not to be used for payment remittance)\nAmazon Web Services, Inc.')
        .supplier_name,
    ).toBe('Amazon Web Services, Inc.');
  });
});
