/**
 * `npm run e2e [-- --target cloud]`: proves "one document, one line" end to end. Self-contained
 * (temporary folders, free ports), bounded in time, exit 0 or 1. Prints one `OK   …` line per
 * check, or `FAIL …` with what was observed.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Row } from '../../worker/src/contract/row';
import { parseCommandArgs, runCommand, UsageError } from '../lib/args';
import { runCanary } from '../lib/canary';
import { CloudTarget, LocalTarget, type Target } from '../lib/e2e-targets';
import { REPO_ROOT } from '../lib/worker-process';

const SAMPLES = path.join(REPO_ROOT, 'samples');
const TIMEOUT_MS = Number(process.env.E2E_TIMEOUT_MS ?? 240_000);

class CheckFailed extends Error {}

const started = Date.now();
const progress = (text: string) => {
  if (process.stderr.isTTY) process.stderr.write(`\r\x1b[2K${text}`);
  else process.stderr.write(`${text}\n`);
};
const endProgress = () => {
  if (process.stderr.isTTY) process.stderr.write('\r\x1b[2K');
};

/** Polls `probe` until it returns a value, printing a progress line; fails at the deadline. */
async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, everyMs = 250): Promise<T> {
  let lastPrint = 0;
  for (;;) {
    const value = await probe();
    if (value !== undefined) {
      endProgress();
      return value;
    }
    if (Date.now() - started > TIMEOUT_MS) throw new CheckFailed(`timed out waiting for ${what}`);
    if (Date.now() - lastPrint > 2_000) {
      progress(`… waiting for ${what} (${Math.round((Date.now() - started) / 1000)} s)`);
      lastPrint = Date.now();
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** Waits for `what`: a row for each of `uris`; resolves with the rows of each. */
const rowsOfEach = (target: Target, what: string, uris: string[]) =>
  waitFor(what, async () => {
    const found = await Promise.all(uris.map((u) => target.rawRowsFor(u)));
    return found.every((r) => r.length > 0) ? found : undefined;
  });

function files(folder: string): Array<{ name: string; bytes: Buffer }> {
  const dir = path.join(SAMPLES, folder);
  return readdirSync(dir)
    .filter((f) => !f.startsWith('.') && f !== 'README.md')
    .sort()
    .map((f) => ({ name: `${folder}/${f}`, bytes: readFileSync(path.join(dir, f)) }));
}

let passed = 0;
const ok = (line: string) => {
  passed += 1;
  console.log(`OK   ${line}`);
};

async function run(target: Target): Promise<void> {
  const run = Date.now().toString(36);
  const documents = [...files('invoices'), ...files('bad')];
  if (files('invoices').length < 10)
    throw new CheckFailed('samples/invoices must hold at least ten invoices');

  // 1. Every upload ends as exactly one row.
  const uris: string[] = [];
  for (const doc of documents) uris.push(await target.upload(`e2e-${run}/${doc.name}`, doc.bytes));
  let reported = -1;
  const rows = await waitFor(`rows for ${uris.length} documents`, async () => {
    const found = await Promise.all(uris.map((u) => target.rawRowsFor(u)));
    const done = found.filter((r) => r.length > 0).length;
    if (done !== reported) progress(`… ${done}/${uris.length} documents have their row`);
    reported = done;
    return done === uris.length ? found : undefined;
  });
  const counts = rows.map((r) => r.length);
  if (counts.some((c) => c !== 1)) throw new CheckFailed(`rows per document: ${counts.join(', ')}`);
  ok(`${uris.length} documents, ${counts.reduce((a, b) => a + b, 0)} rows, one per document`);
  const statuses = rows.map((r) => r[0]!.status);
  const expectedRejected = files('bad').length;
  const rejected = statuses.filter((s) => s === 'rejected').length;
  if (rejected !== expectedRejected)
    throw new CheckFailed(`expected ${expectedRejected} rejected rows, saw ${rejected}`);

  const twice = await target.keysRecordedTwice();
  if (twice.length > 0) throw new CheckFailed(`dedup keys recorded twice: ${twice.join(', ')}`);
  ok('no dedup key twice');

  // 1b. The deploy canary (npm run canary), on this target: its invoice followed to its row.
  const probes = target.canaryProbes();
  if (probes === undefined)
    console.log('SKIP canary: run `npm run canary -- --target cloud` after the deploy');
  else {
    const canary = await runCanary(probes, {
      timeoutMs: Math.max(30_000, TIMEOUT_MS - (Date.now() - started)),
      pollMs: 250,
      runId: run,
    });
    if (!canary.ok) throw new CheckFailed(canary.message);
    ok(`canary: ${canary.objectUri} through notification, push, worker and table`);
  }

  // 2. The exact push body of a processed message, sent again, is a duplicate.
  const first = uris[0]!;
  const message = await waitFor('the announcement of the first upload', () => target.announcement(first));
  const body = {
    message: { ...message, message_id: message.messageId, publishTime: new Date().toISOString() },
    subscription: 'projects/docline-local/subscriptions/docline-push',
  };
  const replay = await target.push(body);
  if (replay.status !== 200 || (replay.body as { status?: string }).status !== 'duplicate') {
    throw new CheckFailed(`replay answered ${replay.status} ${JSON.stringify(replay.body)}`);
  }
  ok('replay acknowledged as duplicate');

  // 3. A re-upload (new generation) is new work.
  const reuploadUri = await target.upload(`e2e-${run}/${documents[0]!.name}`, documents[0]!.bytes);
  if (reuploadUri === first) throw new CheckFailed('the re-upload kept its generation');
  const [reuploaded] = (await rowsOfEach(target, 'the re-upload’s row', [reuploadUri])) as [Row[]];
  if (reuploaded.length !== 1 || reuploaded[0]!.status !== 'ok') {
    throw new CheckFailed(`re-upload rows: ${JSON.stringify(reuploaded.map((r) => r.status))}`);
  }
  ok('re-upload processed as new work');

  // 4. One upload announced twice (two notification configs): one row, one analysis.
  const doubledUri = await target.upload(`e2e-${run}/doubled/${documents[1]!.name}`, documents[1]!.bytes);
  const announcement = await waitFor('the doubled upload’s announcement', () =>
    target.announcement(doubledUri),
  );
  const secondId = await target.publish(Buffer.from(announcement.data ?? '', 'base64'), {
    ...announcement.attributes,
    notificationConfig: `${announcement.attributes?.notificationConfig ?? 'config'}-copy`,
  });
  await waitFor('both notifications of the doubled upload to be answered', async () => {
    const r = await target.rawRowsFor(doubledUri);
    // Where the target can tell (local logs), wait for the worker's answer to the second message too.
    return r.length > 0 && target.answered(secondId) !== false ? true : undefined;
  });
  const doubledRows = await target.rawRowsFor(doubledUri);
  const analyses = target.analysesOf(doubledUri);
  if (doubledRows.length !== 1) throw new CheckFailed(`doubled notification gave ${doubledRows.length} rows`);
  if (analyses !== undefined && analyses !== 1)
    throw new CheckFailed(`doubled notification analysed ${analyses} times`);
  ok(
    `doubled notification absorbed${analyses === undefined ? ' (analysis count not observable on this target)' : ''}`,
  );

  // 5. A message the worker can never accept (a body over its limit) ends in the dead-letter topic.
  const token = `poison-${run}`;
  await target.publish(Buffer.alloc(512 * 1024, 'x'), { e2e: token });
  await waitFor('the poison message in the dead-letter subscription', async () =>
    (await target.deadLettersWith('e2e', token)) > 0 ? true : undefined,
  );
  ok('poison message dead-lettered');

  // 6. Documents that predate the notification: written without announcing, brought in by reconcile.
  const predates = `e2e-${run}/predates/`;
  const write = target.writeWithoutAnnouncing;
  if (!write) {
    console.log(
      'SKIP reconcile checks: every write to this bucket is announced (run them on the local target)',
    );
  } else {
    const silent: string[] = [];
    for (const doc of files('invoices').slice(0, 3))
      silent.push(await write(`${predates}${path.basename(doc.name)}`, doc.bytes));
    const args = ['--prefix', predates, '--older-than', '0'];
    const found = await target.reconcile(args);
    if (found.code !== 1 || found.report?.missing !== 3)
      throw new CheckFailed(`reconcile report: exit ${found.code}, ${found.lines.join(' | ')}`);
    ok('reconcile found 3 documents without a row');

    const applied = await target.reconcile([...args, '--apply']);
    if (applied.code !== 0 || applied.announced?.length !== 3)
      throw new CheckFailed(`reconcile --apply: exit ${applied.code}, ${applied.lines.join(' | ')}`);
    const brought = await rowsOfEach(target, 'the rows of the reconciled documents', silent);
    if (brought.some((r) => r.length !== 1))
      throw new CheckFailed(`rows per reconciled document: ${brought.map((r) => r.length).join(', ')}`);
    ok('reconcile --apply brought them in, one row each');

    const second = await target.reconcile([...args, '--apply']);
    const after = await Promise.all(silent.map((u) => target.rawRowsFor(u)));
    if (
      second.code !== 0 ||
      second.report?.missing !== 0 ||
      second.announced !== undefined ||
      after.some((r) => r.length !== 1)
    )
      throw new CheckFailed(`second reconcile --apply: exit ${second.code}, ${second.lines.join(' | ')}`);
    ok('a second reconcile --apply changed nothing');
  }

  // 7. The same invoice uploaded under two names: one row each, flagged as one invoice.
  const invoice = files('invoices').find((f) => f.name.endsWith('.txt'))!;
  const firstCopy = await target.upload(
    `e2e-${run}/twice/first-${path.basename(invoice.name)}`,
    invoice.bytes,
  );
  const secondCopy = await target.upload(
    `e2e-${run}/twice/second-${path.basename(invoice.name)}`,
    invoice.bytes,
  );
  const group = await waitFor('the duplicate invoice to be flagged', async () => {
    const members = await target.duplicateGroup(secondCopy);
    return members.includes(firstCopy) ? members : undefined;
  });
  if (!group.includes(secondCopy)) throw new CheckFailed(`duplicate group: ${group.join(', ')}`);
  ok('duplicate invoice flagged');

  // 8. A scanned PDF and a phone photo: rows with their fields, read by OCR where the analyzer is offline.
  const pictures = files('other').filter((f) => /\/(scan|photo)-/u.test(f.name));
  const expectedFields = JSON.parse(readFileSync(path.join(SAMPLES, 'expected.json'), 'utf8')) as Record<
    string,
    { invoice_number: string; total_amount: number }
  >;
  const pictureUris: string[] = [];
  for (const doc of pictures) pictureUris.push(await target.upload(`e2e-${run}/${doc.name}`, doc.bytes));
  const pictureRows = await rowsOfEach(target, 'the rows of the scan and the photo', pictureUris);
  pictureRows.forEach((found, i) => {
    const row = found[0]!;
    const { name } = pictures[i]!;
    const want = expectedFields[name]!;
    const analysis = row.analysis as { invoice_number?: string; total_amount?: number } | null;
    if (found.length !== 1 || row.status !== 'ok')
      throw new CheckFailed(`${name}: ${found.length} rows, ${row.status} ${row.reason ?? ''}`);
    if (row.model?.startsWith('offline') && !row.model.includes('+ocr:'))
      throw new CheckFailed(`${name}: read offline without OCR (model ${row.model})`);
    if (analysis?.invoice_number !== want.invoice_number || analysis?.total_amount !== want.total_amount)
      throw new CheckFailed(
        `${name}: read ${analysis?.invoice_number} / ${analysis?.total_amount}, expected ${want.invoice_number} / ${want.total_amount}`,
      );
  });
  if (pictures.length < 2) throw new CheckFailed('samples/other must hold a scan-* and a photo-* invoice');
  ok('scans and photos read offline');

  // 9. A Factur-X PDF and a UBL invoice are read from their XML: exact rows, no analysis paid.
  const eInvoices = E_INVOICES.map((f) => path.join(E_INVOICE_FIXTURES, f.file));
  if (!eInvoices.every((file) => existsSync(file))) {
    console.log(`SKIP e-invoice check: the shared fixtures are not at ${E_INVOICE_FIXTURES}`);
    return;
  }
  const structured: string[] = [];
  for (const file of eInvoices)
    structured.push(await target.upload(`e2e-${run}/e-invoices/${path.basename(file)}`, readFileSync(file)));
  const structuredRows = await rowsOfEach(target, 'the e-invoices’ rows', structured);
  structuredRows.forEach((found, i) => {
    const row = found[0]!;
    const { model, number } = E_INVOICES[i]!;
    const analysis = row.analysis as { invoice_number?: string } | null;
    if (found.length !== 1 || row.status !== 'ok' || row.model !== model || row.total_tokens !== 0)
      throw new CheckFailed(
        `${E_INVOICES[i]!.file}: ${found.length} rows, ${row.status}, ${row.model}, ${row.total_tokens} tokens`,
      );
    if (analysis?.invoice_number !== number)
      throw new CheckFailed(
        `${E_INVOICES[i]!.file}: invoice number ${analysis?.invoice_number}, the XML says ${number}`,
      );
    const analyses = target.analysesOf(structured[i]!);
    if (analyses !== undefined && analyses !== 0)
      throw new CheckFailed(`${E_INVOICES[i]!.file} was analysed ${analyses} times`);
  });
  ok('e-invoices read from their structure, no analysis paid');
}

/** The shared EN 16931 fixtures beside the repository (../shared), read in place. */
const E_INVOICE_FIXTURES = path.resolve(REPO_ROOT, '..', 'shared', 'fixtures', 'e-invoices');
const E_INVOICES = [
  { file: 'factur-x-fr/Facture_FR_BASICWL.pdf', model: 'e-invoice:factur-x', number: 'FA-2017-0010' },
  { file: 'ubl/EN16931_Einfach.ubl.xml', model: 'e-invoice:ubl', number: '471102' },
];

const USAGE = 'usage: npm run e2e -- [--target local|cloud]';

async function main(): Promise<number> {
  const { values } = parseCommandArgs(process.argv.slice(2), { target: { type: 'string' } }, USAGE);
  if (values.target !== undefined && values.target !== 'local' && values.target !== 'cloud')
    throw new UsageError(`--target must be local or cloud (got ${values.target}). ${USAGE}`);
  const cloud = values.target === 'cloud';
  let target: Target | undefined;
  try {
    target = cloud ? await CloudTarget.start(process.env) : await LocalTarget.start();
    console.log(`docline e2e against the ${target.description}`);
    await run(target);
    console.log(`e2e passed in ${Math.round((Date.now() - started) / 1000)} s`);
    console.log(`e2e: ${passed} passed, 0 failed`);
    return 0;
  } catch (error) {
    endProgress();
    console.log(`FAIL ${error instanceof CheckFailed ? error.message : (error as Error).stack}`);
    console.log(`e2e: ${passed} passed, 1 failed`);
    return 1;
  } finally {
    await target?.close();
  }
}

runCommand('e2e', main);
