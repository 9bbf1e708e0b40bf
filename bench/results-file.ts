import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Where the bench's commands keep their figures: bench/results.json, or results.quick.json for a run
 * that only tries the harness (its figures must not replace the last real ones).
 */
export const resultsFile = (quick = false) =>
  path.join(__dirname, quick ? 'results.quick.json' : 'results.json');

/** The sections of a results file (none while it does not exist). */
export function readResults(file: string): Record<string, unknown> {
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>) : {};
}

/**
 * Writes `sections` into a results file; the sections other commands wrote keep their last
 * figures. Returns the file.
 */
export function mergeResults(file: string, sections: Record<string, unknown>): string {
  writeFileSync(file, `${JSON.stringify({ ...readResults(file), ...sections }, null, 2)}\n`);
  return file;
}

/** Rewrites a document through `replace` (its generated blocks, from the figures just written). */
export function rewrite(file: string, replace: (text: string) => string): void {
  writeFileSync(file, replace(readFileSync(file, 'utf8')));
}
