import { PdfWriter } from '../../samples/pdf-writer';
import { pageCount, photographed, scanOf } from '../scans';

/** A PDF of `pages` small pages (two inches by one: quick to render), each with one line of text. */
function invoice(pages: number): Buffer {
  const pdf = new PdfWriter();
  for (let page = 1; page <= pages; page++) {
    pdf.addPage(144, 72).drawText(`Seite ${page}`, { x: 10, y: 30, size: 14 });
  }
  return pdf.save();
}

describe('scans and photos of the eval', () => {
  it('photographs a one-page invoice as one JPEG', async () => {
    const photo = await photographed(invoice(1));
    expect(photo.contentType).toBe('image/jpeg');
    expect([...photo.bytes.subarray(0, 3)]).toEqual([0xff, 0xd8, 0xff]);
  });

  it('photographs each page of a longer invoice, in one PDF: no page is left out', async () => {
    const photo = await photographed(invoice(2));
    expect(photo.contentType).toBe('application/pdf');
    expect(await pageCount(photo.bytes)).toBe(2);
    expect(photo.bytes.toString('latin1').match(/\/Filter \/DCTDecode/g)).toHaveLength(2);
  });

  it('scans every page, up to four, deterministically', async () => {
    const scan = await scanOf(invoice(5));
    expect(await pageCount(scan)).toBe(4);
    expect(scan.equals(await scanOf(invoice(5)))).toBe(true);
  });
});
