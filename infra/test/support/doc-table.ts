import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The body rows of the Markdown table between `<!-- MARKER:start -->` and `<!-- MARKER:end -->` of
 * docs/FILE, each as its trimmed cells (cell 0 is the nothing before the first `|`).
 */
export function docTable(file: string, marker: string): string[][] {
  const doc = readFileSync(join(__dirname, '..', '..', '..', 'docs', file), 'utf8');
  const section = doc.split(`<!-- ${marker}:start -->`)[1]?.split(`<!-- ${marker}:end -->`)[0] ?? '';
  return section
    .split('\n')
    .filter((line) => line.startsWith('|') && !line.startsWith('|---'))
    .slice(1)
    .map((line) => line.split('|').map((cell) => cell.trim()));
}
