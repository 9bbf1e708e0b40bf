import { PdfWriter } from '../../samples/pdf-writer';
import { letterSpacingRepairs } from '../src/adapters/pdf/pdf-text';
import { PdfJsParser } from '../src/adapters/pdf/pdfjs-parser';

/**
 * pdf.js reads any gap of 0.102 em between two glyphs of a run as a space. Some producers (the AWV
 * stylesheet of the ZUGFeRD examples) draw bold text with a regular font placed by the bold font's
 * widths: each letter is followed by a gap, 0.11 em after an `r`, and pdf.js wrote `Liefer ant GmbH`.
 */
describe('letter-spaced text', () => {
  // TJ offsets in thousandths of an em, as that stylesheet writes `Lieferant GmbH`.
  const lieferant = ['L', -55, 'i', 'e', 'f', 'e', 'r', -110, 'a', -56, 'n', -56, 't'];

  it('joins the letters a letter-spaced run keeps apart by less than a word space', () => {
    expect(letterSpacingRepairs([lieferant])).toEqual([['Liefer ant', 'Lieferant']]);
  });

  it('keeps a word space of a letter-spaced run', () => {
    const run = [...lieferant, -300, 'G', -56, 'm', -56, 'b', -56, 'H'];
    expect(letterSpacingRepairs([run])).toEqual([['Liefer ant GmbH', 'Lieferant GmbH']]);
  });

  it('leaves a run without letter spacing as pdf.js reads it (kerning, and spaces made by offsets)', () => {
    const tight = ['W', 80, 'a', 'r', -150, 'e', 'n'];
    const typeset = ['d', 'e', 'r', -333, 'V', 'e', 'r', 'k', 'a', 'u', 'f'];
    expect(letterSpacingRepairs([tight, typeset])).toEqual([]);
  });

  it('reads the text layer of such a PDF without the spaces pdf.js would put in its words', async () => {
    const writer = new PdfWriter();
    const page = writer.addPage(595, 842);
    page.drawText('Rechnung Nr. 471102', { x: 50, y: 780, size: 12 });
    page.drawText('Verkaeufer', { x: 50, y: 700, size: 10 });
    page.fonts.add('Helvetica');
    const tj = lieferant.map((entry) => (typeof entry === 'number' ? entry : `(${entry})`)).join(' ');
    page.ops.push('BT', '/F1 10 Tf', '1 0 0 1 50 685 Tm', `[${tj}] TJ`, 'ET');
    const parsed = await new PdfJsParser().parse(writer.save());
    expect(parsed.lines).toContain('Lieferant');
  });
});
