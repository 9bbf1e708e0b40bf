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
      return !bytes.includes(0) && isUtf8(bytes);
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

function isUtf8(bytes: Buffer): boolean {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    return true;
  } catch {
    return false;
  }
}

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
