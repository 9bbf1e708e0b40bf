/**
 * Text helpers shared by the offline parsers. A document is read as lines; a line is split into
 * cells where columns meet: a tab (what the PDF reader puts between columns) or two spaces or more
 * (how plain-text invoices align their columns).
 */

/** Lines of a plain-text document: Unicode NFC, typographic apostrophes made plain, no trailing blanks. */
export function textLines(text: string): string[] {
  return text
    .replace(/^\uFEFF/u, '')
    .split(/\r\n|\r|\n/u)
    .map(normalizeLine);
}

/** Same letters however they were encoded (`é` vs `e` + accent), one kind of apostrophe. */
export function normalizeLine(line: string): string {
  return line.normalize('NFC').replace(/[’‘]/gu, "'").trimEnd();
}

/** The cells of a line, trimmed, without empty ones. */
export function splitCells(line: string): string[] {
  return line
    .split(/\t| {2,}/u)
    .map((cell) => cell.trim())
    .filter((cell) => cell !== '');
}

/** Whether a line holds nothing but blanks. */
export function isBlank(line: string | undefined): boolean {
  return line === undefined || line.trim() === '';
}
