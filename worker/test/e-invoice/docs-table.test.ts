import { HEADER_TERMS, LINE_TERMS } from '../../src/adapters/e-invoice/mapping';
import { docsTableRows } from '../support/docs-table';

/** The rows of the mapping table of docs/e-invoices.md, code spans unwrapped. */
const mappingTable = () =>
  docsTableRows('docs/e-invoices.md', 'e-invoice-mapping').map((row) =>
    row.map((cell) => cell.replace(/^`|`$/g, '')),
  );

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
