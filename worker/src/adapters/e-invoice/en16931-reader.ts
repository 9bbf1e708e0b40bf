import { type AnalysisResult, parseAnalysis } from '../../contract/analysis';
import { type FallbackReason, RejectionError } from '../../core/errors';
import type {
  AnalyzerInput,
  EInvoiceReader,
  EInvoiceReading,
  EInvoiceValidationRecord,
} from '../../core/ports';
import { type ParsedPdf, PdfJsParser, UnreadablePdf } from '../pdf/pdfjs-parser';
import { mayCarryAttachment } from './factur-x';
import { IncompleteInvoice, readInvoice, syntaxOf } from './invoice';
import type { Syntax } from './mapping';
import type { EInvoiceValidator } from './validation/validation';
import { parseXml, XML_LIMITS, type XmlElement, XmlRefusal } from './xml';

/** The `model` of rows read from a structure: where the data came from. */
export const E_INVOICE_MODELS = Object.freeze({
  facturX: 'e-invoice:factur-x',
  cii: 'e-invoice:cii',
  ubl: 'e-invoice:ubl',
} as const);

/** The XML content types an e-invoice is uploaded with. */
export const XML_CONTENT_TYPES: readonly string[] = ['application/xml', 'text/xml'];

const NO_TOKENS = Object.freeze({ promptTokens: 0, outputTokens: 0, totalTokens: 0 });

/** What went wrong with a structure, and the row reason when the document falls back. */
class Unusable extends Error {
  constructor(
    readonly reason: FallbackReason,
    message: string,
    /** The XML, when it parsed and its root is an invoice's: it can still be validated. */
    readonly parsed?: ParsedInvoice,
  ) {
    super(message);
  }
}

/** An invoice XML docline parsed: what validation needs. */
interface ParsedInvoice {
  bytes: Uint8Array;
  root: XmlElement;
  syntax: Syntax;
}

/**
 * The EN 16931 reader: Factur-X/ZUGFeRD/XRechnung PDFs (their embedded CII or UBL XML), and CII or
 * UBL XML uploads. A PDF whose XML cannot be used falls back to the analyzer (its picture is still
 * an invoice); an XML upload that is no EN 16931 invoice has nothing else to read and is rejected.
 */
export class En16931Reader implements EInvoiceReader {
  private readonly pdf: PdfJsParser;

  /**
   * `pdf`: the parser shared with the offline analyzer, so a PDF whose XML is unusable is not parsed
   * again to be analysed; by default one of its own that reads attachments only.
   */
  constructor(
    pdf?: PdfJsParser,
    /** Validates each invoice XML on receipt (and compares a hybrid PDF's picture); absent, none is. */
    private readonly validator?: EInvoiceValidator,
  ) {
    this.pdf = pdf ?? new PdfJsParser({ readContent: false, limits: { maxXmlBytes: XML_LIMITS.maxBytes } });
  }

  accepts(mime: string): boolean {
    return mime === 'application/pdf' || XML_CONTENT_TYPES.includes(mime);
  }

  async read({ bytes, contentType, name }: AnalyzerInput): Promise<EInvoiceReading> {
    if (contentType === 'application/pdf') return this.readPdf(bytes, name);
    try {
      const read = this.readXml(bytes);
      return { kind: 'read', result: read.result, ...(await this.validated(read.parsed, false)) };
    } catch (error) {
      if (!(error instanceof Unusable)) throw error;
      throw new RejectionError('not_an_e_invoice', `${name}: ${error.message}`);
    }
  }

  private async readPdf(bytes: Buffer, name: string): Promise<EInvoiceReading> {
    // Most PDFs name no embedded file in their bytes: they are not parsed here at all.
    if (!mayCarryAttachment(bytes)) return { kind: 'none' };
    let parsed: ParsedPdf;
    try {
      parsed = await this.pdf.parse(bytes, { attachment: true });
    } catch (error) {
      // Bytes pdf.js cannot parse carry no attachment we could see: the analyzer says what it can.
      if (error instanceof UnreadablePdf) return { kind: 'none' };
      throw error;
    }
    const attachment = parsed.attachment;
    // Whatever is not read here is analysed: the analyzer takes this parse rather than make its own.
    const analysed = (reading: EInvoiceReading): EInvoiceReading => {
      this.pdf.keep(bytes, parsed);
      return reading;
    };
    if (!attachment) return analysed({ kind: 'none' });
    if ('unreadable' in attachment) {
      return analysed({
        kind: 'fallback',
        reason: 'e_invoice_unreadable',
        detail: `${name}: ${attachment.filename}: ${attachment.unreadable}`,
      });
    }
    let read: { result: AnalysisResult; parsed: ParsedInvoice };
    try {
      read = this.readXml(attachment.bytes, E_INVOICE_MODELS.facturX);
    } catch (error) {
      if (error instanceof Unusable) {
        const validation = error.parsed ? await this.validated(error.parsed, true) : {};
        return analysed({
          kind: 'fallback',
          reason: error.reason,
          detail: `${name}: ${error.message}`,
          ...validation,
        });
      }
      throw error;
    }
    const checked = await this.validated(read.parsed, true);
    // The picture too (the offline analyzer, free): an altered PDF shows another total, number or seller.
    if (checked.validation && this.validator) {
      this.pdf.keep(bytes, parsed);
      const picture = await this.validator.comparePicture({ bytes, name }, read.result.analysis);
      if (picture) checked.validation = { ...checked.validation, picture };
    }
    return { kind: 'read', result: read.result, ...checked };
  }

  /** The validation verdict of a parsed invoice XML, as the row records it; none without a validator. */
  private async validated(
    parsed: ParsedInvoice,
    facturX: boolean,
  ): Promise<{ validation?: EInvoiceValidationRecord }> {
    if (!this.validator) return {};
    const verdict = await this.validator.validate(parsed.bytes, parsed.root, parsed.syntax, facturX);
    return { validation: verdict as unknown as EInvoiceValidationRecord };
  }

  /** The analysis an invoice XML states, and the parse; throws {@link Unusable}. */
  private readXml(bytes: Uint8Array, model?: string): { result: AnalysisResult; parsed: ParsedInvoice } {
    let parsed: ParsedInvoice | undefined;
    let analysis: unknown;
    try {
      const root = parseXml(bytes);
      const syntax = syntaxOf(root);
      if (!syntax) {
        throw new Unusable(
          'e_invoice_unreadable',
          `the XML's root is {${root.uri}}${root.local}, not a CII CrossIndustryInvoice or a UBL Invoice/CreditNote`,
        );
      }
      parsed = { bytes, root, syntax };
      analysis = readInvoice(root, syntax);
    } catch (error) {
      if (error instanceof XmlRefusal) throw new Unusable('e_invoice_unreadable', error.message);
      if (error instanceof IncompleteInvoice)
        throw new Unusable('e_invoice_incomplete', error.message, parsed);
      throw error;
    }
    const checked = parseAnalysis(analysis);
    if (!checked.ok)
      throw new Unusable(
        'e_invoice_incomplete',
        `the invoice does not fit the analysis: ${checked.problems}`,
        parsed,
      );
    return {
      result: {
        analysis: checked.analysis,
        model: model ?? E_INVOICE_MODELS[parsed.syntax],
        usage: { ...NO_TOKENS },
      },
      parsed,
    };
  }
}
