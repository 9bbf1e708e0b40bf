/**
 * `npm run close -- --month 2026-11 [--out DIR] [--data-dir DIR]`: the month-end close certificate
 * of the local pipeline, as HTML, PDF and JSON (in `<data-dir>/close/<month>/` unless `--out`):
 * every object uploaded in the month has exactly one row, the redeliveries and doubled
 * announcements absorbed, the analyses paid twice, the rejected and dead-lettered documents,
 * duplicate invoices across objects and formats, open review items, a chart of the month and the
 * SHA-256 of the month's rows.
 *
 * `npm run close -- --verify [--month 2026-11 | --certificate FILE]`: recomputes the digest of the
 * month's rows and compares it with the certificate's; exit 0 when they match, 1 when they do not
 * (the rows that changed, appeared or went are listed). docs/month-end.md.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import { parseCommandArgs, runCommand, UsageError } from '../lib/args';
import { certificateHtml, certificatePdf, sections } from '../lib/certificate';
import {
  type Certificate,
  certificateDir,
  closeCertificate,
  type DeadLetterItem,
  localObjects,
  readLedger,
  rowDigest,
} from '../lib/close';
import { listDeadLetters } from '../lib/dead-letter-subscription';
import { type Month, monthDigest, parseMonth, readMonth } from '../lib/month';
import { PubSubClient } from '../lib/pubsub';
import { readState } from '../lib/state';

const USAGE =
  'usage: npm run close -- --month YYYY-MM [--out DIR] [--data-dir DIR] | --verify [--month YYYY-MM | --certificate FILE] [--data-dir DIR]';

/** The dead letters of the running pipeline whose event falls in the month; unchecked when it is not running. */
async function deadLetters(dataDir: string, month: Month): Promise<Certificate['deadLetters']> {
  let state: Awaited<ReturnType<typeof readState>>;
  try {
    state = await readState(dataDir);
  } catch {
    return {
      checked: false,
      note: 'Dead letters not checked: the pipeline is not running (start it with `npm start` and close again to list them).',
      items: [],
    };
  }
  const pubsub = new PubSubClient(state.emulatorBaseUrl, state.projectId);
  try {
    const letters = await listDeadLetters(pubsub, state.deadLetterSubscription);
    const items: DeadLetterItem[] = letters
      .filter((l) => {
        // Cloud Storage's notification carries the event's time; one without it is listed.
        const time = l.attributes.eventTime;
        return time === undefined || time.startsWith(`${month}-`);
      })
      .map((l) => ({
        messageId: l.messageId,
        object: l.attributes.objectId
          ? `${l.attributes.objectId}#${l.attributes.objectGeneration}`
          : '(no object)',
        deliveries: l.deliveryCount === undefined ? null : Number(l.deliveryCount),
      }));
    return { checked: true, note: '', items };
  } finally {
    await pubsub.close();
  }
}

async function close(month: Month, dataDir: string, out: string | undefined): Promise<number> {
  const layout = dataDirLayout(dataDir);
  const { rows, stored, columns } = readMonth(layout.sqlite, month);
  const certificate = closeCertificate({
    month,
    dataDir: layout.root,
    rows,
    stored,
    columns,
    objects: await localObjects(layout.bucket),
    ledger: readLedger(layout.deliveries),
    deadLetters: await deadLetters(layout.root, month),
    now: new Date(),
  });
  const dir = path.resolve(out ?? certificateDir(layout.root, month));
  mkdirSync(dir, { recursive: true });
  const files = {
    json: path.join(dir, 'certificate.json'),
    html: path.join(dir, 'certificate.html'),
    pdf: path.join(dir, 'certificate.pdf'),
  };
  writeFileSync(files.json, `${JSON.stringify(certificate, null, 2)}\n`);
  writeFileSync(files.html, certificateHtml(certificate));
  writeFileSync(files.pdf, certificatePdf(certificate));
  console.log(`close certificate ${month}: ${certificate.rows.count} documents`);
  for (const s of sections(certificate)) console.log(`  ${s.tone === 'attention' ? '!' : '-'} ${s.verdict}`);
  console.log(`  sha256 ${certificate.rows.sha256}`);
  for (const file of Object.values(files)) console.log(`  ${file}`);
  return 0;
}

/** The certificates `--verify` checks: the one named, the month's, or every one of the data folder. */
function certificatesToVerify(dataDir: string, month: Month | undefined, file: string | undefined): string[] {
  if (file) return [path.resolve(file)];
  const root = path.join(dataDirLayout(dataDir).root, 'close');
  const months = month ? [month] : existsSync(root) ? readdirSync(root).sort() : [];
  const found = months.map((m) => path.join(root, m, 'certificate.json')).filter((f) => existsSync(f));
  if (found.length === 0)
    throw new Error(
      `no certificate to verify${month ? ` for ${month}` : ''} in ${root}: make one with \`npm run close -- --month YYYY-MM\`.`,
    );
  return found;
}

function verify(dataDir: string, month: Month | undefined, file: string | undefined): number {
  let failed = 0;
  for (const certificateFile of certificatesToVerify(dataDir, month, file)) {
    const certificate = JSON.parse(readFileSync(certificateFile, 'utf8')) as Certificate;
    if (certificate.kind !== 'docline-close-certificate')
      throw new Error(`${certificateFile} is no docline close certificate`);
    const { stored } = readMonth(dataDirLayout(dataDir).sqlite, certificate.month);
    // The columns the certificate hashed: a view that gained a column since still verifies.
    const digest = monthDigest(stored, certificate.rows.columns);
    if (digest === certificate.rows.sha256) {
      console.log(
        `verified   ${certificate.month}: ${stored.length} rows, sha256 ${digest} (${certificateFile})`,
      );
      continue;
    }
    failed += 1;
    console.log(
      `CHANGED    ${certificate.month}: sha256 ${digest}, the certificate says ${certificate.rows.sha256} (${certificateFile})`,
    );
    const now = new Map(stored.map((r) => [String(r.dedup_key), rowDigest(r, certificate.rows.columns)]));
    for (const [key, was] of Object.entries(certificate.rows.rowDigests)) {
      const is = now.get(key);
      if (is === undefined) console.log(`  gone     ${key}`);
      else if (is !== was) console.log(`  changed  ${key}`);
    }
    for (const key of now.keys()) if (!(key in certificate.rows.rowDigests)) console.log(`  added    ${key}`);
  }
  return failed === 0 ? 0 : 1;
}

async function main(): Promise<number> {
  const { values } = parseCommandArgs(
    process.argv.slice(2),
    {
      month: { type: 'string' },
      verify: { type: 'boolean' },
      certificate: { type: 'string' },
      out: { type: 'string' },
      'data-dir': { type: 'string' },
    },
    USAGE,
  );
  const dataDir = values['data-dir'] ?? process.env.DOCLINE_DATA_DIR ?? dataDirLayout().root;
  if (values.verify) {
    if (values.out) throw new UsageError(`--out makes a certificate; --verify checks one. ${USAGE}`);
    const month = values.month === undefined ? undefined : parseMonth(values.month, USAGE);
    return verify(dataDir, month, values.certificate);
  }
  if (values.certificate) throw new UsageError(`--certificate goes with --verify. ${USAGE}`);
  return close(parseMonth(values.month, USAGE), dataDir, values.out);
}

runCommand('close', main);
