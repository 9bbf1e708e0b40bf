import { type AnalysisResult, type FieldReading, parseAnalysis } from '../../contract/analysis';
import { baseMimeType, decodeText } from '../../core/document-checks';
import { RejectionError } from '../../core/errors';
import type { Analyzer, AnalyzerInput } from '../../core/ports';
import { placedTextToLines } from '../pdf/pdf-text';
import { PdfJsParser, UnreadablePdf } from '../pdf/pdfjs-parser';
import { readInvoice } from './offline/invoice';
import type { Ocr } from './offline/ocr/tesseract-ocr';
import { textLines } from './offline/text';

/** The model name stored in rows analysed offline from a text (a text file, a PDF's text layer). */
export const OFFLINE_MODEL = 'offline';

/** Below this mean word confidence (0-100), an OCR read is marked low-confidence in its row's model. */
export const LOW_CONFIDENCE = 70;

/** The model of rows read by OCR: `offline+ocr:<path>`, with `:low-confidence` when the read is doubtful. */
export function ocrModel(ocrName: string, confidence: number): string {
  return `${OFFLINE_MODEL}+ocr:${ocrName}${confidence < LOW_CONFIDENCE ? ':low-confidence' : ''}`;
}

export interface OfflineAnalyzerOptions {
  /** The PDF parser, shared with the e-invoice reader so a PDF is parsed once per delivery. */
  pdf?: PdfJsParser;
  /** OCR for images and scanned PDFs; without it they get the empty analysis. */
  ocr?: Ocr;
}

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/webp']);

/**
 * The analyzer used locally and in tests, in place of Gemini: deterministic, no network, no cost.
 * It reads the fields of invoices from plain text (UTF-8 or a legacy Western charset), from the text
 * layer of PDFs, and, with OCR, from photos (PNG, JPEG, WebP) and PDFs that hold only scans. A PDF
 * that pdf.js cannot read, or an image OCR refuses (too large, undecodable, too slow), is refused for
 * good (RejectionError `analysis_failed`); pdf.js failing to load is a ConfigurationError. It runs
 * inside the admission line, as any analysis does: OCR is its paid work, in CPU.
 */
export class OfflineAnalyzer implements Analyzer {
  private readonly pdf: PdfJsParser;
  private readonly ocr: Ocr | undefined;

  constructor(options: OfflineAnalyzerOptions = {}) {
    this.pdf = options.pdf ?? new PdfJsParser();
    this.ocr = options.ocr;
  }

  async analyze(input: AnalyzerInput): Promise<AnalysisResult> {
    const { lines, model, ocrConfidence } = await this.read(input);
    const read = readInvoice(lines);
    const checked = parseAnalysis(read.analysis);
    if (!checked.ok) {
      // Only a bug in the parsers gets here; the document would fail the same way on every retry.
      throw new RejectionError('analysis_failed', `offline analysis is not valid: ${checked.problems}`);
    }
    // A PDF with scanned pages is read by OCR as a whole (its text pages' lines included).
    const source = ocrConfidence === undefined ? 'text_layer' : 'ocr';
    const readings = Object.fromEntries(
      Object.entries(read.how).map(([field, how]) => {
        const reading: FieldReading = { source, how };
        if (ocrConfidence !== undefined) reading.ocrConfidence = Math.round(ocrConfidence * 10) / 10;
        const agreement = read.agreed[field as keyof typeof read.agreed];
        if (agreement !== undefined) reading.agreement = agreement;
        return [field, reading];
      }),
    );
    return {
      analysis: checked.analysis,
      model,
      usage: { promptTokens: 0, outputTokens: 0, totalTokens: 0 },
      readings,
    };
  }

  /** Stops the OCR worker thread, if one was started. */
  async close(): Promise<void> {
    await this.ocr?.close();
  }

  private async read({ bytes, contentType, name }: AnalyzerInput): Promise<Read> {
    const mime = baseMimeType(contentType);
    if (mime === 'text/plain') {
      // UTF-8, or the legacy charset it declares or that is detected (accounting exports in Windows-1252).
      return { lines: textLines(decodeText(bytes, contentType)?.text ?? ''), model: OFFLINE_MODEL };
    }
    if (mime === 'application/pdf') return this.readPdf(bytes, name);
    if (mime && IMAGE_TYPES.has(mime) && this.ocr) {
      const page = await this.ocr.read(bytes);
      return {
        lines: placedTextToLines(page.words),
        model: ocrModel(this.ocr.name, page.confidence),
        ocrConfidence: page.confidence,
      };
    }
    // Without OCR, an image reads as nothing: the empty analysis, not a refusal.
    return { lines: [], model: OFFLINE_MODEL };
  }

  private async readPdf(bytes: Buffer, name: string): Promise<Read> {
    let parsed: Awaited<ReturnType<PdfJsParser['parse']>>;
    try {
      parsed = await this.pdf.parse(bytes);
    } catch (error) {
      if (error instanceof UnreadablePdf) {
        // pdf.js's own error is the cause: its name says what is wrong with the bytes.
        throw new RejectionError('analysis_failed', `${name}: ${error.message}`, { cause: error.cause });
      }
      throw error;
    }
    // A text layer is read as it is; OCR reads only the pages that have none (a scan).
    if (parsed.scans.length === 0 || !this.ocr) return { lines: parsed.lines, model: OFFLINE_MODEL };
    const lines = parsed.lines.filter((line) => line.trim() !== '');
    let confidence = 0;
    for (const scan of parsed.scans) {
      const page = await this.ocr.read(scan);
      if (lines.length > 0) lines.push('');
      lines.push(...placedTextToLines(page.words));
      confidence += page.confidence;
    }
    const mean = confidence / parsed.scans.length;
    return { lines, model: ocrModel(this.ocr.name, mean), ocrConfidence: mean };
  }
}

/** A document's lines, the model that read them, and for an OCR read its mean word confidence (0-100). */
interface Read {
  lines: string[];
  model: string;
  ocrConfidence?: number;
}
