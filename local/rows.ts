/** `npm run rows [-- --json]`: the documents view of the local store as a readable table. */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { SqliteStore } from '../worker/src/adapters/sqlite-store';
import { option, parseArgs } from './args';
import { rowsTable } from './format';

function main(): void {
  const { flags } = parseArgs(process.argv.slice(2));
  const dataDir = path.resolve(option(flags, 'data-dir', process.env.DOCLINE_DATA_DIR, '.docline'));
  const file = path.join(dataDir, 'docline.sqlite');
  if (!existsSync(file))
    throw new Error(`no rows yet: ${file} does not exist (run \`npm start\` and upload something).`);
  const store = new SqliteStore({ path: file });
  const rows = store.documents();
  if (flags.has('json')) console.log(JSON.stringify(rows, null, 2));
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

try {
  main();
} catch (error) {
  console.error(`rows: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
