import { readFileSync } from 'node:fs';
import path from 'node:path';
import { HEADER_TERMS, LINE_TERMS } from '../../src/adapters/e-invoice/mapping';

/** The rows of the mapping table of docs/e-invoices.md, as cells (escaped pipes kept as pipes). */
function mappingTable(): string[][] {
  const doc = readFileSync(path.join(__dirname, '..', '..', '..', 'docs', 'e-invoices.md'), 'utf8');
  const section =
    doc.split('<!-- e-invoice-mapping:start -->')[1]?.split('<!-- e-invoice-mapping:end -->')[0] ?? '';
  return section
    .split('\n')
    .filter((line) => line.startsWith('|') && !line.startsWith('|---'))
    .slice(1)
    .map((line) =>
      line
        .replaceAll('\\|', '\u0000')
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim().replaceAll('\u0000', '|').replace(/^`|`$/g, '')),
    );
}

describe('the mapping table of docs/e-invoices.md', () => {
  it('is the mapping the reader evaluates, term by term, in order', () => {
    const code = [...HEADER_TERMS, ...LINE_TERMS].map((t) => [
      t.term,
      t.field,
      t.required ? 'yes' : 'no',
      t.cii,
      t.ubl,
    ]);
    expect(mappingTable()).toEqual(code);
  });
});
