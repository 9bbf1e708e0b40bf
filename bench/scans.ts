/**
 * Scans and phone photos of a PDF invoice, made here so that OCR is measured on the same invoices
 * as the text layer (their expected values are the PDF's): pdf.js renders the pages on a canvas
 * (@napi-rs/canvas, a development dependency), then
 * - a "scan": every page (the first four) at 200 dpi, grey, a little noise, JPEGs inside an
 *   image-only PDF (no text layer), as an office scanner makes it;
 * - a "photo" of each page: 150 dpi, turned by 1.5°, lit unevenly on a grey desk, noisier, a JPEG,
 *   as a phone held over a desk makes it; a one-page invoice is that JPEG, a longer one a PDF of
 *   its pages' photos (see {@link photographed}).
 * Deterministic: the noise comes from a seeded generator, so the same PDF gives the same bytes.
 */
import { type Canvas, createCanvas, loadImage } from '@napi-rs/canvas';
import { getDocumentProxy, renderPageAsImage } from 'unpdf';
import { PdfWriter } from '../samples/pdf-writer';
import { seededRandom } from '../sim/random';

const POINTS_PER_INCH = 72;

async function renderPage(pdf: Uint8Array, dpi: number, pageNumber = 1): Promise<Canvas> {
  const png = await renderPageAsImage(new Uint8Array(pdf), pageNumber, {
    canvasImport: () => import('@napi-rs/canvas'),
    scale: dpi / POINTS_PER_INCH,
  });
  const image = await loadImage(Buffer.from(png));
  const canvas = createCanvas(image.width, image.height);
  const context = canvas.getContext('2d');
  context.fillStyle = '#ffffff';
  context.fillRect(0, 0, image.width, image.height);
  context.drawImage(image, 0, 0);
  return canvas;
}

/** Adds noise of `amplitude` grey levels, and turns the picture grey. */
function degrade(
  canvas: Canvas,
  amplitude: number,
  seed: number,
  light?: (x: number, y: number) => number,
): void {
  const context = canvas.getContext('2d');
  const pixels = context.getImageData(0, 0, canvas.width, canvas.height);
  const next = seededRandom(seed);
  const { data, width } = pixels;
  for (let i = 0; i < data.length; i += 4) {
    const p = i / 4;
    const grey = (data[i]! * 77 + data[i + 1]! * 150 + data[i + 2]! * 29) >> 8;
    const lit = light ? grey * light(p % width, Math.floor(p / width)) : grey;
    const value = Math.max(0, Math.min(255, lit + (next() - 0.5) * 2 * amplitude));
    data[i] = data[i + 1] = data[i + 2] = value;
  }
  context.putImageData(pixels, 0, 0);
}

/** The pages a scan holds, at most: the analyzer reads as many (PDF_LIMITS.maxScanPages). */
const MAX_SCANNED_PAGES = 4;

/** An image-only PDF holding a 200 dpi grey JPEG scan of each page of `pdf` (the first four). */
export async function scanOf(pdf: Uint8Array, seed = 1): Promise<Buffer> {
  const pages = await pageCount(pdf);
  const scan = new PdfWriter();
  for (let page = 1; page <= Math.min(pages, MAX_SCANNED_PAGES); page++) {
    const canvas = await renderPage(pdf, 200, page);
    degrade(canvas, 18, seed + page - 1);
    const image = scan.jpeg(canvas.toBuffer('image/jpeg', 80));
    const width = (canvas.width / 200) * POINTS_PER_INCH;
    const height = (canvas.height / 200) * POINTS_PER_INCH;
    scan.addPage(width, height).drawImage(image, { x: 0, y: 0, width, height });
  }
  return scan.save();
}

/** How many pages `pdf` has (pdf.js is handed a copy: it takes the buffer it is given). */
export async function pageCount(pdf: Uint8Array): Promise<number> {
  const doc = await getDocumentProxy(new Uint8Array(pdf), { verbosity: 0 });
  try {
    return doc.numPages;
  } finally {
    await doc.loadingTask.destroy();
  }
}

/** A JPEG "phone photo" of page `pageNumber` of `pdf`: 150 dpi, turned, unevenly lit, noisy. */
export async function photoOf(pdf: Uint8Array, seed = 1, pageNumber = 1): Promise<Buffer> {
  const page = await renderPage(pdf, PHOTO_DPI, pageNumber);
  const margin = Math.round(page.width * 0.06);
  const canvas = createCanvas(page.width + 2 * margin, page.height + 2 * margin);
  const context = canvas.getContext('2d');
  context.fillStyle = '#8a8177';
  context.fillRect(0, 0, canvas.width, canvas.height);
  context.translate(canvas.width / 2, canvas.height / 2);
  context.rotate((1.5 * Math.PI) / 180);
  context.drawImage(page, -page.width / 2, -page.height / 2);
  context.setTransform(1, 0, 0, 1, 0, 0);
  const { width, height } = canvas;
  // Light falls from the top left: the far corner is a fifth darker.
  degrade(canvas, 28, seed, (x, y) => 1 - 0.2 * ((x / width + y / height) / 2));
  return canvas.toBuffer('image/jpeg', 75);
}

const PHOTO_DPI = 150;

/**
 * How a phone delivers an invoice it photographed: one page, one JPEG; several pages, one photo of
 * each (the first four) in one PDF, as a phone's document-scanning mode, or sharing several photos
 * as one document, makes it. A photo of the first page alone would lose what the later pages hold
 * (the totals, often) and measure the photographer, not the reading.
 */
export async function photographed(
  pdf: Uint8Array,
  seed = 1,
): Promise<{ bytes: Buffer; contentType: 'image/jpeg' | 'application/pdf' }> {
  const pages = Math.min(await pageCount(pdf), MAX_SCANNED_PAGES);
  if (pages <= 1) return { bytes: await photoOf(pdf, seed), contentType: 'image/jpeg' };
  const photos = new PdfWriter();
  for (let page = 1; page <= pages; page++) {
    const jpeg = await photoOf(pdf, seed + page - 1, page);
    const image = photos.jpeg(jpeg);
    const width = (image.width / PHOTO_DPI) * POINTS_PER_INCH;
    const height = (image.height / PHOTO_DPI) * POINTS_PER_INCH;
    photos.addPage(width, height).drawImage(image, { x: 0, y: 0, width, height });
  }
  return { bytes: photos.save(), contentType: 'application/pdf' };
}
