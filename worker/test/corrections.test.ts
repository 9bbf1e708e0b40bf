import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { emptyAnalysis } from '../src/adapters/analyzers/offline/invoice';
import { SQLITE_TABLE, SqliteStore } from '../src/adapters/stores/sqlite-store';
import {
  correctionOf,
  decide,
  InvalidCorrectionError,
  isMarkableReason,
  latestByField,
  MARKABLE_REASONS,
} from '../src/contract/corrections';
import { COLUMNS } from '../src/contract/row';
import { openReasons } from '../src/core/review';
import { testRow } from './support/builders';

const analysis = {
  ...emptyAnalysis(),
  document_type: 'invoice',
  language: 'fr',
  supplier_name: 'Atelier Ravel',
  invoice_number: 'F-2O26-0142',
  issue_date: '2026-11-30',
  currency: 'EUR',
  net_amount: 100,
  tax_amount: 20,
  total_amount: 120,
};

const at = (minute: number) => new Date(Date.UTC(2026, 10, 30, 12, minute));
const request = (field: string, value: unknown, replaces: string | null = null, key = 'gs://b/a.pdf#1') => ({
  dedupKey: key,
  field,
  value,
  replaces,
  by: 'claire',
  why: 'read on the picture',
});

describe('a correction', () => {
  it('is checked against the analysis schema: field, value and who', () => {
    expect(() => correctionOf(request('line_items', []), at(0))).toThrow(InvalidCorrectionError);
    expect(() => correctionOf(request('issue_date', '30/11/2026'), at(0))).toThrow(/issue_date/);
    expect(() => correctionOf(request('total_amount', '120'), at(0))).toThrow(/total_amount/);
    expect(() => correctionOf({ ...request('invoice_number', 'F-1'), by: ' ' }, at(0))).toThrow(/who/);
    expect(correctionOf(request('due_date', null), at(0)).value).toBe('null');
  });

  it('has the same id when it is the same change of the same state, whoever and whenever', () => {
    const a = correctionOf(request('invoice_number', 'F-2026-0142'), at(0));
    const b = correctionOf({ ...request('invoice_number', 'F-2026-0142'), by: 'marc' }, at(5));
    expect(a.correction_id).toBe(b.correction_id);
    const over = correctionOf(request('invoice_number', 'F-2026-0142', a.correction_id), at(6));
    expect(over.correction_id).not.toBe(a.correction_id);
  });

  it('is recorded over the latest it saw, already there when repeated, a conflict when stale', () => {
    const first = correctionOf(request('invoice_number', 'F-2026-0142'), at(0));
    expect(decide(first, []).status).toBe('recorded');
    expect(decide(first, [first]).status).toBe('already');
    const stale = correctionOf(request('invoice_number', 'F-2026-0143'), at(1));
    expect(decide(stale, [first])).toEqual({ status: 'conflict', latest: first });
    const next = correctionOf(request('invoice_number', 'F-2026-0143', first.correction_id), at(1));
    expect(decide(next, [first]).status).toBe('recorded');
    expect(latestByField([next, first]).get('invoice_number')).toBe(next);
  });
});

describe('a "dealt with" mark of a reason without a correctable field', () => {
  const mark = (reason: string, why: string | null = 'the supplier sends a corrected invoice') => ({
    ...request(reason, 'dealt_with'),
    why,
  });

  it('is a correction of the reason, valued "dealt_with", with its why', () => {
    const made = correctionOf(mark('e_invoice_invalid'), at(0));
    expect(made).toMatchObject({
      field: 'e_invoice_invalid',
      value: '"dealt_with"',
      why: 'the supplier sends a corrected invoice',
    });
    expect(correctionOf(mark('picture_xml_disagree:seller'), at(0)).field).toBe(
      'picture_xml_disagree:seller',
    );
  });

  it('is refused without a why, with another value, or for a reason a correction closes', () => {
    expect(() => correctionOf(mark('e_invoice_invalid', null), at(0))).toThrow(/needs a why/);
    expect(() => correctionOf(mark('e_invoice_invalid', '  '), at(0))).toThrow(InvalidCorrectionError);
    expect(() => correctionOf({ ...mark('e_invoice_invalid'), value: 'fine' }, at(0))).toThrow(/dealt_with/);
    // A reason about a correctable field is closed by correcting the field, not by a mark.
    expect(() => correctionOf(mark('picture_xml_disagree:total_amount'), at(0))).toThrow(
      InvalidCorrectionError,
    );
    expect(() => correctionOf(mark('low_confidence:invoice_number'), at(0))).toThrow(/cannot be corrected/);
    expect(() => correctionOf(mark('arithmetic'), at(0))).toThrow(/cannot be corrected/);
    expect(() => correctionOf(mark('unknown_reason'), at(0))).toThrow(/cannot be corrected/);
  });

  it('names the reasons it applies to', () => {
    expect(MARKABLE_REASONS.every(isMarkableReason)).toBe(true);
    expect(isMarkableReason('picture_xml_disagree:invoice_number')).toBe(false);
    expect(isMarkableReason('missing:supplier_name')).toBe(false);
  });

  it('is idempotent like any correction: the same mark twice is one, whatever the why', () => {
    const a = correctionOf(mark('e_invoice_invalid'), at(0));
    const b = correctionOf({ ...mark('e_invoice_invalid', 'another tab'), by: 'marc' }, at(4));
    expect(b.correction_id).toBe(a.correction_id);
    expect(decide(b, [a]).status).toBe('already');
  });

  it('closes its reason, and only it; a field correction still closes the reasons about the field', () => {
    const review = 'e_invoice_invalid picture_xml_disagree:seller picture_xml_disagree:total_amount';
    expect(openReasons(review, ['e_invoice_invalid'])).toEqual([
      'picture_xml_disagree:seller',
      'picture_xml_disagree:total_amount',
    ]);
    expect(openReasons(review, ['picture_xml_disagree:seller', 'total_amount'])).toEqual([
      'e_invoice_invalid',
    ]);
    // A mark of a reason a field closes closes nothing (it could not be written anyway).
    expect(openReasons('low_confidence:invoice_number', ['low_confidence:invoice_number'])).toEqual([
      'low_confidence:invoice_number',
    ]);
  });
});

describe('SqliteStore corrections and the documents view', () => {
  let store: SqliteStore;
  const row = testRow({ dedup_key: 'gs://b/a.pdf#1', analysis, review: 'low_confidence:invoice_number' });
  beforeEach(async () => {
    store = new SqliteStore({ path: ':memory:' });
    await store.record(row);
  });
  afterEach(() => store.close());

  const document = () => store.correctedDocuments({ dedupKey: row.dedup_key })[0]!;
  const correct = (field: string, value: unknown, replaces: string | null, minute: number) =>
    store.correct(correctionOf(request(field, value, replaces), at(minute)));

  it('applies a correction in the view, keeps the analysed value readable, and never touches the row', async () => {
    const outcome = await correct('invoice_number', 'F-2026-0142', null, 0);
    expect(outcome.status).toBe('recorded');
    const doc = document();
    expect(doc.analysis).toMatchObject({ invoice_number: 'F-2026-0142', total_amount: 120 });
    expect(doc.original_analysis).toEqual(analysis);
    expect(doc.corrected_fields).toEqual(['invoice_number']);
    // The raw row is as it was written, and alone under its key.
    expect(store.rowsFor(row.dedup_key)).toEqual([expect.objectContaining({ analysis, review: row.review })]);
    expect(store.documents()).toHaveLength(1);
  });

  it('keeps one correction for the same correction made twice (a retry, a second tab)', async () => {
    expect((await correct('invoice_number', 'F-2026-0142', null, 0)).status).toBe('recorded');
    expect((await correct('invoice_number', 'F-2026-0142', null, 3)).status).toBe('already');
    expect(store.corrections(row.dedup_key)).toHaveLength(1);
  });

  it('refuses a correction made over a state that changed meanwhile, and takes the latest over it', async () => {
    const first = await correct('invoice_number', 'F-2026-0142', null, 0);
    const stale = await correct('invoice_number', 'F-2026-9999', null, 1);
    expect(stale).toMatchObject({ status: 'conflict', latest: { value: '"F-2026-0142"' } });
    if (first.status !== 'recorded') throw new Error('first not recorded');
    expect((await correct('invoice_number', 'F-2026-0143', first.correction.correction_id, 2)).status).toBe(
      'recorded',
    );
    expect(document().analysis).toMatchObject({ invoice_number: 'F-2026-0143' });
    expect(store.corrections(row.dedup_key)).toHaveLength(2);
  });

  it('applies a value set back to null, numbers as numbers, and corrections of several fields', async () => {
    await correct('currency', null, null, 0);
    await correct('total_amount', 121.5, null, 0);
    const doc = document();
    expect(doc.analysis).toMatchObject({ currency: null, total_amount: 121.5, net_amount: 100 });
    expect(Object.keys(doc.analysis as object)).toEqual(Object.keys(analysis));
    expect(doc.corrected_fields).toEqual(['currency', 'total_amount']);
  });

  it('records a mark once, beside the row: its reason closes, the analysis is untouched', async () => {
    const marked = testRow({ analysis, review: 'e_invoice_invalid low_confidence:invoice_number' });
    await store.record(marked);
    const mark = (why: string, minute: number) =>
      store.correct(
        correctionOf(
          { ...request('e_invoice_invalid', 'dealt_with', null, marked.dedup_key), why },
          at(minute),
        ),
      );
    expect((await mark('BR-CO-15 is the supplier’s rounding; booked as sent', 0)).status).toBe('recorded');
    expect((await mark('again, from a second tab', 2)).status).toBe('already');
    expect(store.corrections(marked.dedup_key)).toHaveLength(1);
    const doc = store.correctedDocuments({ dedupKey: marked.dedup_key })[0]!;
    expect(doc.analysis).toEqual(analysis);
    expect(doc.corrected_fields).toEqual(['e_invoice_invalid']);
    expect(openReasons(doc.review, doc.corrected_fields)).toEqual(['low_confidence:invoice_number']);
    expect(store.rowsFor(marked.dedup_key)).toEqual([
      expect.objectContaining({ analysis, review: marked.review }),
    ]);
  });

  it('leaves uncorrected rows exactly as analysed', async () => {
    const other = testRow({ analysis });
    await store.record(other);
    await correct('invoice_number', 'F-1', null, 0);
    const doc = store.correctedDocuments({ dedupKey: other.dedup_key })[0]!;
    expect(doc.analysis).toEqual(analysis);
    expect(doc.corrected_fields).toEqual([]);
  });
});

describe('SqliteStore on a database file of an earlier version', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'docline-migrate-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** A file whose table lacks the `missing` columns, with a plain documents view and the row `insert`. */
  const oldFile = (missing: string[], insert: string) => {
    const file = path.join(dir, 'old.sqlite');
    const old = new DatabaseSync(file);
    const before = COLUMNS.filter((c) => !missing.includes(c.name));
    old.exec(
      `CREATE TABLE ${SQLITE_TABLE} (${before.map((c) => `${c.name} ${c.type === 'INT64' ? 'INTEGER' : 'TEXT'}${c.name === 'dedup_key' ? ' UNIQUE' : ''}`).join(', ')}) STRICT`,
    );
    old.exec(`CREATE VIEW documents AS SELECT * FROM ${SQLITE_TABLE}`);
    old.exec(`INSERT INTO ${SQLITE_TABLE} ${insert}`);
    old.close();
    return file;
  };

  it('adds the new columns and replaces the views, keeping the rows', async () => {
    const file = oldFile(
      ['confidence', 'review'],
      `(message_id, dedup_key, status, processed_at, worker_version, analysis) VALUES ('m1', 'k1', 'ok', '2026-11-30T00:00:00.000Z', 'old', '{"invoice_number":"A"}')`,
    );
    const store = new SqliteStore({ path: file });
    const [doc] = store.correctedDocuments();
    expect(doc).toMatchObject({ dedup_key: 'k1', confidence: null, review: null, corrected_fields: [] });
    await store.correct(correctionOf(request('invoice_number', 'B', null, 'k1'), at(0)));
    expect(store.correctedDocuments()[0]!.analysis).toMatchObject({ invoice_number: 'B' });
    await store.close();
    // Opened again: nothing left to migrate, the view stays.
    const again = new SqliteStore({ path: file });
    expect(again.correctedDocuments()[0]!.analysis).toMatchObject({ invoice_number: 'B' });
    await again.close();
  });

  it('gets a new NULLABLE column (e_invoice_validation), keeps its rows, and its views show it', async () => {
    const file = oldFile(
      ['e_invoice_validation'],
      `(message_id, dedup_key, status, processed_at, worker_version) VALUES ('1', 'k-old', 'ok', '2026-11-01T00:00:00.000Z', 'v0')`,
    );
    const store = new SqliteStore({ path: file });
    await store.record(testRow({ dedup_key: 'k-new', e_invoice_validation: { verdict: 'valid' } }));
    expect(store.rowsFor('k-old')[0]).toMatchObject({ e_invoice_validation: null, worker_version: 'v0' });
    expect(store.documents().map((r) => [r.dedup_key, r.e_invoice_validation])).toEqual([
      ['k-old', null],
      ['k-new', { verdict: 'valid' }],
    ]);
    await store.close();
    // A second store on the same file finds the column there.
    const again = new SqliteStore({ path: file });
    expect(again.documents()).toHaveLength(2);
    await again.close();
  });
});
