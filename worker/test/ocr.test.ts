import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { PdfWriter } from '../../samples/pdf-writer';
import { declaredImageSize } from '../src/adapters/analyzers/offline/ocr/image-size';
import { OCR_LIMITS, TesseractOcr } from '../src/adapters/analyzers/offline/ocr/tesseract-ocr';
import { LOW_CONFIDENCE, OfflineAnalyzer, ocrModel } from '../src/adapters/analyzers/offline-analyzer';
import type { Analysis } from '../src/contract/analysis';
import { RejectionError } from '../src/core/errors';

/**
 * OCR offline: photos and scanned PDFs are read by Tesseract in a worker thread, from the trained
 * data the npm packages ship. The samples are a scan and a phone photo of two sample invoices
 * (samples/generate.ts, bench/scans.ts), expected to read as their text layer does.
 */

const SAMPLES = join(__dirname, '..', '..', 'samples');
const expected = JSON.parse(readFileSync(join(SAMPLES, 'expected.json'), 'utf8')) as Record<string, Analysis>;
const SCALARS = [
  'document_type',
  'language',
  'supplier_name',
  'supplier_vat_id',
  'customer_name',
  'invoice_number',
  'issue_date',
  'due_date',
  'currency',
  'net_amount',
  'tax_amount',
  'total_amount',
] as const;

const ocr = new TesseractOcr();
const analyzer = new OfflineAnalyzer({ ocr });
afterAll(() => analyzer.close());

/** A PNG of `width` x `height` white pixels, its pixels deflated: a few kilobytes for a huge canvas. */
function whitePng(width: number, height: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    return Buffer.concat([length, Buffer.from(type, 'latin1'), data, Buffer.alloc(4)]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 0; // grey
  const row = Buffer.concat([Buffer.from([0]), Buffer.alloc(width, 0xff)]);
  const rows = Math.min(height, 64); // enough to be a valid start; the header is what is checked
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(Buffer.concat(Array.from({ length: rows }, () => row)))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A JPEG's start: SOI, then a baseline frame header declaring `width` x `height`. */
function jpegDeclaring(width: number, height: number): Buffer {
  const frame = Buffer.from([0xff, 0xc0, 0x00, 0x0b, 0x08, 0, 0, 0, 0, 0x01, 0x01, 0x11, 0x00]);
  frame.writeUInt16BE(height, 5);
  frame.writeUInt16BE(width, 7);
  return Buffer.concat([Buffer.from([0xff, 0xd8]), frame, Buffer.from([0xff, 0xd9])]);
}

describe('OCR of scans and photos', () => {
  it.each([
    ['other/scan-invoice-design.pdf', 'application/pdf'],
    ['other/photo-facture-conseil.jpg', 'image/jpeg'],
  ])('reads the fields of samples/%s, and says OCR read them', async (file, contentType) => {
    const result = await analyzer.analyze({
      bytes: readFileSync(join(SAMPLES, file)),
      contentType,
      name: file,
    });
    expect(result.model).toBe(`offline+ocr:${ocr.name}`);
    const want = expected[file]!;
    const right = SCALARS.filter((field) => result.analysis[field] === want[field]);
    // Tesseract may misread a character on another CPU's code path; the totals and the number may not.
    expect(right.length).toBeGreaterThanOrEqual(SCALARS.length - 1);
    for (const field of ['invoice_number', 'total_amount', 'issue_date'] as const) {
      expect(result.analysis[field]).toEqual(want[field]);
    }
  });

  it('marks a read whose words Tesseract doubts as low-confidence in the model', () => {
    expect(ocrModel('tesseract:eng+fra', LOW_CONFIDENCE - 1)).toBe(
      'offline+ocr:tesseract:eng+fra:low-confidence',
    );
    expect(ocrModel('tesseract:eng+fra', LOW_CONFIDENCE)).toBe('offline+ocr:tesseract:eng+fra');
  });

  it('without OCR, reads a photo as nothing rather than refuse it', async () => {
    const plain = new OfflineAnalyzer();
    const bytes = readFileSync(join(SAMPLES, 'other/photo-facture-conseil.jpg'));
    const result = await plain.analyze({ bytes, contentType: 'image/jpeg', name: 'photo.jpg' });
    expect(result).toMatchObject({
      model: 'offline',
      analysis: { invoice_number: null, document_type: 'other' },
    });
  });
});

describe('hostile images', () => {
  const analyzeImage = (bytes: Buffer, contentType: string) =>
    analyzer.analyze({ bytes, contentType, name: 'hostile' });

  it('reads the size an image declares from its header', () => {
    expect(declaredImageSize(whitePng(300, 200))).toEqual({ width: 300, height: 200 });
    expect(declaredImageSize(jpegDeclaring(640, 480))).toEqual({ width: 640, height: 480 });
    expect(declaredImageSize(readFileSync(join(SAMPLES, 'other/photo-facture-conseil.jpg')))).toEqual({
      width: expect.any(Number),
      height: expect.any(Number),
    });
    expect(declaredImageSize(Buffer.from('not an image'))).toBeUndefined();
  });

  it.each([
    [
      'a decompression bomb (a 9,000 x 9,000 PNG in a few kilobytes)',
      () => whitePng(9_000, 9_000),
      'image/png',
    ],
    ['a huge canvas (a JPEG declaring 65,000 x 65,000)', () => jpegDeclaring(65_000, 65_000), 'image/jpeg'],
    ['a sliver too long a side (30,000 x 10)', () => whitePng(30_000, 10), 'image/png'],
  ])('refuses %s before decoding it', async (_, build, contentType) => {
    const bytes = build();
    expect(bytes.length).toBeLessThan(200_000);
    const reading = analyzeImage(bytes, contentType);
    await expect(reading).rejects.toBeInstanceOf(RejectionError);
    await expect(reading).rejects.toMatchObject({
      code: 'analysis_failed',
      message: expect.stringMatching(/over the OCR limit of 40000000 pixels/),
    });
  });

  it('refuses an image whose header gives no size, and one its decoder cannot read', async () => {
    await expect(analyzeImage(Buffer.from([0xff, 0xd8, 0xff, 0xd9]), 'image/jpeg')).rejects.toMatchObject({
      code: 'analysis_failed',
      message: expect.stringMatching(/no size/),
    });
    const broken = Buffer.concat([
      whitePng(50, 50).subarray(0, 33),
      Buffer.from('garbage where the pixels are'),
    ]);
    await expect(analyzeImage(broken, 'image/png')).rejects.toMatchObject({ code: 'analysis_failed' });
  });

  it('stops a page that runs past its time, with a defined refusal', async () => {
    const hasty = new TesseractOcr({ pageTimeoutMs: 1 });
    const photo = readFileSync(join(SAMPLES, 'other/photo-facture-conseil.jpg'));
    try {
      await expect(hasty.read(photo)).rejects.toMatchObject({
        code: 'analysis_failed',
        message: expect.stringMatching(/took over 1 ms and was stopped/),
      });
    } finally {
      await hasty.close();
    }
    expect(OCR_LIMITS.pageTimeoutMs).toBeGreaterThan(3_000);
  });
});

describe('a scanned PDF whose image is a decompression bomb', () => {
  /** An image-only PDF whose one image declares `side` x `side` grey pixels, deflated to kilobytes. */
  async function pdfWithImage(side: number): Promise<Buffer> {
    const pdf = new PdfWriter();
    const pixels = deflateSync(Buffer.alloc(side * side, 0xff), { level: 9 });
    const image = pdf.image(
      { Width: side, Height: side, ColorSpace: '/DeviceGray', BitsPerComponent: 8, Filter: '/FlateDecode' },
      pixels,
    );
    pdf.addPage(595, 842).drawImage(image, { x: 0, y: 0, width: 595, height: 842 });
    return pdf.save();
  }

  it('is never decoded: pdf.js skips an image over the pixel cap, and the page reads as nothing', async () => {
    const bomb = await pdfWithImage(9_000);
    expect(bomb.length).toBeLessThan(500_000);
    const result = await analyzer.analyze({ bytes: bomb, contentType: 'application/pdf', name: 'bomb.pdf' });
    expect(result).toMatchObject({
      model: 'offline',
      analysis: { document_type: 'other', invoice_number: null },
    });
  });
});
