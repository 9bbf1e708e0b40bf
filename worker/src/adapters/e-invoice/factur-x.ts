import { inflateSync } from 'node:zlib';
import {
  PDFArray,
  PDFDict,
  PDFDocument,
  PDFHexString,
  PDFName,
  type PDFObject,
  PDFRawStream,
  PDFString,
} from 'pdf-lib';

/**
 * The invoice XML a Factur-X / ZUGFeRD / XRechnung PDF carries as an embedded file. The PDF is
 * parsed with pdf-lib (object structure only: no page is rendered), and the attachment's stream is
 * inflated by zlib with an output cap, so a compressed bomb stops at the XML cap instead of filling
 * memory.
 */

/** The names a hybrid invoice gives its XML (Factur-X; ZUGFeRD 1 and 2; XRechnung), compared lower-cased. */
export const E_INVOICE_ATTACHMENTS: readonly string[] = [
  'factur-x.xml',
  'zugferd-invoice.xml',
  'xrechnung.xml',
];

/** The PDF has the attachment, but it cannot be taken out (damaged, encrypted, an unknown filter, too big). */
export class UnreadableAttachment extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'UnreadableAttachment';
  }
}

/** Name trees nest through /Kids; a deeper one is not a real PDF's. */
const MAX_NAME_TREE_DEPTH = 8;

/**
 * The embedded invoice XML of a PDF: its file name and bytes, or undefined when the PDF carries
 * none (it is an ordinary PDF). Throws {@link UnreadableAttachment} when it carries one that cannot
 * be read; a PDF that pdf-lib cannot parse at all carries none that we could see (undefined), and
 * is left to the analyzer as before.
 */
export async function embeddedInvoiceXml(
  pdf: Uint8Array,
  maxXmlBytes: number,
): Promise<{ filename: string; bytes: Buffer } | undefined> {
  if (!mayCarryAttachment(pdf)) return undefined;
  let document: PDFDocument;
  try {
    document = await PDFDocument.load(pdf, {
      ignoreEncryption: true,
      updateMetadata: false,
      throwOnInvalidObject: false,
    });
  } catch {
    return undefined;
  }
  let found: { filename: string; spec: PDFDict } | undefined;
  try {
    found = invoiceFileSpec(document.catalog);
  } catch {
    // A catalog too damaged to walk shows no attachment; the analyzer reads what it can.
    return undefined;
  }
  if (!found) return undefined;
  if (document.isEncrypted) throw new UnreadableAttachment(`${found.filename}: the PDF is encrypted`);
  const stream = found.spec.lookupMaybe(PDFName.of('EF'), PDFDict)?.lookup(PDFName.of('F'));
  if (!(stream instanceof PDFRawStream)) {
    throw new UnreadableAttachment(`${found.filename}: the file specification has no embedded stream`);
  }
  return { filename: found.filename, bytes: decodeStream(stream, found.filename, maxXmlBytes) };
}

const MARKERS = ['EmbeddedFile', ...E_INVOICE_ATTACHMENTS, 'ZUGFeRD-invoice.xml', 'Factur-X.xml'].map((m) =>
  Buffer.from(m, 'latin1'),
);

/**
 * Whether a PDF may carry an attachment, from its raw bytes: parsing a long PDF's objects takes
 * seconds of CPU (1,500 pages: about 1.4 s), and most PDFs carry nothing. An embedded file's stream
 * dictionary is never compressed (streams cannot sit in object streams) and producers type it
 * `/EmbeddedFile`; its file name, when stored uncompressed, is the other marker. A PDF with neither
 * is an ordinary PDF.
 */
export function mayCarryAttachment(pdf: Uint8Array): boolean {
  const bytes = Buffer.from(pdf.buffer, pdf.byteOffset, pdf.byteLength);
  return MARKERS.some((marker) => bytes.includes(marker));
}

/** The file specification of the invoice XML: from the EmbeddedFiles name tree, else the /AF array. */
function invoiceFileSpec(catalog: PDFDict): { filename: string; spec: PDFDict } | undefined {
  const specs: PDFDict[] = [];
  const tree = catalog
    .lookupMaybe(PDFName.of('Names'), PDFDict)
    ?.lookupMaybe(PDFName.of('EmbeddedFiles'), PDFDict);
  if (tree) collectNameTree(tree, specs, 0);
  const associated = catalog.lookupMaybe(PDFName.of('AF'), PDFArray);
  for (let i = 0; associated && i < associated.size(); i++) {
    const spec = associated.lookup(i);
    if (spec instanceof PDFDict) specs.push(spec);
  }
  for (const spec of specs) {
    const filename = fileName(spec);
    if (filename && E_INVOICE_ATTACHMENTS.includes(filename.toLowerCase())) return { filename, spec };
  }
  return undefined;
}

function collectNameTree(node: PDFDict, into: PDFDict[], depth: number): void {
  if (depth > MAX_NAME_TREE_DEPTH) return;
  const names = node.lookupMaybe(PDFName.of('Names'), PDFArray);
  for (let i = 1; names && i < names.size(); i += 2) {
    const spec = names.lookup(i);
    if (spec instanceof PDFDict) into.push(spec);
  }
  const kids = node.lookupMaybe(PDFName.of('Kids'), PDFArray);
  for (let i = 0; kids && i < kids.size(); i++) {
    const kid = kids.lookup(i);
    if (kid instanceof PDFDict) collectNameTree(kid, into, depth + 1);
  }
}

function fileName(spec: PDFDict): string | undefined {
  for (const key of ['UF', 'F']) {
    const value: PDFObject | undefined = spec.lookup(PDFName.of(key));
    if (value instanceof PDFString || value instanceof PDFHexString) return value.decodeText();
  }
  return undefined;
}

/** The stream's bytes: stored as they are, or FlateDecode inflated up to the cap. */
function decodeStream(stream: PDFRawStream, filename: string, maxBytes: number): Buffer {
  const filter = stream.dict.lookup(PDFName.of('Filter'));
  const filters =
    filter === undefined
      ? []
      : filter instanceof PDFArray
        ? filter.asArray().map((f) => f.toString())
        : [filter.toString()];
  const raw = Buffer.from(stream.getContents());
  if (filters.length === 0) {
    if (raw.length > maxBytes)
      throw new UnreadableAttachment(`${filename}: over the XML cap of ${maxBytes} bytes`);
    return raw;
  }
  if (filters.length !== 1 || filters[0] !== '/FlateDecode') {
    throw new UnreadableAttachment(`${filename}: unsupported stream filter ${filters.join(' ')}`);
  }
  try {
    return inflateSync(raw, { maxOutputLength: maxBytes });
  } catch (error) {
    const over = error instanceof RangeError || (error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE';
    throw new UnreadableAttachment(
      over
        ? `${filename}: over the XML cap of ${maxBytes} bytes once inflated`
        : `${filename}: the stream cannot be inflated`,
      { cause: error },
    );
  }
}
