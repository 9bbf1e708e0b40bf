import { findDate, numericDateOrder } from '../src/adapters/analyzers/offline/dates';
import { extractInvoice } from '../src/adapters/analyzers/offline/invoice';

/**
 * The offline analyzer on layouts the French Factur-X examples use (written here as text, so the
 * rules are shown apart from any one PDF): a letterhead that runs the name into the address, a
 * title followed by the number, US dates, a "Total taxes" line among the per-rate VAT lines.
 */

/** The analysis of `text`, one line a line. */
const read = (text: string) => extractInvoice(text.split('\n'));

describe('the offline analyzer on letterhead layouts', () => {
  it('takes the name before the address on a one-line letterhead', () => {
    const analysis = read(
      'Atelier Ravel SAS - 12 rue des Lilas - 69001 Lyon\nFacture F-1\nTotal TTC\t12,00 €',
    );
    expect(analysis.supplier_name).toBe('Atelier Ravel SAS');
  });

  it('keeps a name whose dash is part of it (no address follows)', () => {
    const analysis = read('Saint-Gobain - Division Vitrage\nFacture F-1\nTotal TTC\t12,00 €');
    expect(analysis.supplier_name).toBe('Saint-Gobain - Division Vitrage');
  });

  it('reads the number printed right after the title, and not a phrase after it', () => {
    expect(read('Acme\n\nFacture FA-2017-0010\nTotal TTC\t12,00 €').invoice_number).toBe('FA-2017-0010');
    expect(read('Acme\n\nAvoir AV-2017-0005\nTotal TTC\t-12,00 €').invoice_number).toBe('AV-2017-0005');
    expect(read('Acme\n\nFacture à régler par virement\nTotal TTC\t12,00 €').invoice_number).toBeNull();
  });

  it('does not take "Facture à régler …" or "Customer VAT Number" for the customer', () => {
    const text =
      'Acme\nFacture F-1\nCustomer VAT Number\tESA12345674\nFacture à régler par virement\nTotal TTC\t12,00 €';
    expect(read(text).customer_name).toBeNull();
    expect(read('Acme\nFacturé à : Ma jolie boutique\nTotal TTC\t12,00 €').customer_name).toBe(
      'Ma jolie boutique',
    );
  });

  it('takes "Total taxes" or "Tax Total" as the VAT, not the sum of it and the per-rate lines', () => {
    const fr =
      'Acme\nFacture F-1\nTotal HT\t624,90 €\nTVA 20,0%\t81,90 €\t16,38 €\nTotal taxes\t46,25 €\nTVA 5,5%\t543,00 €\t29,87 €\nTotal TTC\t671,15 €';
    expect(read(fr)).toMatchObject({
      net_amount: 624.9,
      tax_amount: 46.25,
      total_amount: 671.15,
    });
    const en =
      'Acme\nInvoice F-1\nNet total\t100.00 €\n(sale)\tTax Total\t0.00 €\nTotal\t100.00 €\nFrench VAT exemption, articles 262 and 283-2';
    expect(read(en)).toMatchObject({ tax_amount: 0, total_amount: 100 });
  });
});

describe('numeric dates in the document’s own order', () => {
  it('reads month first when one date can only be month first, and none only day first', () => {
    expect(numericDateOrder('Invoice Date 11/03/2017 … paid 11/17/2017')).toBe('month-first');
    expect(findDate('Invoice Date 11/03/2017', 'month-first')).toBe('2017-11-03');
  });

  it('stays day first when the dates say so, disagree, or cannot tell', () => {
    expect(numericDateOrder('Date 11/03/2017, échéance 17/11/2017')).toBe('day-first');
    expect(numericDateOrder('11/17/2017 and 17/11/2017')).toBe('day-first');
    expect(numericDateOrder('Date 05/11/2017')).toBe('day-first');
    expect(findDate('Date 05/11/2017')).toBe('2017-11-05');
  });

  it('reads a whole English invoice with US dates', () => {
    const text =
      'Acme Ltd\nInvoice F-1\nInvoice Date\t11/03/2017\nDue Date\t12/03/2017\nPaid on 11/17/2017\nTotal\t10.00 €';
    expect(read(text)).toMatchObject({ issue_date: '2017-11-03', due_date: '2017-12-03' });
  });
});
