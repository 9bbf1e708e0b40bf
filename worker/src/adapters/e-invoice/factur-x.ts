import { inflateSync } from 'node:zlib';

/**
 * What docline knows of Factur-X / ZUGFeRD / XRechnung PDFs before pdf.js parses one: the names its
 * XML goes by, whether the raw bytes may carry an attachment at all, and a capped inflation of every
 * embedded file's raw stream, so that pdf.js (which decodes a stream whole, without a cap) is never
 * asked for a compressed bomb. The attachment itself is read by pdf.js (adapters/pdf/pdfjs-parser.ts).
 */

/** The names a hybrid invoice gives its XML (Factur-X; ZUGFeRD 1 and 2; XRechnung), compared lower-cased. */
export const E_INVOICE_ATTACHMENTS: readonly string[] = [
  'factur-x.xml',
  'zugferd-invoice.xml',
  'xrechnung.xml',
];

const MARKERS = ['EmbeddedFile', ...E_INVOICE_ATTACHMENTS, 'ZUGFeRD-invoice.xml', 'Factur-X.xml'].map((m) =>
  Buffer.from(m, 'latin1'),
);

const asBuffer = (pdf: Uint8Array) => Buffer.from(pdf.buffer, pdf.byteOffset, pdf.byteLength);

/**
 * Whether a PDF may carry an attachment, from its raw bytes: asking pdf.js for a long PDF's name
 * trees costs a parse, and most PDFs carry nothing. An embedded file's stream dictionary is never
 * compressed (streams cannot sit in object streams) and producers type it `/EmbeddedFile`; its file
 * name, when stored uncompressed, is the other marker. A PDF with neither is an ordinary PDF.
 */
export function mayCarryAttachment(pdf: Uint8Array): boolean {
  const bytes = asBuffer(pdf);
  return MARKERS.some((marker) => bytes.includes(marker));
}

const TYPE_MARKER = Buffer.from('/EmbeddedFile', 'latin1');
const STREAM = Buffer.from('stream', 'latin1');
const ENDSTREAM = Buffer.from('endstream', 'latin1');
// A name goes on with these; `/EmbeddedFiles` (the name tree's key) is not a stream's type.
const NAME_CHAR = /[A-Za-z0-9#._-]/u;

/**
 * Inflates the raw stream of every embedded file under `maxBytes`, and says what stops one: a
 * stream over the cap once inflated, a filter other than FlateDecode, an encrypted PDF (its raw
 * streams cannot be inflated). Undefined when every stream is fine. Streams are found by their
 * dictionary's `/Type /EmbeddedFile`, which is never compressed.
 */
export function checkEmbeddedStreams(pdf: Uint8Array, maxBytes: number): string | undefined {
  const bytes = asBuffer(pdf);
  if (bytes.includes('/Encrypt')) return 'the PDF is encrypted';
  for (let at = bytes.indexOf(TYPE_MARKER); at >= 0; at = bytes.indexOf(TYPE_MARKER, at + 1)) {
    const next = String.fromCharCode(bytes[at + TYPE_MARKER.length] ?? 0x20);
    if (NAME_CHAR.test(next)) continue;
    const problem = checkStreamAt(bytes, at, maxBytes);
    if (problem) return problem;
  }
  return undefined;
}

function checkStreamAt(bytes: Buffer, marker: number, maxBytes: number): string | undefined {
  const objStart = Math.max(0, bytes.lastIndexOf(' obj', marker));
  const keyword = bytes.indexOf(STREAM, marker);
  // `/Type /EmbeddedFile` outside a stream's dictionary (a name in an object stream's text): no stream here.
  if (keyword < 0 || bytes.lastIndexOf('endobj', keyword) > marker) return undefined;
  const dictionary = bytes.subarray(objStart, keyword).toString('latin1');
  const filters = [
    ...(/\/Filter\s*(\[[^\]]*\]|\/[A-Za-z0-9]+)/u.exec(dictionary)?.[1] ?? '').matchAll(/\/([A-Za-z0-9]+)/gu),
  ].map((m) => m[1]!);
  if (filters.length > 1 || (filters.length === 1 && filters[0] !== 'FlateDecode')) {
    return `unsupported stream filter ${filters.map((f) => `/${f}`).join(' ')}`;
  }
  let start = keyword + STREAM.length;
  if (bytes[start] === 0x0d) start++;
  if (bytes[start] === 0x0a) start++;
  const direct = /\/Length\s+(\d+)(?!\s+\d+\s+R)/u.exec(dictionary);
  const end = direct ? start + Number(direct[1]) : bytes.indexOf(ENDSTREAM, start);
  const raw = bytes.subarray(start, end < 0 ? bytes.length : Math.min(end, bytes.length));
  if (filters.length === 0) {
    return raw.length > maxBytes ? `over the XML cap of ${maxBytes} bytes` : undefined;
  }
  try {
    inflateSync(raw, { maxOutputLength: maxBytes });
    return undefined;
  } catch (error) {
    const over = error instanceof RangeError || (error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE';
    return over ? `over the XML cap of ${maxBytes} bytes once inflated` : 'the stream cannot be inflated';
  }
}
