import { RejectionError } from './errors';
import type { ObjectFields } from './event';

/** Limits applied to every document, from the worker's configuration. */
export interface CheckLimits {
  maxObjectBytes: number;
  /** Lower-case MIME types, without parameters. */
  allowedContentTypes: readonly string[];
}

/** `text/plain; charset=utf-8` → `text/plain`. */
export function baseMimeType(contentType: string | null): string | null {
  if (!contentType) return null;
  return contentType.split(';')[0]!.trim().toLowerCase() || null;
}

/** Checks what the notification declares, before a byte is downloaded. Throws RejectionError. */
export function checkDeclared(object: ObjectFields, limits: CheckLimits): string {
  const mime = baseMimeType(object.contentType);
  if (!mime || !limits.allowedContentTypes.includes(mime)) {
    throw new RejectionError(
      'unsupported_content_type',
      `content type ${mime ?? '(none)'} is not one of ${limits.allowedContentTypes.join(', ')}`,
    );
  }
  if (object.sizeBytes === 0) throw new RejectionError('empty_object', 'the object is empty (0 bytes)');
  if (object.sizeBytes !== null && object.sizeBytes > limits.maxObjectBytes) {
    throw new RejectionError(
      'too_large',
      `the object has ${object.sizeBytes} bytes, over the limit of ${limits.maxObjectBytes}`,
    );
  }
  return mime;
}

const startsWith = (bytes: Buffer, signature: number[], offset = 0) =>
  bytes.length >= offset + signature.length && signature.every((b, i) => bytes[offset + i] === b);

/** Whether the bytes are what the declared MIME type says. */
export function contentMatches(mime: string, bytes: Buffer): boolean {
  switch (mime) {
    case 'application/pdf':
      // A PDF header may follow a little junk; readers accept it within the first 1024 bytes.
      return bytes.subarray(0, 1024).includes('%PDF-');
    case 'image/png':
      return startsWith(bytes, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    case 'image/jpeg':
      return startsWith(bytes, [0xff, 0xd8, 0xff]);
    case 'image/webp':
      return startsWith(bytes, [0x52, 0x49, 0x46, 0x46]) && startsWith(bytes, [0x57, 0x45, 0x42, 0x50], 8);
    case 'text/plain':
      // Any text in a charset docline reads (UTF-8, else Windows-1252 / ISO-8859-1/15); binary
      // bytes (NUL, control codes a text file never holds) are not text in any of them.
      return decodeText(bytes) !== undefined;
    case 'application/xml':
    case 'text/xml':
      // Markup, after a possible byte order mark and white space; the parser judges the rest.
      return startsWithMarkup(bytes);
    default:
      return true;
  }
}

function startsWithMarkup(bytes: Buffer): boolean {
  let i = startsWith(bytes, [0xef, 0xbb, 0xbf]) ? 3 : 0;
  while (i < bytes.length && [0x20, 0x09, 0x0a, 0x0d].includes(bytes[i]!)) i++;
  return bytes[i] === 0x3c;
}

/** The charsets a `text/plain` document is read in: Unicode, and the legacy 8-bit ones of Western Europe. */
export type TextCharset = 'utf-8' | 'windows-1252' | 'iso-8859-15';

/** Labels a `charset=` parameter may use for them (lower case), as the WHATWG Encoding standard lists. */
const CHARSET_LABELS: Record<string, TextCharset> = {
  'utf-8': 'utf-8',
  utf8: 'utf-8',
  'us-ascii': 'utf-8',
  ascii: 'utf-8',
  'windows-1252': 'windows-1252',
  cp1252: 'windows-1252',
  'x-cp1252': 'windows-1252',
  // WHATWG decodes ISO-8859-1 as Windows-1252 (a superset on every printable byte), as browsers do.
  'iso-8859-1': 'windows-1252',
  'iso8859-1': 'windows-1252',
  latin1: 'windows-1252',
  l1: 'windows-1252',
  'iso-8859-15': 'iso-8859-15',
  'iso8859-15': 'iso-8859-15',
  latin9: 'iso-8859-15',
  l9: 'iso-8859-15',
};

/** The `charset` parameter of a content type, when it names one docline reads. */
export function declaredCharset(contentType: string | null | undefined): TextCharset | undefined {
  const match = /;\s*charset\s*=\s*"?([^";\s]+)"?/iu.exec(contentType ?? '');
  return match ? CHARSET_LABELS[match[1]!.toLowerCase()] : undefined;
}

// C0 control codes other than tab, line feed, form feed and carriage return (and DEL): a text file
// in any of these charsets holds none of them; a binary file almost always does.
function isBinaryText(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if ((code < 0x20 && code !== 0x09 && code !== 0x0a && code !== 0x0c && code !== 0x0d) || code === 0x7f)
      return true;
  }
  return false;
}

function decodeAs(bytes: Uint8Array, charset: TextCharset): string | undefined {
  try {
    return new TextDecoder(charset, { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * A `text/plain` document as text: in its declared charset when it decodes in it, else in the one
 * detected. Bytes that are valid UTF-8 are UTF-8 (a legacy file with accents almost never is);
 * others are Windows-1252, or ISO-8859-15 when a byte 0xA4 (its euro sign, Windows-1252's `¤`) sits
 * beside an amount and no byte 0x80-0x9F (Windows-1252's `€`, quotes, dashes) appears. Undefined
 * for binary bytes, which are text in none of them.
 */
export function decodeText(
  bytes: Uint8Array,
  contentType?: string | null,
): { text: string; charset: TextCharset } | undefined {
  const declared = declaredCharset(contentType);
  const charset =
    (declared && decodeAs(bytes, declared) !== undefined ? declared : undefined) ?? detectCharset(bytes);
  const text = decodeAs(bytes, charset);
  if (text === undefined || isBinaryText(text)) return undefined;
  return { text, charset };
}

function detectCharset(bytes: Uint8Array): TextCharset {
  if (decodeAs(bytes, 'utf-8') !== undefined) return 'utf-8';
  let c1 = false;
  let euroBesideDigits = false;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (byte >= 0x80 && byte <= 0x9f) c1 = true;
    else if (byte === 0xa4 && (isAmountByte(bytes[i - 1]) || isAmountByte(bytes[i + 1])))
      euroBesideDigits = true;
  }
  return euroBesideDigits && !c1 ? 'iso-8859-15' : 'windows-1252';
}

// A digit or a space: what stands beside a currency sign.
const isAmountByte = (byte: number | undefined) =>
  byte !== undefined && ((byte >= 0x30 && byte <= 0x39) || byte === 0x20 || byte === 0xa0);

/** Checks the bytes actually read. Throws RejectionError. */
export function checkContent(mime: string, bytes: Buffer, limits: CheckLimits): void {
  if (bytes.length === 0) throw new RejectionError('empty_object', 'the object is empty (0 bytes)');
  if (bytes.length > limits.maxObjectBytes) {
    throw new RejectionError('too_large', `the object has over ${limits.maxObjectBytes} bytes`);
  }
  if (!contentMatches(mime, bytes)) {
    throw new RejectionError('content_mismatch', `the bytes are not ${mime}`);
  }
}
