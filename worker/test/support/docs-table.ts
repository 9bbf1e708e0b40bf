import { readFileSync } from 'node:fs';
import path from 'node:path';

const REPO_ROOT = path.join(__dirname, '..', '..', '..');

/**
 * The rows of a docs table between `<!-- NAME:start -->` and `<!-- NAME:end -->` in `file`
 * (relative to the repository), as trimmed cells, header and rule left out, escaped pipes kept as
 * pipes. Every docs table checked against the code is read through this one parser.
 */
export function docsTableRows(file: string, name: string): string[][] {
  const doc = readFileSync(path.join(REPO_ROOT, file), 'utf8');
  const section = doc.split(`<!-- ${name}:start -->`)[1]?.split(`<!-- ${name}:end -->`)[0] ?? '';
  return section
    .split('\n')
    .filter((line) => line.startsWith('|') && !line.startsWith('|---'))
    .slice(1)
    .map((line) =>
      line
        .replaceAll('\\|', '\u0000')
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim().replaceAll('\u0000', '|')),
    );
}
