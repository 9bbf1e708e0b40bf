import { deflateSync } from 'node:zlib';
import { createCanvas } from '@napi-rs/canvas';
import { extractText, getDocumentProxy, getResolvedPDFJS } from 'unpdf';
import { jpegSize, PdfWriter, textWidth, winAnsi } from '../../samples/pdf-writer';
import { PdfJsParser } from '../src/adapters/pdf/pdfjs-parser';

/**
 * samples/pdf-writer.ts writes the PDFs of the samples, the tests and the benchmark's scans: pdf.js
 * (what the worker reads PDFs with) must read back what it wrote — text, images, attachments.
 */

type Doc = Awaited<ReturnType<typeof getDocumentProxy>>;
const open = (bytes: Uint8Array) => getDocumentProxy(new Uint8Array(bytes), { verbosity: 0 });

/** The images page `n` paints, as pdf.js decodes them. */
async function imagesOf(doc: Doc, n: number) {
  const { OPS } = await getResolvedPDFJS();
  const page = await doc.getPage(n);
  const list = await page.getOperatorList();
  const images: Array<{ width: number; height: number; data: Uint8Array }> = [];
  for (let i = 0; i < list.fnArray.length; i++) {
    if (list.fnArray[i] !== OPS.paintImageXObject) continue;
    const id = list.argsArray[i]![0] as string;
    images.push(await new Promise((resolve) => page.objs.get(id, resolve)));
  }
  return images;
}

/** A JPEG of `width` x `height`: white, with a black square in its top left quarter. */
function jpeg(width: number, height: number): Buffer {
  const canvas = createCanvas(width, height);
  const context = canvas.getContext('2d');
  context.fillStyle = '#ffffff';
  context.fillRect(0, 0, width, height);
  context.fillStyle = '#000000';
  context.fillRect(0, 0, width / 2, height / 2);
  return canvas.toBuffer('image/jpeg', 90);
}

describe('samples/pdf-writer.ts, read back by pdf.js', () => {
  it('writes text in Helvetica and Helvetica-Bold that pdf.js extracts as written, accents and euro included', async () => {
    const pdf = new PdfWriter({ title: 'Facture F-1', producer: 'test' });
    const first = pdf.addPage(595, 842);
    first.drawText('Facture n° F-2026-0042 — Société Générale d’Études', { x: 50, y: 780, size: 11 });
    first.drawText('Total TTC : 1 234,56 €', { x: 50, y: 760, size: 11, font: 'Helvetica-Bold' });
    pdf.addPage(595, 842).drawText('Page deux: Œuvre, naïve, Ÿ', { x: 50, y: 780, size: 11 });
    const doc = await open(pdf.save());
    expect(doc.numPages).toBe(2);
    const { text } = await extractText(doc, { mergePages: false });
    expect(text[0]).toContain('Facture n° F-2026-0042 — Société Générale d’Études');
    expect(text[0]).toContain('Total TTC : 1 234,56 €');
    expect(text[1]).toContain('Page deux: Œuvre, naïve, Ÿ');
    const { info } = (await doc.getMetadata()) as unknown as { info: Record<string, unknown> };
    expect(info).toMatchObject({ Title: 'Facture F-1', Producer: 'test' });
  });

  it('places text where it is drawn, right-aligned by the font widths', async () => {
    const pdf = new PdfWriter();
    const page = pdf.addPage(595, 842);
    const value = '1 234,56 €';
    page.drawText(value, {
      x: 545 - textWidth(value, 'Helvetica-Bold', 10),
      y: 700,
      size: 10,
      font: 'Helvetica-Bold',
    });
    const doc = await open(pdf.save());
    const content = await (await doc.getPage(1)).getTextContent();
    const item = content.items.find((i) => 'str' in i && i.str === value) as {
      transform: number[];
      width: number;
    };
    expect(item.transform[4]).toBeCloseTo(545 - textWidth(value, 'Helvetica-Bold', 10), 2);
    // pdf.js measures with its own copy of the font's metrics: the right edge lands at 545.
    expect(item.transform[4]! + item.width).toBeCloseTo(545, 1);
    expect(item.transform[5]).toBe(700);
  });

  it('refuses a character WinAnsi cannot encode instead of writing another', () => {
    expect(() => winAnsi('1\u202f234')).toThrow(/U\+202F/);
    expect([...winAnsi('€é')]).toEqual([0x80, 0xe9]);
  });

  it('embeds a JPEG (DCTDecode) and grey pixels (FlateDecode) that pdf.js decodes to their pixels', async () => {
    const pdf = new PdfWriter();
    const photo = jpeg(64, 48);
    expect(jpegSize(photo)).toMatchObject({ width: 64, height: 48 });
    const greyPixels = Buffer.alloc(30 * 20, 200);
    greyPixels[0] = 0;
    const page = pdf.addPage(595, 842);
    page.drawImage(pdf.jpeg(photo), { x: 0, y: 400, width: 320, height: 240 });
    pdf
      .addPage(300, 200)
      .drawImage(pdf.greyPixels(30, 20, greyPixels), { x: 0, y: 0, width: 300, height: 200 });
    const doc = await open(pdf.save());
    const [first] = await imagesOf(doc, 1);
    expect(first).toMatchObject({ width: 64, height: 48 });
    // RGB, top left dark (the square), bottom right light.
    const at = (x: number, y: number) => first!.data[(y * 64 + x) * (first!.data.length / (64 * 48))]!;
    expect(at(5, 5)).toBeLessThan(40);
    expect(at(60, 44)).toBeGreaterThan(215);
    const [second] = await imagesOf(doc, 2);
    expect(second).toMatchObject({ width: 30, height: 20 });
    const step = second!.data.length / (30 * 20);
    expect(second!.data[0]).toBe(0);
    expect(second!.data[step * 599]).toBe(200);
  });

  it('embeds files as Factur-X does: pdf.js lists the attachment and gives its bytes, stored or deflated', async () => {
    const xml = '<?xml version="1.0"?><rsm:CrossIndustryInvoice/>';
    const pdf = new PdfWriter({ modified: new Date('2026-11-30T09:00:00Z') });
    pdf.addPage(595, 842).drawText('Facture', { x: 50, y: 780, size: 11 });
    pdf.attach({
      name: 'factur-x.xml',
      stored: deflateSync(xml),
      filter: 'FlateDecode',
      mimeType: 'text/xml',
    });
    pdf.attach({ name: 'notes.txt', stored: Buffer.from('plain'), relationship: 'Supplement' });
    const bytes = pdf.save();
    const doc = await open(bytes);
    // This pdf.js lists attachments by key and hands their content on request.
    const attachments = (await doc.getAttachments()) as Map<string, { filename: string }>;
    const byName: Record<string, string> = {};
    for (const [key, { filename }] of attachments) {
      const content = (await doc.getAttachmentContent(key)) as Uint8Array;
      byName[filename] = Buffer.from(content).toString('utf8');
    }
    expect(byName).toEqual({ 'factur-x.xml': xml, 'notes.txt': 'plain' });
    const text = bytes.toString('latin1');
    expect(text).toMatch(/\/AF \[ \d+ 0 R \d+ 0 R \]/);
    expect(text).toContain('/AFRelationship /Data');
    expect(text).toContain('/AFRelationship /Supplement');
    expect(text).toContain('/Subtype /text#2Fxml');
    // And the worker's own parser finds the Factur-X XML in it.
    const parsed = await new PdfJsParser().parse(bytes, { attachment: true });
    expect(parsed.attachment).toMatchObject({ filename: 'factur-x.xml' });
    expect((parsed.attachment as { bytes: Buffer }).bytes.toString('utf8')).toBe(xml);
  });

  it('writes a cross-reference table whose every offset points at its object', () => {
    const pdf = new PdfWriter({ title: 'x' });
    pdf.addPage(100, 100).drawText('a', { x: 1, y: 1, size: 1 });
    pdf.attach({ name: 'a.xml', stored: Buffer.from('<a/>') });
    const bytes = pdf.save();
    const text = bytes.toString('latin1');
    const startxref = Number(/startxref\n(\d+)\n%%EOF\n$/u.exec(text)![1]);
    expect(text.slice(startxref, startxref + 4)).toBe('xref');
    const [, first, count] = /^xref\n(\d+) (\d+)\n/u.exec(text.slice(startxref))!;
    expect(first).toBe('0');
    const entries = text
      .slice(startxref)
      .split('\n')
      .slice(2, 2 + Number(count));
    entries.slice(1).forEach((entry, i) => {
      expect(entry).toMatch(/^\d{10} 00000 n\r$/u);
      const offset = Number(entry.slice(0, 10));
      expect(text.slice(offset, offset + `${i + 1} 0 obj`.length)).toBe(`${i + 1} 0 obj`);
    });
    expect(new RegExp(`/Size ${count}`).test(text)).toBe(true);
  });

  it('writes the same bytes for the same calls', () => {
    const write = () => {
      const pdf = new PdfWriter({ created: new Date(0) });
      pdf.addPage(100, 100).drawText('same', { x: 1, y: 1, size: 9 });
      return pdf.save();
    };
    expect(write().equals(write())).toBe(true);
  });
});
