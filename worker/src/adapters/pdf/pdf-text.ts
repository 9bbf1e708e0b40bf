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
