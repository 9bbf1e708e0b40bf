import { createHash } from 'node:crypto';
import { extractTextItems, getDocumentProxy, getResolvedPDFJS } from 'unpdf';
import { ConfigurationError } from '../../core/errors';
import { checkEmbeddedStreams, E_INVOICE_ATTACHMENTS, mayCarryAttachment } from '../e-invoice/factur-x';
import type { GreyImage } from './grey-image';
import {
  letterSpacingRepairs,
  type PlacedText,
  placedTextToLines,
  repairLetterSpacing,
  type TextRun,
} from './pdf-text';

/**
 * Every PDF docline reads goes through pdf.js (through unpdf), once per delivery: one load gives the
 * e-invoice attachment, the text layer and, for pages without text, the scanned image that OCR reads.
 * The e-invoice reader runs before the admission line and the analyzer inside it, each with bytes
 * read again; a parse the reader made is handed to the analyzer by the bytes' digest, so the same
 * PDF is not loaded twice.
 */

/** The e-invoice attachment of a PDF: its bytes, or why they cannot be used. */
export type PdfAttachment = { filename: string; bytes: Buffer } | { filename: string; unreadable: string };

/** What one load of a PDF gave. */
export interface ParsedPdf {
  /** The text layer of the first pages as lines (offline/pdf-text.ts), pages separated by ''. */
  lines: string[];
  /** The largest image of each of the first pages that hold no text: what OCR reads of a scan. */
  scans: GreyImage[];
  /** The e-invoice XML it carries, when asked for and present. */
  attachment?: PdfAttachment;
}

/** The bytes are no PDF pdf.js can read (damaged, truncated, encrypted): the same on every retry. */
export class UnreadablePdf extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'UnreadablePdf';
  }
}

/** Caps of one parse. */
export interface PdfLimits {
  /** An embedded XML that inflates past this is refused before pdf.js decodes it. */
  maxXmlBytes: number;
  /** Pages whose text is read; a longer PDF is read from its start. */
  maxTextPages: number;
  /** Pages without text whose image is kept for OCR. */
  maxScanPages: number;
  /** pdf.js decodes no image larger than this (width x height): a decompression bomb stays compressed. */
  maxImagePixels: number;
}

export const PDF_LIMITS: Readonly<PdfLimits> = Object.freeze({
  maxXmlBytes: 5 * 1024 * 1024,
  maxTextPages: 200,
  maxScanPages: 4,
  maxImagePixels: 40_000_000,
});

export interface PdfJsParserOptions {
  limits?: Partial<PdfLimits>;
  /** Read the text layer and scans too (the offline analyzer needs them); false: attachments only. */
  readContent?: boolean;
  /** Parses handed from the e-invoice reader to the analyzer, at most this many at once. */
  keptParses?: number;
}

// What pdf.js throws when the bytes themselves are at fault. (A damaged content stream surfaces as
// UnknownErrorException.)
const UNREADABLE_PDF = new Set([
  'InvalidPDFException',
  'PasswordException',
  'FormatError',
  'UnknownErrorException',
  'MissingPDFException',
]);

// What a handed-over parse may hold in scans (grey pixels), at most.
const MAX_KEPT_SCAN_BYTES = 8 * 1024 * 1024;

// A page with fewer text pieces than this is a scan (a stamp or a page number on an image).
const MIN_TEXT_PIECES = 3;

/** pdf.js, loaded once; its absence is our fault, not the document's: no document is refused for it. */
async function pdfJs(): Promise<Awaited<ReturnType<typeof getResolvedPDFJS>>> {
  try {
    return await getResolvedPDFJS();
  } catch (error) {
    throw new ConfigurationError('pdf_reader_unavailable', 'pdf.js (through unpdf) cannot be loaded', {
      cause: error,
    });
  }
}

/** Reads PDFs with pdf.js, each delivery's PDF once. One instance is shared by the reader and the analyzer. */
export class PdfJsParser {
  readonly limits: PdfLimits;
  private readonly readContent: boolean;
  private readonly keptParses: number;
  private readonly kept = new Map<string, ParsedPdf>();
  /** Documents pdf.js loaded: the count a test reads to see each PDF parsed once. */
  loads = 0;

  constructor(options: PdfJsParserOptions = {}) {
    this.limits = { ...PDF_LIMITS, ...options.limits };
    this.readContent = options.readContent ?? true;
    this.keptParses = options.keptParses ?? 4;
  }

  /**
   * Parses `bytes` (or takes the parse {@link keep} handed over for the same bytes). With
   * `attachment`, looks for the e-invoice XML too. Throws {@link UnreadablePdf}, or
   * ConfigurationError when pdf.js cannot be loaded.
   */
  async parse(bytes: Uint8Array, options: { attachment?: boolean } = {}): Promise<ParsedPdf> {
    const digest = this.kept.size > 0 ? digestOf(bytes) : undefined;
    const handed = digest ? this.kept.get(digest) : undefined;
    if (handed && (!options.attachment || handed.attachment !== undefined)) {
      this.kept.delete(digest!);
      return handed;
    }
    const pdfjs = await pdfJs();
    this.loads++;
    let pdf: Awaited<ReturnType<typeof getDocumentProxy>>;
    try {
      // pdf.js takes ownership of (detaches) the buffer it is given: hand it a copy.
      pdf = await getDocumentProxy(new Uint8Array(bytes), {
        verbosity: 0,
        maxImageSize: this.limits.maxImagePixels,
      });
    } catch (error) {
      throw asUnreadable(error);
    }
    try {
      const attachment = options.attachment ? await this.attachmentOf(pdf, bytes) : undefined;
      const content = this.readContent ? await this.contentOf(pdf, pdfjs.OPS) : { lines: [], scans: [] };
      return { ...content, ...(attachment ? { attachment } : {}) };
    } catch (error) {
      throw asUnreadable(error);
    } finally {
      await pdf.loadingTask.destroy();
    }
  }

  /**
   * Hands a parse over to the next {@link parse} of the same bytes (the analyzer's, once the reader
   * found no usable XML). Only parses that read the content are kept, and only the last few: a
   * delivery that never reaches the analyzer leaves one entry that the next ones push out.
   */
  keep(bytes: Uint8Array, parsed: ParsedPdf): void {
    if (!this.readContent) return;
    // A delivery waiting its turn holds no document in memory: a parse heavy with scans is not kept
    // (the analyzer parses again: a rare hybrid PDF of scanned pages costs a second load).
    if (parsed.scans.reduce((sum, scan) => sum + scan.grey.length, 0) > MAX_KEPT_SCAN_BYTES) return;
    const digest = digestOf(bytes);
    this.kept.delete(digest);
    this.kept.set(digest, parsed);
    while (this.kept.size > this.keptParses) this.kept.delete(this.kept.keys().next().value!);
  }

  private async attachmentOf(
    pdf: Awaited<ReturnType<typeof getDocumentProxy>>,
    bytes: Uint8Array,
  ): Promise<PdfAttachment | undefined> {
    // Most PDFs name no embedded file in their bytes: nothing to ask pdf.js.
    if (!mayCarryAttachment(bytes)) return undefined;
    const attachments = (await pdf.getAttachments()) as Map<string, { filename: string }> | null;
    let found: { key: string; filename: string } | undefined;
    for (const [key, value] of attachments ?? []) {
      for (const name of [value.filename, key]) {
        if (!found && E_INVOICE_ATTACHMENTS.includes(name.toLowerCase())) found = { key, filename: name };
      }
    }
    if (!found) return undefined;
    // pdf.js decodes a stream whole: the raw streams are inflated first under the cap, so a
    // compressed bomb is refused before pdf.js would fill memory with it.
    const problem = checkEmbeddedStreams(bytes, this.limits.maxXmlBytes);
    if (problem) return { filename: found.filename, unreadable: problem };
    const content = (await pdf.getAttachmentContent(found.key)) as Uint8Array | null;
    if (!content)
      return { filename: found.filename, unreadable: 'the file specification has no embedded stream' };
    if (content.length > this.limits.maxXmlBytes) {
      return { filename: found.filename, unreadable: `over the XML cap of ${this.limits.maxXmlBytes} bytes` };
    }
    return { filename: found.filename, bytes: Buffer.from(content) };
  }

  private async contentOf(
    pdf: Awaited<ReturnType<typeof getDocumentProxy>>,
    ops: Record<string, number>,
  ): Promise<Pick<ParsedPdf, 'lines' | 'scans'>> {
    const lines: string[] = [];
    const scans: GreyImage[] = [];
    const { items } = await extractTextItems(pdf);
    const pages = Math.min(pdf.numPages, this.limits.maxTextPages);
    for (let index = 0; index < pages; index++) {
      const pieces = (items[index] ?? []) as PlacedText[];
      if (index > 0) lines.push('');
      if (pieces.filter((p) => p.str.trim() !== '').length >= MIN_TEXT_PIECES) {
        const repairs = letterSpacingRepairs(await textRuns(pdf, index + 1, ops));
        lines.push(...placedTextToLines(repairLetterSpacing(pieces, repairs)));
        continue;
      }
      lines.push(...placedTextToLines(pieces));
      if (scans.length >= this.limits.maxScanPages) continue;
      const image = await largestImage(pdf, index + 1, ops);
      if (image) scans.push(image);
    }
    return { lines, scans };
  }
}

function asUnreadable(error: unknown): unknown {
  if (error instanceof Error && UNREADABLE_PDF.has(error.name)) {
    return new UnreadablePdf(`the PDF cannot be read (${error.message})`, { cause: error });
  }
  return error;
}

function digestOf(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('base64');
}

/**
 * The show-text operations of a page, each as its glyphs' text and TJ offsets: what pdf.js's text
 * layer was built from, to see which of its spaces are letter spacing (pdf-text.ts).
 */
async function textRuns(
  pdf: Awaited<ReturnType<typeof getDocumentProxy>>,
  pageNumber: number,
  ops: Record<string, number>,
): Promise<TextRun[]> {
  const page = await pdf.getPage(pageNumber);
  const list = await page.getOperatorList();
  const runs: TextRun[] = [];
  for (let i = 0; i < list.fnArray.length; i++) {
    const fn = list.fnArray[i];
    if (fn !== ops.showText && fn !== ops.showSpacedText) continue;
    const glyphs = (list.argsArray[i]?.[0] ?? []) as Array<number | { unicode?: string } | null>;
    runs.push(glyphs.map((glyph) => (typeof glyph === 'number' ? glyph : (glyph?.unicode ?? ''))));
  }
  page.cleanup();
  return runs;
}

interface PdfJsImage {
  width: number;
  height: number;
  kind?: number;
  data?: Uint8Array | Uint8ClampedArray;
}

/**
 * The largest image a page paints, as 8-bit grey: the scan of a scanned page. pdf.js hands decoded
 * images without a canvas (operator list, then `page.objs`); images over the pixel cap are never
 * decoded, and none is drawn or scaled here: OCR reads the scan at the resolution it was made.
 */
async function largestImage(
  pdf: Awaited<ReturnType<typeof getDocumentProxy>>,
  pageNumber: number,
  ops: Record<string, number>,
): Promise<GreyImage | undefined> {
  const page = await pdf.getPage(pageNumber);
  const list = await page.getOperatorList();
  let best: PdfJsImage | undefined;
  for (let i = 0; i < list.fnArray.length; i++) {
    const fn = list.fnArray[i];
    if (fn !== ops.paintImageXObject && fn !== ops.paintInlineImageXObject) continue;
    const arg = list.argsArray[i]?.[0] as string | PdfJsImage | undefined;
    const image =
      typeof arg === 'string'
        ? await new Promise<PdfJsImage | undefined>((resolve) =>
            (arg.startsWith('g_') ? page.commonObjs : page.objs).get(arg, resolve),
          )
        : arg;
    if (image?.data && image.width > 0 && image.height > 0) {
      if (!best || image.width * image.height > best.width * best.height) best = image;
    }
  }
  page.cleanup();
  return best ? toGrey(best) : undefined;
}

/** pdf.js's image kinds: 1 bit per pixel (rows padded to a byte), RGB, RGBA. */
function toGrey({ width, height, data }: PdfJsImage): GreyImage | undefined {
  if (!data) return undefined;
  const pixels = width * height;
  const grey = new Uint8Array(pixels);
  if (data.length === pixels * 3 || data.length === pixels * 4) {
    const step = data.length / pixels;
    for (let p = 0, q = 0; p < pixels; p++, q += step) {
      grey[p] = (data[q]! * 77 + data[q + 1]! * 150 + data[q + 2]! * 29) >> 8;
    }
    return { width, height, grey };
  }
  if (data.length === pixels) return { width, height, grey: Uint8Array.from(data) };
  const rowBytes = (width + 7) >> 3;
  if (data.length === rowBytes * height) {
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        grey[y * width + x] = (data[y * rowBytes + (x >> 3)]! >> (7 - (x & 7))) & 1 ? 255 : 0;
      }
    }
    return { width, height, grey };
  }
  return undefined;
}
