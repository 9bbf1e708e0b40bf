/**
 * Generated blocks in the docs: the text between a start and an end marker, rewritten from
 * bench/results.json by the command that measured it (never typed by hand).
 */

/**
 * The document with the text between `start` and `end` replaced by `body`; `what` and `file` name
 * the block in the error.
 */
export function replaceBlock(
  doc: string,
  start: string,
  end: string,
  body: string,
  what: string,
  file = 'bench/README.md',
): string {
  const from = doc.indexOf(start);
  const to = doc.indexOf(end);
  if (from < 0 || to < from) throw new Error(`${file} has no ${what} block (its markers are missing)`);
  return `${doc.slice(0, from + start.length)}\n${body}${doc.slice(to)}`;
}

/** The text between `start` and `end` in `doc`, trimmed (undefined: the markers are missing). */
export function blockIn(doc: string, start: string, end: string): string | undefined {
  const from = doc.indexOf(start);
  const to = doc.indexOf(end);
  return from < 0 || to < from ? undefined : doc.slice(from + start.length, to).trim();
}
