import { DatabaseSync } from 'node:sqlite';
import { insertSql, sqliteValues } from '../../src/adapters/stores/sqlite-store';
import {
  CORRECTION_COLUMN_NAMES,
  type Correction,
  correctionOf,
  sqliteCorrectionsDdl,
} from '../../src/contract/corrections';
import { type Row, sqliteTableDdl } from '../../src/contract/row';
import { VIEW_NAMES, viewSql } from '../../src/contract/views';
import { testRow } from './builders';

/**
 * Rows as BigQuery can hold them (no uniqueness), with each case of the views once: a race that
 * wrote one key twice, a tie on processed_at, a doubled notification in message mode, rejections,
 * an event that is not work, and two days. Shared by the dialect test and the emulator test.
 */
export const at = (time: string) => `2026-11-30T${time}.000Z`;
const objectColumns = (bucket: string, name: string, generation: string) => ({
  object_uri: `gs://${bucket}/${name}#${generation}`,
  bucket,
  object_name: name,
  generation,
});

/** A row of object `gs://b/<name>#<generation>` under `dedupKey`, recorded at `time`. */
const objectRow = (messageId: string, dedupKey: string, name: string, generation: string, time: string) =>
  testRow({
    message_id: messageId,
    dedup_key: dedupKey,
    ...objectColumns('b', name, generation),
    processed_at: at(time),
  });

export const VIEW_FIXTURE: Row[] = [
  // One key written twice by a race: the earlier row is the document.
  objectRow('m2', 'gs://b/a.pdf#1', 'a.pdf', '1', '10:00:01'),
  objectRow('m1', 'gs://b/a.pdf#1', 'a.pdf', '1', '10:00:00'),
  // A tie on processed_at: the smaller message_id wins.
  objectRow('m4', 'gs://b/tie.pdf#1', 'tie.pdf', '1', '11:00:00'),
  objectRow('m3', 'gs://b/tie.pdf#1', 'tie.pdf', '1', '11:00:00'),
  // Message mode: one object analysed under two message keys.
  objectRow('m5', 'm5', 'twice.pdf', '7', '12:00:00'),
  objectRow('m6', 'm6', 'twice.pdf', '7', '12:00:05'),
  // A rejection, an event that is not work (no object), a rejected duplicate of an ok object.
  testRow({
    message_id: 'm7',
    dedup_key: 'gs://b/big.pdf#3',
    ...objectColumns('b', 'big.pdf', '3'),
    status: 'rejected',
    reason: 'too_large',
    analysis: null,
    model: null,
    processed_at: at('13:00:00'),
  }),
  testRow({
    message_id: 'm8',
    dedup_key: 'm8',
    object_uri: null,
    bucket: null,
    object_name: null,
    generation: null,
    status: 'rejected',
    reason: 'unsupported_event_type',
    analysis: null,
    processed_at: '2026-12-01T00:30:00.000Z',
  }),
  testRow({
    message_id: 'm9',
    dedup_key: 'm9',
    ...objectColumns('b', 'a.pdf', '1'),
    status: 'rejected',
    reason: 'object_gone',
    analysis: null,
    processed_at: '2026-12-01T01:00:00.000Z',
  }),
];

/** An ok invoice row of its own object, for the duplicate_invoices cases. */
const invoiceRow = (
  id: string,
  name: string,
  fields: Record<string, string | number | null>,
  time: string,
  overrides: Partial<Row> = {},
) =>
  testRow({
    message_id: id,
    dedup_key: `gs://b/${name}#1`,
    ...objectColumns('b', name, '1'),
    // Uploaded half a minute before its row was recorded.
    event_time: new Date(Date.parse(at(time)) - 30_000).toISOString(),
    analysis: { document_type: 'invoice', ...fields },
    processed_at: at(time),
    ...overrides,
  });

/**
 * Invoices for `duplicate_invoices`: one invoice uploaded under two names with its VAT id and number
 * typed differently; a pair matched by SIRET (one also has a SIREN); a pair matched by name only,
 * one of them recorded twice by a race; and near misses (another total, another supplier's VAT id
 * with the same number, a rejected copy, an invoice without a number).
 */
export const INVOICE_FIXTURE: Row[] = [
  invoiceRow(
    'i1',
    'inv/facture-42.pdf',
    {
      supplier_vat_id: 'FR 12 345678901',
      supplier_name: 'Ravel SAS',
      invoice_number: 'F-2026-0042',
      total_amount: 1234.56,
    },
    '14:00:00',
  ),
  invoiceRow(
    'i2',
    'inv/scan-0001.pdf',
    {
      supplier_vat_id: 'fr12345678901',
      supplier_name: 'RAVEL SAS',
      invoice_number: 'f 2026/0042',
      total_amount: 1234.56,
    },
    '15:00:00',
  ),
  invoiceRow(
    'i3',
    'inv/facture-42-avoir.pdf',
    { supplier_vat_id: 'FR12345678901', invoice_number: 'F-2026-0042', total_amount: 99 },
    '15:10:00',
  ),
  invoiceRow(
    'i4',
    'inv/other-vat.pdf',
    {
      supplier_vat_id: 'DE999999999',
      supplier_siret: '12345678900012',
      invoice_number: 'INV-7',
      total_amount: 10,
    },
    '15:20:00',
  ),
  invoiceRow(
    'i5',
    'inv/siret-a.pdf',
    { supplier_siret: '123 456 789 00012', invoice_number: 'INV-7', total_amount: 10 },
    '15:30:00',
  ),
  invoiceRow(
    'i6',
    'inv/siret-b.pdf',
    {
      supplier_siret: '12345678900012',
      supplier_siren: '123456789',
      invoice_number: 'inv7',
      total_amount: 10,
    },
    '15:40:00',
  ),
  invoiceRow(
    'i7',
    'inv/name-a.pdf',
    { supplier_name: 'Acme Ltd', invoice_number: 'A1', total_amount: 5 },
    '16:00:00',
  ),
  invoiceRow(
    'i8',
    'inv/name-b.pdf',
    { supplier_name: 'ACME  LTD.', invoice_number: 'a-1', total_amount: 5 },
    '16:10:00',
  ),
  invoiceRow(
    'i9',
    'inv/name-a.pdf',
    { supplier_name: 'Acme Ltd', invoice_number: 'A1', total_amount: 5 },
    '16:20:00',
  ),
  invoiceRow(
    'i10',
    'inv/rejected-copy.pdf',
    { supplier_vat_id: 'FR12345678901', invoice_number: 'F-2026-0042', total_amount: 1234.56 },
    '16:30:00',
    { status: 'rejected', reason: 'content_mismatch' },
  ),
  invoiceRow(
    'i11',
    'inv/no-number-a.pdf',
    { supplier_name: 'Acme Ltd', invoice_number: null, total_amount: 5 },
    '16:40:00',
  ),
  invoiceRow(
    'i12',
    'inv/no-number-b.pdf',
    { supplier_name: 'Acme Ltd', invoice_number: null, total_amount: 5 },
    '16:50:00',
  ),
];

/**
 * An in-memory SQLite table `rows` holding the given rows, without the unique key (BigQuery
 * enforces none, and the fixture needs duplicate keys), with the three SQLite views over it.
 */
export function rowsDatabase(rows: Row[], corrections: readonly Correction[] = []): DatabaseSync {
  const db = new DatabaseSync(':memory:');
  db.exec(sqliteTableDdl('rows', { unique: false }));
  db.exec(sqliteCorrectionsDdl());
  const fix = db.prepare(
    `INSERT INTO corrections (${CORRECTION_COLUMN_NAMES.join(', ')}) VALUES (${CORRECTION_COLUMN_NAMES.map((c) => `:${c}`).join(', ')})`,
  );
  for (const correction of corrections) fix.run({ ...correction });
  for (const view of VIEW_NAMES) db.exec(`CREATE VIEW ${view} AS ${viewSql('sqlite', view, 'rows')}`);
  const insert = db.prepare(insertSql('rows'));
  for (const row of rows) insert.run(sqliteValues(row));
  return db;
}

/** Claire's correction of `field` of `key` at `time` (or her mark, `dealt_with`, of a reason). */
const fix = (
  key: string,
  field: string,
  value: unknown,
  time: string,
  replaces: string | null = null,
  why = 'test',
) => correctionOf({ dedupKey: key, field, value, replaces, by: 'claire', why }, new Date(time));

/**
 * Corrections of the fixture's rows: two fields of one key (one corrected twice, the later winning;
 * a tie on the time broken by the id), a value set to null, a key corrected that has two rows, and
 * a key with "dealt with" marks only (reasons without a correctable field: they change no value).
 */
export const CORRECTION_FIXTURE: Correction[] = (() => {
  const first = fix('gs://b/a.pdf#1', 'total_amount', 99.5, at('13:00:00'));
  const tieA = fix('gs://b/tie.pdf#1', 'invoice_number', 'T-1', at('13:00:00'));
  const tieB = fix('gs://b/tie.pdf#1', 'invoice_number', 'T-2', at('13:00:00'));
  return [
    first,
    fix('gs://b/a.pdf#1', 'total_amount', 100.25, at('13:05:00'), first.correction_id),
    fix('gs://b/a.pdf#1', 'supplier_name', 'Corrigé SARL', at('13:01:00')),
    fix('gs://b/a.pdf#1', 'due_date', null, at('13:02:00')),
    tieA,
    tieB,
    fix('m5', 'e_invoice_invalid', 'dealt_with', at('13:03:00'), null, 'supplier asked'),
    fix('m5', 'picture_xml_disagree:seller', 'dealt_with', at('13:04:00'), null, 'same company'),
  ];
})();

/**
 * Corrections of {@link INVOICE_FIXTURE} that change `duplicate_invoices`: the credit note's total
 * corrected to the invoice's (it joins the VAT id's group), and one of the SIRET pair's numbers
 * corrected to another (the pair is no duplicate any more).
 */
export const INVOICE_CORRECTIONS: Correction[] = [
  fix('gs://b/inv/facture-42-avoir.pdf#1', 'total_amount', 1234.56, at('17:00:00')),
  fix('gs://b/inv/siret-a.pdf#1', 'invoice_number', 'INV-8', at('17:01:00')),
];
