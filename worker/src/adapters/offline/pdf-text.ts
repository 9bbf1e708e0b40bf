import { extractTextItems, getDocumentProxy, getResolvedPDFJS } from 'unpdf';
import { ConfigurationError, RejectionError } from '../../core/errors';

/**
 * The text layer of a PDF, as lines of text. Columns (a table's cells, a label and its right-aligned
 * amount) are joined with a tab, so `1 234,56` in one cell never merges with the quantity next to
 * it; words of one cell are joined with a space.
 */

/** One piece of text placed on a page (PDF units, origin bottom-left), as pdf.js reports it. */
export interface PlacedText {
  str: string;
  x: number;
  y: number;
  width: number;
  fontSize: number;
}

// Gaps are measured in font sizes: a space in Helvetica is ~0.28 em, a column gap is wider than 1 em.
const COLUMN_GAP_EM = 1;
const WORD_GAP_EM = 0.15;
// Pieces whose baselines differ by less than this share a line (subscripts, mixed font sizes).
const SAME_LINE_EM = 0.5;
// Lines are usually 1.2-1.5 em apart; a wider gap separates blocks, as a blank line does in text.
const BLANK_LINE_EM = 2;

/** Groups the pieces of one page into lines, top to bottom, each read left to right. */
export function placedTextToLines(items: readonly PlacedText[]): string[] {
  const pieces = items.filter((item) => item.str.trim() !== '');
  const rows: PlacedText[][] = [];
  for (const piece of [...pieces].sort((a, b) => b.y - a.y || a.x - b.x)) {
    const row = rows[rows.length - 1];
    const tolerance = Math.max(piece.fontSize, 1) * SAME_LINE_EM;
    if (row && Math.abs(row[0]!.y - piece.y) <= tolerance) row.push(piece);
    else rows.push([piece]);
  }
  const lines: string[] = [];
  rows.forEach((row, index) => {
    const above = rows[index - 1]?.[0];
    const em = Math.max(row[0]!.fontSize, 1);
    if (above && above.y - row[0]!.y > BLANK_LINE_EM * em) lines.push('');
    lines.push(joinRow(row.sort((a, b) => a.x - b.x)));
  });
  return lines;
}

function joinRow(row: readonly PlacedText[]): string {
  let line = '';
  let previousEnd: number | null = null;
  for (const piece of row) {
    if (previousEnd !== null) {
      const gap = piece.x - previousEnd;
      const em = Math.max(piece.fontSize, 1);
      if (gap > COLUMN_GAP_EM * em) line += '\t';
      else if (gap > WORD_GAP_EM * em && !line.endsWith(' ') && !piece.str.startsWith(' ')) line += ' ';
    }
    line += piece.str;
    previousEnd = piece.x + piece.width;
  }
  return line.trimEnd();
}

// What pdf.js throws when the bytes themselves are at fault: the same bytes fail the same way on
// every retry. (A damaged content stream surfaces as UnknownErrorException.)
const UNREADABLE_PDF = new Set([
  'InvalidPDFException',
  'PasswordException',
  'FormatError',
  'UnknownErrorException',
]);

/** Loads pdf.js once; its absence is our fault, not the document's, so no document is refused for it. */
async function loadPdfJs(): Promise<void> {
  try {
    await getResolvedPDFJS();
  } catch (error) {
    throw new ConfigurationError('pdf_reader_unavailable', 'pdf.js (through unpdf) cannot be loaded', {
      cause: error,
    });
  }
}

/**
 * The lines of every page, pages separated by an empty line. A PDF without a text layer (a scan)
 * gives no lines. Throws RejectionError('analysis_failed') when pdf.js cannot read the bytes
 * (corrupt, truncated or password-protected), ConfigurationError when pdf.js itself cannot be loaded.
 */
export async function pdfLines(bytes: Uint8Array, name: string): Promise<string[]> {
  await loadPdfJs();
  try {
    // pdf.js takes ownership of (detaches) the buffer it is given: hand it a copy.
    const pdf = await getDocumentProxy(new Uint8Array(bytes), { verbosity: 0 });
    try {
      const { items } = await extractTextItems(pdf);
      return items.flatMap((page, index) => [...(index > 0 ? [''] : []), ...placedTextToLines(page)]);
    } finally {
      await pdf.loadingTask.destroy();
    }
  } catch (error) {
    if (error instanceof Error && UNREADABLE_PDF.has(error.name)) {
      throw new RejectionError('analysis_failed', `${name}: the PDF cannot be read (${error.message})`, {
        cause: error,
      });
    }
    throw error;
  }
}
