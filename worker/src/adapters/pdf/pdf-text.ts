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

/**
 * One show-text operation of a page, as pdf.js's operator list gives it: the glyphs' text, and
 * between them the TJ offsets in thousandths of an em (negative: the next glyph moves right).
 */
export type TextRun = ReadonlyArray<string | number>;

// pdf.js turns a gap of 0.102 em or more between two glyphs of a run into a space, and ends the
// piece past 0.6 em (its getTextContent's trackingSpaceMin and spaceInFlowMax).
const PDFJS_SPACE_EM = 0.102;
const PDFJS_NEW_PIECE_EM = 0.6;
// A gap pdf.js does not take for a space either (its notASpace): letters that merely stand apart.
const OPEN_GAP_EM = 0.03;
// A word space is a space glyph's width or near it (0.25-0.33 em in common fonts, a justified line
// squeezes it somewhat); below this, in a letter-spaced run, a gap is spacing between letters.
const WORD_SPACE_EM = 0.2;

/**
 * The spaces pdf.js puts inside words of letter-spaced text, as (what pdf.js reads, the words it
 * drew) pairs. Some producers draw bold text with a regular font placed by the bold font's widths:
 * every letter is then followed by an offset (0.055 em after most, 0.11 em after an `r`, whose bold
 * width is wider by a third), and pdf.js, which reads any gap of 0.102 em as a space, writes
 * `Liefer ant GmbH`. In a run where at least a third of the gaps between letters are open, a gap
 * narrower than a word space is spacing, not a space.
 */
export function letterSpacingRepairs(runs: readonly TextRun[]): Array<[spaced: string, joined: string]> {
  const repairs = new Map<string, string>();
  for (const run of runs) {
    for (const segment of segmentsOf(run)) {
      const letterGaps = segment.gaps.filter(
        (_, i) => inked(segment.glyphs[i]) && inked(segment.glyphs[i + 1]),
      );
      const open = letterGaps.filter((gap) => gap >= OPEN_GAP_EM).length;
      if (letterGaps.length < 2 || open * 3 < letterGaps.length) continue;
      let spaced = segment.glyphs[0]!;
      let joined = spaced;
      segment.gaps.forEach((gap, i) => {
        const next = segment.glyphs[i + 1]!;
        const pdfJsSpace = gap >= PDFJS_SPACE_EM && inked(segment.glyphs[i]) && inked(next);
        spaced += (pdfJsSpace ? ' ' : '') + next;
        joined += (pdfJsSpace && gap >= WORD_SPACE_EM ? ' ' : '') + next;
      });
      if (spaced !== joined) repairs.set(spaced.trim(), joined.trim());
    }
  }
  return [...repairs];
}

/** A run's glyphs and the gap (em) after each but the last, cut where pdf.js starts a new piece. */
function segmentsOf(run: TextRun): Array<{ glyphs: string[]; gaps: number[] }> {
  const segments: Array<{ glyphs: string[]; gaps: number[] }> = [];
  let current = { glyphs: [] as string[], gaps: [] as number[] };
  let offset = 0;
  for (const entry of run) {
    if (typeof entry === 'number') {
      offset -= entry / 1000;
      continue;
    }
    if (current.glyphs.length > 0) {
      if (offset > PDFJS_NEW_PIECE_EM) {
        segments.push(current);
        current = { glyphs: [], gaps: [] };
      } else current.gaps.push(offset);
    }
    current.glyphs.push(entry);
    offset = 0;
  }
  if (current.glyphs.length > 0) segments.push(current);
  return segments;
}

/** A glyph that leaves ink: not a space. */
const inked = (glyph: string | undefined) => glyph !== undefined && glyph.trim() !== '';

/** `pieces` with the repairs of {@link letterSpacingRepairs} made in their text. */
export function repairLetterSpacing(
  pieces: readonly PlacedText[],
  repairs: ReadonlyArray<[spaced: string, joined: string]>,
): PlacedText[] {
  if (repairs.length === 0) return [...pieces];
  return pieces.map((piece) => {
    let str = piece.str;
    for (const [spaced, joined] of repairs) str = str.replaceAll(spaced, joined);
    return str === piece.str ? piece : { ...piece, str };
  });
}
