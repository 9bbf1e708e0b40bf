import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { sampleAnalysis } from '../../sim/samples';
import { SqliteStore } from '../../worker/src/adapters/stores/sqlite-store';
import { correctionOf } from '../../worker/src/contract/corrections';
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import { COLUMN_NAMES, type Row, sqliteTableDdl } from '../../worker/src/contract/row';
import { objectDedupKey, objectUri } from '../../worker/src/core/event';
import { testRow } from '../../worker/test/support/builders';
import {
  closeCertificate,
  duplicateInvoices,
  localObjects,
  readLedger,
  supplierIdentifiers,
} from '../lib/close';
import { LocalBucket } from '../lib/local-bucket';
import { monthRow, readMonth } from '../lib/month';
import { runLocalCommand } from './support/command';

const BUCKET = 'docline-local';

const invoice = (overrides: Record<string, unknown> = {}) =>
  sampleAnalysis({
    supplier_name: 'Atelier Dupont & Fils',
    supplier_siren: null,
    customer_name: null,
    issue_date: '2026-11-02',
    due_date: null,
    ...overrides,
  });

/** A data folder with a month of uploads: objects in the bucket, their rows, and the ledger. */
async function monthFolder(): Promise<{ dataDir: string; keys: Record<string, string> }> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'docline-close-'));
  const layout = dataDirLayout(dataDir);
  const bucket = new LocalBucket(layout.bucket);
  const store = new SqliteStore({ path: layout.sqlite });
  const keys: Record<string, string> = {};
  /** Uploads `name` on `day` and records its row (unless `row` is false). */
  const upload = async (
    name: string,
    day: string,
    row: Partial<Row> | false,
    contentType = 'application/pdf',
  ) => {
    const { resource } = await bucket.put(
      BUCKET,
      name,
      Buffer.from(name),
      contentType,
      new Date(`${day}T10:00:00Z`),
    );
    const ref = { bucket: BUCKET, name, generation: resource.generation };
    keys[name] = objectDedupKey(ref);
    if (row === false) return;
    await store.record(
      testRow({
        message_id: `m-${name}`,
        dedup_key: objectDedupKey(ref),
        object_uri: objectUri(BUCKET, name, resource.generation),
        bucket: BUCKET,
        object_name: name,
        generation: resource.generation,
        content_type: contentType,
        event_time: resource.timeCreated,
        publish_time: resource.timeCreated,
        ...row,
      }),
    );
  };
  await upload(
    'facture.xml',
    '2026-11-02',
    {
      model: 'e-invoice:cii',
      analysis: invoice(),
      total_tokens: 0,
      content_type: 'application/xml',
      e_invoice_validation: { verdict: 'valid' },
    },
    'application/xml',
  );
  // The PDF of the same invoice: its picture read a SIRET and the French VAT id's SIREN matches.
  await upload('scan-facture.pdf', '2026-11-03', {
    model: 'gemini-2.5-flash',
    analysis: invoice({
      supplier_vat_id: null,
      supplier_siret: '34567890100017',
      invoice_number: 'F 2026 0042',
    }),
    prompt_tokens: 1000,
    output_tokens: 500,
    total_tokens: 1500,
  });
  await upload('other.pdf', '2026-11-03', {
    analysis: invoice({
      invoice_number: 'F-2026-0099',
      total_amount: 99,
      net_amount: 82.5,
      tax_amount: 16.5,
    }),
    total_tokens: 900,
    delivery_attempt: 3,
  });
  await upload('bad.pdf', '2026-11-10', {
    status: 'rejected',
    reason: 'content_mismatch',
    analysis: null,
    model: null,
  });
  await upload('never-processed.pdf', '2026-11-12', false);
  await upload('october.pdf', '2026-10-31', { analysis: invoice({ invoice_number: 'OCT-1' }) });
  await store.close();
  // The ledger: a redelivery of the winning message, a doubled announcement answered twice.
  const at = '2026-11-03T10:00:01.000Z';
  const ledger = [
    { at, messageId: 'm-scan-facture.pdf', dedupKey: keys['scan-facture.pdf'], status: 'ok', tokens: 1500 },
    // A redelivery of the first message, then a second announcement of the object delivered twice.
    ...['m-scan-facture.pdf', 'm2-scan', 'm2-scan'].map((messageId) => ({
      at,
      messageId,
      dedupKey: keys['scan-facture.pdf'],
      status: 'duplicate',
      duplicateAt: 'seen',
      tokens: 0,
    })),
    { at, messageId: 'm-other.pdf', status: 'error', error: 'transient' },
  ];
  writeFileSync(layout.deliveries, `${ledger.map((e) => JSON.stringify(e)).join('\n')}\n{"torn`);
  return { dataDir, keys };
}

/** The certificate of 2026-11 for a data folder, dead letters not checked, made on 1 December. */
async function certifyNovember(dataDir: string) {
  const layout = dataDirLayout(dataDir);
  const { rows, stored, columns } = readMonth(layout.sqlite, '2026-11');
  return closeCertificate({
    month: '2026-11',
    dataDir,
    rows,
    stored,
    columns,
    objects: await localObjects(layout.bucket),
    ledger: readLedger(layout.deliveries),
    deadLetters: { checked: false, note: 'not running', items: [] },
    now: new Date('2026-12-01T08:00:00Z'),
  });
}

describe('npm run close', () => {
  let dataDir: string;
  let keys: Record<string, string>;
  beforeAll(async () => {
    ({ dataDir, keys } = await monthFolder());
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('states each figure of the month from the table, the bucket and the ledger', async () => {
    const certificate = await certifyNovember(dataDir);
    expect(certificate.rows.count).toBe(4);
    expect(certificate.outcomes).toEqual({ ok: 3, rejected: 1, eInvoices: 1, analysed: 2 });
    expect(certificate.reconcile).toMatchObject({
      objects: 5,
      withOneRow: 4,
      withoutRow: [`never-processed.pdf#${keys['never-processed.pdf']!.split('#')[1]}`],
      withSeveralRows: [],
    });
    expect(certificate.deliveries).toEqual({
      ledger: true,
      answers: 4,
      redeliveriesAbsorbed: 2,
      doubledAnnouncementsAbsorbed: 1,
      recordedAfterRetries: 1,
      failedAnswers: 1,
    });
    expect(certificate.paidTwice).toMatchObject({ count: 0, analysesPaid: 2, tokens: 2400 });
    expect(certificate.rejected).toEqual([
      { object: expect.stringMatching(/^bad\.pdf#/), reason: 'content_mismatch' },
    ]);
    expect(certificate.duplicates).toHaveLength(1);
    expect(certificate.duplicates[0]).toMatchObject({
      invoiceNumber: 'F-2026-0042',
      acrossFormats: true,
      matchedOn: ['siren:345678901'],
    });
    expect(certificate.duplicates[0]!.objects.map((o) => o.format)).toEqual([
      'e-invoice:cii',
      'picture (application/pdf)',
    ]);
    // The documents view carries the review verdict and the corrected fields: none open, none corrected.
    expect(certificate.review).toEqual({ recorded: true, open: [], corrected: 0 });
    expect(certificate.validation).toEqual({
      checked: 1,
      valid: 1,
      invalid: 0,
      unchecked: 0,
      invalidItems: [],
    });
    expect(certificate.perDay).toHaveLength(30);
    expect(certificate.perDay.find((d) => d.day === '2026-11-03')).toEqual({
      day: '2026-11-03',
      ok: 2,
      review: 0,
      rejected: 0,
    });
    expect(certificate.perDay.find((d) => d.day === '2026-11-10')).toMatchObject({ rejected: 1 });
  });

  it('writes the certificate as HTML (with the chart), PDF and JSON, then verifies it', async () => {
    const closed = await runLocalCommand('close.ts', ['--month', '2026-11'], dataDir);
    expect(closed.stderr).toBe('');
    expect(closed.code).toBe(0);
    expect(closed.stdout).toContain('0 analyses paid twice');
    const dir = path.join(dataDir, 'close', '2026-11');
    const html = readFileSync(path.join(dir, 'certificate.html'), 'utf8');
    expect(html).toContain('<svg');
    expect(html).toContain('documents per day by outcome');
    expect(html).toContain('1 invoice found in more than one object, 1 across formats.');
    const pdf = readFileSync(path.join(dir, 'certificate.pdf'));
    expect(pdf.subarray(0, 5).toString()).toBe('%PDF-');
    const { extractText, getDocumentProxy } = await import('unpdf');
    const { text } = await extractText(await getDocumentProxy(new Uint8Array(pdf)), { mergePages: true });
    const json = JSON.parse(readFileSync(path.join(dir, 'certificate.json'), 'utf8'));
    expect(text).toContain('Close certificate');
    expect(text.replace(/\s+/g, '')).toContain(json.rows.sha256);
    // The documents view's columns: the row's, then what corrections leave readable.
    expect(json.rows.columns).toEqual([...COLUMN_NAMES, 'original_analysis', 'corrected_fields']);

    const verified = await runLocalCommand('close.ts', ['--verify', '--month', '2026-11'], dataDir);
    expect(verified.code).toBe(0);
    expect(verified.stdout).toContain(`verified   2026-11: 4 rows, sha256 ${json.rows.sha256}`);
  });

  it('--verify fails, naming the row, once a row of the month has changed', async () => {
    const db = new DatabaseSync(dataDirLayout(dataDir).sqlite);
    db.prepare(
      "UPDATE rows SET analysis = json_set(analysis, '$.total_amount', 12.34) WHERE object_name = ?",
    ).run('other.pdf');
    db.close();
    const verified = await runLocalCommand('close.ts', ['--verify'], dataDir);
    expect(verified.code).toBe(1);
    expect(verified.stdout).toContain('CHANGED    2026-11');
    expect(verified.stdout).toContain(`  changed  ${keys['other.pdf']}`);
  });

  it('refuses a command line it cannot take (exit 2)', async () => {
    const noMonth = await runLocalCommand('close.ts', [], dataDir);
    expect(noMonth.code).toBe(2);
    expect(noMonth.stderr).toContain('--month YYYY-MM is required');
  });
});

describe('duplicate invoices once an accountant corrects a row', () => {
  it('are found on the corrected number and total, by the certificate and the duplicate_invoices view', async () => {
    const { dataDir, keys } = await monthFolder();
    try {
      const layout = dataDirLayout(dataDir);
      const certify = () => certifyNovember(dataDir);
      const grouped = (store: SqliteStore) =>
        store
          .view('duplicate_invoices')
          .map((r) => String(r.object_name))
          .sort();
      const objectsOf = (certificate: Awaited<ReturnType<typeof certify>>) =>
        certificate.duplicates.map((d) => d.objects.map((o) => o.object.split('#')[0]).sort());
      let store = new SqliteStore({ path: layout.sqlite });
      expect(objectsOf(await certify())).toEqual([['facture.xml', 'scan-facture.pdf']]);
      // The view keys a supplier by one identifier (VAT id first): the scan's SIRET is another key.
      expect(grouped(store)).toEqual([]);
      // other.pdf was read as F-2026-0099 for 99 €: the accountant finds it is F-2026-0042 too.
      const fix = (field: 'invoice_number' | 'total_amount', value: unknown) =>
        store.correct(
          correctionOf(
            { dedupKey: keys['other.pdf']!, field, value, replaces: null, by: 'claire', why: 'misread' },
            new Date('2026-11-20T09:00:00Z'),
          ),
        );
      await fix('invoice_number', 'F-2026-0042');
      await fix('total_amount', 1234.56);
      await store.close();
      store = new SqliteStore({ path: layout.sqlite });
      expect(objectsOf(await certify())).toEqual([['facture.xml', 'other.pdf', 'scan-facture.pdf']]);
      expect(grouped(store)).toEqual(['facture.xml', 'other.pdf']);
      await store.close();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('the close certificate reads the review verdict and corrections when the view has them', () => {
  // A documents view as issue 46's review adds it: a `review` verdict (none, or a list of reasons)
  // and the corrections the view applied. Made here by hand: the certificate must read them by name.
  it('counts open review items and corrected rows from a view that carries them', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'docline-close-review-'));
    try {
      const file = path.join(dir, 'docline.sqlite');
      const db = new DatabaseSync(file);
      db.exec(sqliteTableDdl('rows'));
      db.exec('ALTER TABLE rows ADD COLUMN corrections TEXT');
      db.exec('CREATE VIEW documents AS SELECT * FROM rows');
      // The row's own columns but its review verdict, then the verdict and the corrections given here.
      const own = COLUMN_NAMES.filter((c) => c !== 'review');
      const insert = db.prepare(
        `INSERT INTO rows (${[...own, 'review', 'corrections'].join(', ')}) VALUES (${[...own, 'review', 'corrections'].map(() => '?').join(', ')})`,
      );
      const put = (row: Row, review: unknown, corrections: unknown) =>
        insert.run(
          ...own.map((c) => {
            const v = row[c];
            return v !== null && typeof v === 'object' ? JSON.stringify(v) : (v as string | number | null);
          }),
          typeof review === 'string' ? review : JSON.stringify(review),
          corrections === null ? null : JSON.stringify(corrections),
        );
      put(testRow({ event_time: '2026-11-05T10:00:00Z', analysis: invoice() }), 'none', null);
      put(
        testRow({
          event_time: '2026-11-06T10:00:00Z',
          object_name: 'doubt.pdf',
          analysis: invoice({ invoice_number: 'X' }),
        }),
        ['arithmetic', { reason: 'below_threshold', field: 'total_amount' }],
        null,
      );
      put(
        testRow({ event_time: '2026-11-06T11:00:00Z', analysis: invoice({ invoice_number: 'Y' }) }),
        'none',
        [{ field: 'total_amount', value: 10, who: 'a', when: '2026-11-07', why: 'typo' }],
      );
      db.close();
      const { rows, stored, columns } = readMonth(file, '2026-11');
      const certificate = closeCertificate({
        month: '2026-11',
        dataDir: dir,
        rows,
        stored,
        columns,
        objects: [],
        ledger: undefined,
        deadLetters: { checked: false, note: '', items: [] },
        now: new Date(),
      });
      expect(certificate.review.recorded).toBe(true);
      expect(certificate.review.open).toEqual([
        { object: expect.any(String), reasons: 'arithmetic; below_threshold (total_amount)' },
      ]);
      expect(certificate.review.corrected).toBe(1);
      expect(certificate.perDay.find((d) => d.day === '2026-11-06')).toMatchObject({ ok: 1, review: 1 });
      expect(certificate.rows.columns).toEqual([...COLUMN_NAMES, 'corrections']);
      expect(certificate.deliveries.ledger).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('duplicate invoices across formats', () => {
  const row = (uri: string, model: string, a: Record<string, unknown>) =>
    monthRow({
      ...testRow({ object_uri: uri, model }),
      analysis: JSON.stringify(invoice(a)),
      e_invoice_validation: null,
    } as unknown as Record<string, string | number | null>);

  it('matches on a SIREN read from a SIRET or a French VAT id, the normalised number and the total', () => {
    expect(
      supplierIdentifiers({ supplier_vat_id: 'FR 12 345678901', supplier_siret: '345 678 901 00017' }),
    ).toEqual(['siret:34567890100017', 'siren:345678901', 'vat:FR12345678901']);
    const groups = duplicateInvoices([
      row('gs://b/a.xml#1', 'e-invoice:ubl', {}),
      row('gs://b/b.pdf#2', 'offline', {
        supplier_vat_id: null,
        supplier_siren: '345678901',
        invoice_number: 'f/2026/0042',
      }),
      // The same number and total from another supplier is another invoice.
      row('gs://b/c.pdf#3', 'offline', { supplier_vat_id: 'FR99999999999' }),
      // A different total is another invoice.
      row('gs://b/d.pdf#4', 'offline', { total_amount: 1234.5 }),
    ]);
    expect(groups).toHaveLength(1);
    expect(groups[0]!.objects.map((o) => o.object)).toEqual(['a.xml#1', 'b.pdf#2']);
    expect(groups[0]!.acrossFormats).toBe(true);
  });
});
