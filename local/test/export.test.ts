import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sampleAnalysis } from '../../sim/samples';
import { SqliteStore } from '../../worker/src/adapters/stores/sqlite-store';
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import type { Row } from '../../worker/src/contract/row';
import { testRow } from '../../worker/test/support/builders';
import {
  CSV_COLUMNS,
  csvExport,
  FEC_COLUMNS,
  fecEntries,
  fecText,
  fromLatin9,
  latin9,
  reviewCell,
  supplierAccount,
} from '../lib/export';
import { type MonthRow, monthRow, readMonth } from '../lib/month';
import { runLocalCommand } from './support/command';

/**
 * The FEC's fields as article A47 A-1 of the Livre des procédures fiscales lists them (VII, 1° to
 * 18°: "JournalCode … Idevise"), written out here from the text of the article and of
 * BOI-CF-IOR-60-40-20, which asks for these names, in this order, on the first line of a flat
 * file. The export is tested against this list, not against its own constant.
 */
const SPECIFICATION_FIELDS = [
  'JournalCode', // 1° le code journal de l'écriture comptable
  'JournalLib', // 2° le libellé journal
  'EcritureNum', // 3° le numéro sur une séquence continue de l'écriture comptable
  'EcritureDate', // 4° la date de comptabilisation
  'CompteNum', // 5° le numéro de compte (trois premiers caractères : plan comptable français)
  'CompteLib', // 6° le libellé de compte
  'CompAuxNum', // 7° le numéro de compte auxiliaire
  'CompAuxLib', // 8° le libellé de compte auxiliaire
  'PieceRef', // 9° la référence de la pièce justificative
  'PieceDate', // 10° la date de la pièce justificative
  'EcritureLib', // 11° le libellé de l'écriture comptable
  'Debit', // 12° le montant au débit
  'Credit', // 13° le montant au crédit
  'EcritureLet', // 14° le lettrage
  'DateLet', // 15° la date de lettrage
  'ValidDate', // 16° la date de validation de l'écriture
  'Montantdevise', // 17° le montant en devise
  'Idevise', // 18° l'identifiant de la devise
];

const analysis = (overrides: Record<string, unknown> = {}) =>
  sampleAnalysis({
    supplier_name: 'Atelier Numérique Ravel SAS',
    supplier_vat_id: 'FR40123456789',
    supplier_siren: '123456789',
    customer_name: 'Client',
    invoice_number: 'F-2026/0042',
    issue_date: '2026-11-03',
    due_date: '2026-12-03',
    net_amount: 1000,
    tax_amount: 200,
    total_amount: 1200,
    ...overrides,
  });

const month = (rows: Row[]): MonthRow[] =>
  rows.map((r) =>
    monthRow({
      ...r,
      analysis: r.analysis === null ? null : JSON.stringify(r.analysis),
      e_invoice_validation: r.e_invoice_validation === null ? null : JSON.stringify(r.e_invoice_validation),
    } as unknown as Record<string, string | number | null>),
  );

describe('the FEC export (article A47 A-1 LPF)', () => {
  const rows = month([
    testRow({ event_time: '2026-11-04T09:00:00.000Z', analysis: analysis() }),
    testRow({
      event_time: '2026-11-05T09:00:00.000Z',
      analysis: analysis({
        document_type: 'credit_note',
        invoice_number: 'AV-7',
        net_amount: 100,
        tax_amount: 20,
        total_amount: 120,
      }),
    }),
    testRow({
      event_time: '2026-11-06T09:00:00.000Z',
      status: 'rejected',
      reason: 'too_large',
      analysis: null,
    }),
    testRow({ event_time: '2026-11-07T09:00:00.000Z', analysis: analysis({ currency: 'USD' }) }),
    testRow({ event_time: '2026-11-08T09:00:00.000Z', analysis: analysis({ total_amount: 1300 }) }),
    testRow({
      event_time: '2026-11-09T09:00:00.000Z',
      analysis: analysis({ supplier_name: 'Œuvres € Ltd | Tab\there', tax_amount: null, total_amount: 1000 }),
    }),
  ]);

  it('writes the specification’s 18 field names, in order, as its first line', () => {
    expect(FEC_COLUMNS).toEqual(SPECIFICATION_FIELDS);
    const { text } = fecText(rows);
    expect(text.split('\r\n')[0]!.split('\t')).toEqual(SPECIFICATION_FIELDS);
  });

  it('gives every line the 18 fields, dates as AAAAMMJJ, amounts with a decimal comma', () => {
    const { lines } = fecEntries(rows);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      expect(line).toHaveLength(18);
      const field = (name: string) => line[SPECIFICATION_FIELDS.indexOf(name)]!;
      for (const date of ['EcritureDate', 'PieceDate', 'ValidDate']) expect(field(date)).toMatch(/^\d{8}$/);
      for (const amount of ['Debit', 'Credit']) expect(field(amount)).toMatch(/^\d+,\d{2}$/);
      // The account's first three characters are digits of the plan comptable.
      expect(field('CompteNum')).toMatch(/^\d{3}/);
      expect(field('EcritureLib')).not.toBe('');
      for (const f of line) expect(f).not.toMatch(/[\t\r\n]/);
    }
  });

  it('books an invoice: expense and VAT on the debit side, the supplier credited with the total', () => {
    const { lines } = fecEntries(rows);
    const first = lines.filter((l) => l[2] === lines[0]![2]);
    expect(first.map((l) => [l[4], l[11], l[12], l[6]])).toEqual([
      ['607000', '1000,00', '0,00', ''],
      ['445660', '200,00', '0,00', ''],
      ['401000', '0,00', '1200,00', 'F123456789'],
    ]);
    expect(first[0]!.slice(0, 4)).toEqual(['HA', 'Achats', 'HA202611-00001', '20261104']);
    expect(first[0]![8]).toBe('F-2026/0042');
    expect(first[0]![9]).toBe('20261103');
  });

  it('books a credit note the other way round, whatever the sign it is written with', () => {
    const printed = month([
      testRow({
        event_time: '2026-11-05T09:00:00.000Z',
        analysis: analysis({
          document_type: 'credit_note',
          invoice_number: 'AV-8',
          net_amount: -100,
          tax_amount: -20,
          total_amount: -120,
        }),
      }),
    ]);
    for (const [of, number] of [
      [rows, 'AV-7'],
      [printed, 'AV-8'],
    ] as const) {
      const { lines } = fecEntries(of);
      const credit = lines.filter((l) => l[8] === number);
      expect(credit.map((l) => [l[4], l[11], l[12]])).toEqual([
        ['607000', '0,00', '100,00'],
        ['445660', '0,00', '20,00'],
        ['401000', '120,00', '0,00'],
      ]);
      expect(credit[0]![10]).toBe(`Avoir ${number} Atelier Numérique Ravel SAS`);
    }
  });

  it('balances every entry and numbers the entries in one continuous sequence', () => {
    const { lines } = fecEntries(rows);
    const cents = (s: string) => Math.round(Number(s.replace(',', '.')) * 100);
    const entries = [...new Set(lines.map((l) => l[2]!))];
    expect(entries).toEqual(entries.map((_, i) => `HA202611-${String(i + 1).padStart(5, '0')}`));
    for (const entry of entries) {
      const of = lines.filter((l) => l[2] === entry);
      expect(of.reduce((s, l) => s + cents(l[11]!), 0)).toBe(of.reduce((s, l) => s + cents(l[12]!), 0));
    }
  });

  it('leaves out, with the reason, what it cannot book', () => {
    const { skipped } = fecEntries(rows);
    expect(skipped.map((s) => s.reason)).toEqual([
      'rejected: too_large',
      'in USD, not EUR: the FEC is kept in euros (convert it and book it by hand)',
      'net + VAT (1000 + 200) is not the total (1300)',
    ]);
  });

  it('writes ISO 8859-15 (A47 A-1, III): the euro sign and Œ are one byte each, separators never inside a field', () => {
    const { text } = fecText(rows);
    const bytes = latin9(text);
    expect(bytes.includes(0xa4)).toBe(true); // €
    expect(bytes.includes(0xbc)).toBe(true); // Œ
    expect(fromLatin9(bytes)).toBe(text);
    const line = text.split('\r\n').find((l) => l.includes('Œuvres'))!;
    expect(line.split('\t')).toHaveLength(18);
    expect(line).toContain('Œuvres € Ltd Tab here');
    // Without a VAT amount, the entry is the net on the expense and the total on the supplier.
    expect(
      text
        .split('\r\n')
        .filter((l) => l.includes('Œuvres'))
        .map((l) => l.split('\t')[4]),
    ).toEqual(['607000', '401000']);
  });

  it('names the supplier’s auxiliary account by its SIREN, else its VAT id, else its name', () => {
    expect(supplierAccount({ supplier_siret: '12345678900012' })).toBe('F123456789');
    expect(supplierAccount({ supplier_vat_id: 'DE 123 456 789' })).toBe('FDE123456789');
    expect(supplierAccount({ supplier_name: 'Café de la Gare' })).toBe('FCAFEDELAGARE');
  });
});

describe('the CSV export', () => {
  it('writes one RFC 4180 line per document, quoting what needs it', () => {
    const rows = month([
      testRow({
        event_time: '2026-11-04T09:00:00.000Z',
        object_name: 'a, "b".pdf',
        analysis: analysis(),
        e_invoice_validation: { verdict: 'invalid' },
      }),
      testRow({
        event_time: '2026-11-05T09:00:00.000Z',
        status: 'rejected',
        reason: 'too_large',
        analysis: null,
      }),
    ]);
    const lines = csvExport(rows).split('\r\n');
    expect(lines[0]).toBe(CSV_COLUMNS.join(','));
    expect(lines[1]).toContain('"a, ""b"".pdf"');
    expect(lines[1]).toContain(',1000,200,1200,');
    expect(lines[1]).toContain(',invalid,');
    expect(lines[2]!.startsWith('2026-11-05,')).toBe(true);
    expect(lines[2]).toContain(',rejected,too_large,');
    expect(lines.at(-1)).toBe('');
  });

  it('writes a review verdict as none or its reasons', () => {
    expect(reviewCell('none')).toBe('none');
    expect(reviewCell([])).toBe('none');
    expect(reviewCell(['arithmetic', { reason: 'below_threshold', field: 'total_amount' }])).toBe(
      'arithmetic; below_threshold (total_amount)',
    );
    expect(reviewCell(undefined)).toBe('');
  });
});

describe('npm run export', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'docline-export-'));
    const store = new SqliteStore({ path: dataDirLayout(dataDir).sqlite });
    await store.record(testRow({ event_time: '2026-11-04T09:00:00.000Z', analysis: analysis() }));
    await store.record(
      testRow({ event_time: '2026-10-31T23:59:59.000Z', analysis: analysis({ invoice_number: 'OCT' }) }),
    );
    await store.record(
      testRow({ event_time: '2026-12-01T00:00:00.000Z', analysis: analysis({ invoice_number: 'DEC' }) }),
    );
    await store.close();
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('selects the documents that arrived in the month (UTC)', () => {
    const { rows } = readMonth(dataDirLayout(dataDir).sqlite, '2026-11');
    expect(rows.map((r) => (r.analysis as { invoice_number: string }).invoice_number)).toEqual([
      'F-2026/0042',
    ]);
  });

  it('writes the FEC to --out in ISO 8859-15 and the CSV to stdout', async () => {
    const out = path.join(dataDir, '123456789FEC20261130.txt');
    const fec = await runLocalCommand(
      'export.ts',
      ['--month', '2026-11', '--format', 'fec', '--out', out],
      dataDir,
    );
    expect(fec.code).toBe(0);
    const text = fromLatin9(readFileSync(out));
    expect(text.split('\r\n')[0]).toBe(SPECIFICATION_FIELDS.join('\t'));
    expect(text).toContain('Atelier Numérique Ravel SAS');
    expect(text.split('\r\n').filter(Boolean)).toHaveLength(4);
    const csv = await runLocalCommand('export.ts', ['--month', '2026-11', '--format', 'csv'], dataDir);
    expect(csv.code).toBe(0);
    expect(csv.stdout.split('\r\n')).toHaveLength(3);
  });

  it('refuses a month that is not YYYY-MM and a format it does not know (exit 2)', async () => {
    const bad = await runLocalCommand('export.ts', ['--month', '2026-13', '--format', 'csv'], dataDir);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--month must be a month as YYYY-MM');
    const format = await runLocalCommand('export.ts', ['--month', '2026-11', '--format', 'xlsx'], dataDir);
    expect(format.code).toBe(2);
  });
});
