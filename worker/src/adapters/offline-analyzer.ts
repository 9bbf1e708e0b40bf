import { type AnalysisResult, analysisVersion, parseAnalysis } from '../contract/analysis';
import { baseMimeType, decodeText } from '../core/document-checks';
import { RejectionError } from '../core/errors';
import type { Analyzer, AnalyzerInput } from '../core/ports';
import { extractInvoice } from './offline/invoice';
import { pdfLines } from './offline/pdf-text';
import { textLines } from './offline/text';

/** The model name stored in rows analysed offline. */
export const OFFLINE_MODEL = 'offline';

/**
 * The analyzer used locally and in tests, in place of Gemini: deterministic, no network, no cost.
 * It reads the fields of French and English invoices from plain text and from the text layer of
 * PDFs. Images and PDFs without a text layer (scans) get a valid, empty analysis (`other`, every
 * field null): there is no OCR here. A PDF that pdf.js cannot read is refused for good
 * (RejectionError `analysis_failed`); pdf.js failing to load is a ConfigurationError.
 */
export class OfflineAnalyzer implements Analyzer {
  /** Bump the parsers' revision when they would read the same invoice differently. */
  readonly version = analysisVersion(OFFLINE_MODEL, 'parsers-2');

  async analyze(input: AnalyzerInput): Promise<AnalysisResult> {
    const analysis = extractInvoice(await this.lines(input));
    const checked = parseAnalysis(analysis);
    if (!checked.ok) {
      // Only a bug in the parsers gets here; the document would fail the same way on every retry.
      throw new RejectionError('analysis_failed', `offline analysis is not valid: ${checked.problems}`);
    }
    return {
      analysis: checked.analysis,
      model: OFFLINE_MODEL,
      usage: { promptTokens: 0, outputTokens: 0, totalTokens: 0 },
    };
  }

  private async lines({ bytes, contentType, name }: AnalyzerInput): Promise<string[]> {
    const mime = baseMimeType(contentType);
    // UTF-8, or the legacy charset it declares or that is detected (accounting exports in Windows-1252).
    if (mime === 'text/plain') return textLines(decodeText(bytes, contentType)?.text ?? '');
    if (mime === 'application/pdf') return pdfLines(bytes, name);
    // Images: no OCR offline. Reading nothing gives the empty analysis, not a refusal.
    return [];
  }
}
