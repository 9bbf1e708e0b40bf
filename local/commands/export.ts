/**
 * `npm run export -- --month 2026-11 --format csv|fec [--out FILE] [--data-dir DIR]`: the month's
 * documents from the local `documents` view (corrections applied, as the view applies them), as
 * CSV or as the French FEC (fichier des écritures comptables) for purchase invoices. Written to
 * `--out`, else to stdout; what the FEC leaves out is listed on stderr. docs/month-end.md.
 */
import { writeFileSync } from 'node:fs';
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import { parseCommandArgs, runCommand, UsageError } from '../lib/args';
import { csvExport, fecText, latin9 } from '../lib/export';
import { parseMonth, readMonth } from '../lib/month';

const USAGE = 'usage: npm run export -- --month YYYY-MM --format csv|fec [--out FILE] [--data-dir DIR]';

function main(): void {
  const { values } = parseCommandArgs(
    process.argv.slice(2),
    {
      month: { type: 'string' },
      format: { type: 'string' },
      out: { type: 'string' },
      'data-dir': { type: 'string' },
    },
    USAGE,
  );
  const month = parseMonth(values.month, USAGE);
  const format = values.format;
  if (format !== 'csv' && format !== 'fec') throw new UsageError(`--format must be csv or fec. ${USAGE}`);
  const { rows } = readMonth(dataDirLayout(values['data-dir'] ?? process.env.DOCLINE_DATA_DIR).sqlite, month);
  let bytes: Buffer;
  if (format === 'csv') bytes = Buffer.from(csvExport(rows), 'utf8');
  else {
    const { text, skipped } = fecText(rows);
    bytes = latin9(text);
    for (const s of skipped) console.error(`not in the FEC  ${s.object}: ${s.reason}`);
  }
  if (values.out) {
    writeFileSync(values.out, bytes);
    console.error(`export: ${rows.length} documents of ${month} → ${values.out} (${format})`);
  } else process.stdout.write(bytes);
}

runCommand('export', main);
