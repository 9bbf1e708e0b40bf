/**
 * `npm run rows [-- --json] [--duplicates]`: the documents view of the local store as a readable
 * table; `--duplicates`: the duplicate_invoices view (one invoice in several objects).
 */
import { existsSync } from 'node:fs';
import { SqliteStore } from '../../worker/src/adapters/stores/sqlite-store';
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import { parseCommandArgs, runCommand } from '../lib/args';
import { type DuplicateInvoice, duplicatesTable, rowsTable } from '../lib/format';

const USAGE = 'usage: npm run rows -- [--json] [--duplicates] [--data-dir DIR]';

function main(): void {
  const { values } = parseCommandArgs(
    process.argv.slice(2),
    { json: { type: 'boolean' }, duplicates: { type: 'boolean' }, 'data-dir': { type: 'string' } },
    USAGE,
  );
  const file = dataDirLayout(values['data-dir'] ?? process.env.DOCLINE_DATA_DIR).sqlite;
  if (!existsSync(file))
    throw new Error(`no rows yet: ${file} does not exist (run \`npm start\` and upload something).`);
  const store = new SqliteStore({ path: file });
  if (values.duplicates) {
    const duplicates = store.view('duplicate_invoices') as unknown as DuplicateInvoice[];
    if (values.json) console.log(JSON.stringify(duplicates, null, 2));
    else {
      if (duplicates.length > 0) console.log(duplicatesTable(duplicates));
      const groups = new Set(
        duplicates.map((d) => `${d.supplier_key}|${d.invoice_number_key}|${d.total_amount}`),
      );
      console.log(
        `${duplicates.length > 0 ? '\n' : ''}${groups.size} invoices found in more than one object`,
      );
    }
    void store.close();
    return;
  }
  const rows = store.documents();
  if (values.json) console.log(JSON.stringify(rows, null, 2));
  else {
    console.log(rowsTable(rows));
    const doubled = store.view('duplicate_objects').length;
    console.log(
      `\n${rows.length} documents` +
        (doubled
          ? `; ${doubled} objects with more than one ok row (a doubled notification in message mode)`
          : ''),
    );
  }
  void store.close();
}

runCommand('rows', main);
