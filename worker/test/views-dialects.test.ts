import type { DatabaseSync } from 'node:sqlite';
import { CORRECTABLE_FIELDS, type Correction, latestByField } from '../src/contract/corrections';
import { COLUMN_NAMES, type Row } from '../src/contract/row';
import { VIEW_NAMES, type ViewName, viewSql } from '../src/contract/views';
import {
  CORRECTION_FIXTURE,
  INVOICE_CORRECTIONS,
  INVOICE_FIXTURE,
  rowsDatabase,
  VIEW_FIXTURE,
} from './support/view-fixture';

/** Every case of every view, in one table. */
const ALL_ROWS = [...VIEW_FIXTURE, ...INVOICE_FIXTURE];
const ALL_CORRECTIONS = [...CORRECTION_FIXTURE, ...INVOICE_CORRECTIONS];

/*
 * The views mean the same in both dialects. There is no BigQuery here, so:
 * 1. the SQLite SQL runs in node:sqlite on a fixture whose answers are computed independently in
 *    TypeScript below;
 * 2. the GoogleSQL text is translated, construct by construct, into SQLite (QUALIFY → a ranked
 *    subquery, COUNTIF → SUM(CASE…), SAFE_DIVIDE → division guarded against 0, STRING_AGG →
 *    group_concat, DATE → date, backticks dropped) and must give the same answers; the translator
 *    refuses any GoogleSQL construct it does not know, so a new one cannot slip through untested;
 * 3. the GoogleSQL keeps the exact dedup rule (QUALIFY ROW_NUMBER over dedup_key, same order).
 * Limits: the translation proves the structure, not BigQuery's engine (types of the outputs differ:
 * TIMESTAMP vs ISO text, FLOAT64 vs REAL). The bigquery-emulator suite runs the GoogleSQL for real.
 * Timestamps are compared as text in SQLite: right only because the worker always writes
 * `toISOString()` (fixed width, UTC, milliseconds).
 */

// ---- Expected answers, computed without SQL -------------------------------------------------

const byFirst = (a: Row, b: Row) =>
  a.processed_at === b.processed_at
    ? a.message_id.localeCompare(b.message_id)
    : a.processed_at.localeCompare(b.processed_at);

/** The first row of each key, in the order of their first rows. */
function firstRows(rows: Row[]): Row[] {
  const first = new Map<string, Row>();
  for (const row of [...rows].sort(byFirst)) if (!first.has(row.dedup_key)) first.set(row.dedup_key, row);
  return [...first.values()];
}

function expectedDocuments(rows: Row[]): Array<Pick<Row, 'dedup_key' | 'message_id'>> {
  return firstRows(rows).map((r) => ({ dedup_key: r.dedup_key, message_id: r.message_id }));
}

/**
 * Each document's analysis with the latest correction of each field set, and the fields corrected;
 * a "dealt with" mark (its field a review reason) is named among them but sets no value.
 */
function expectedCorrected(rows: Row[], corrections: readonly Correction[]) {
  const correctable = new Set<string>(CORRECTABLE_FIELDS);
  return firstRows(rows).map((row) => {
    const latest = latestByField(corrections.filter((c) => c.dedup_key === row.dedup_key));
    const values = [...latest].filter(([field]) => correctable.has(field));
    const analysis = { ...(row.analysis as Record<string, unknown>) };
    for (const [field, c] of values) analysis[field] = JSON.parse(c.value);
    return {
      dedup_key: row.dedup_key,
      analysis: values.length === 0 ? row.analysis : analysis,
      values: values.length,
      original_analysis: row.analysis,
      corrected_fields: latest.size === 0 ? null : [...latest.keys()].sort().join(','),
    };
  });
}

/** The `documents` view's rows: the first row of each key, its analysis corrected. */
function correctedDocuments(rows: Row[], corrections: readonly Correction[]): Row[] {
  const analyses = new Map(expectedCorrected(rows, corrections).map((d) => [d.dedup_key, d.analysis]));
  return firstRows(rows).map((row) => ({
    ...row,
    analysis: analyses.get(row.dedup_key) as Row['analysis'],
  }));
}

function expectedDuplicateObjects(rows: Row[]) {
  const ok = rows.filter((r) => r.status === 'ok' && r.object_uri !== null);
  return [...Map.groupBy(ok, (r) => r.object_uri!).entries()]
    .filter(([, group]) => group.length > 1)
    .map(([uri, group]) => {
      const sorted = [...group].sort(byFirst);
      return {
        object_uri: uri,
        ok_rows: group.length,
        message_ids: sorted.map((r) => r.message_id).join(','),
        first_processed_at: sorted[0]!.processed_at,
        last_processed_at: sorted.at(-1)!.processed_at,
      };
    });
}

function expectedDeliveryStats(rows: Row[]) {
  return [...Map.groupBy(rows, (r) => r.processed_at.slice(0, 10)).entries()].map(([day, group]) => {
    const ok = group.filter((r) => r.status === 'ok');
    const duplicates = group.length - new Set(group.map((r) => r.dedup_key)).size;
    return {
      day,
      row_count: group.length,
      ok_rows: ok.length,
      rejected_rows: group.filter((r) => r.status === 'rejected').length,
      duplicate_rows: duplicates,
      duplicate_rate: duplicates / group.length,
      doubled_object_rows: ok.length - new Set(ok.map((r) => r.object_uri).filter((u) => u !== null)).size,
    };
  });
}

/** Normalised as the view says, written out separately from its SQL. */
const normalisedId = (value: unknown) => {
  const text = typeof value === 'string' ? value.replace(/[ ./_-]/g, '').toUpperCase() : '';
  return text === '' ? null : text;
};

function supplierKey(a: Record<string, unknown>): string | null {
  const vat = normalisedId(a.supplier_vat_id);
  if (vat) return `vat:${vat}`;
  const siret = normalisedId(a.supplier_siret);
  if (siret) return `siret:${siret}`;
  const siren = normalisedId(a.supplier_siren);
  if (siren) return `siren:${siren}`;
  const name =
    typeof a.supplier_name === 'string' ? a.supplier_name.replace(/[ .,'-]/g, '').toLowerCase() : '';
  return name ? `name:${name}` : null;
}

function expectedDuplicateInvoices(rows: Row[]) {
  const objects = new Map<string, { key: string; rows: Row[] }>();
  for (const row of rows.filter((r) => r.status === 'ok' && r.object_uri !== null)) {
    const a = (row.analysis ?? {}) as Record<string, unknown>;
    const supplier = supplierKey(a);
    const number = normalisedId(a.invoice_number);
    const total = typeof a.total_amount === 'number' ? a.total_amount : null;
    if (supplier === null || number === null || total === null) continue;
    const key = JSON.stringify([supplier, number, total]);
    const id = `${key}|${row.object_uri}`;
    objects.set(id, { key, rows: [...(objects.get(id)?.rows ?? []), row] });
  }
  const groupSize = new Map<string, number>();
  for (const { key } of objects.values()) groupSize.set(key, (groupSize.get(key) ?? 0) + 1);
  return [...objects.values()]
    .filter(({ key }) => groupSize.get(key)! > 1)
    .map(({ key, rows: group }) => {
      const [supplier, number, total] = JSON.parse(key) as [string, string, number];
      const min = (values: Array<string | null>) => values.filter((v) => v !== null).sort()[0] ?? null;
      return {
        supplier_key: supplier,
        invoice_number_key: number,
        total_amount: total,
        group_objects: groupSize.get(key)!,
        object_uri: group[0]!.object_uri,
        arrived_at: min(group.map((r) => r.event_time ?? r.processed_at)),
        first_processed_at: min(group.map((r) => r.processed_at)),
      };
    });
}

// ---- GoogleSQL → SQLite, construct by construct ---------------------------------------------

/** Translates the GoogleSQL of a view into SQLite; throws on any GoogleSQL-only construct it does not know. */
function googleSqlToSqlite(sql: string, table: string): string {
  let out = sql
    .replaceAll(`\`${table}\``, 'rows')
    .replaceAll(`\`${table.replace(/[^.]+$/, 'corrections')}\``, 'corrections');
  out = out.replace(
    /FROM (\w+) WHERE TRUE QUALIFY (ROW_NUMBER\(\) OVER \([^)]*\)) = 1/g,
    'FROM (SELECT *, $2 AS qualify_rank FROM $1) WHERE qualify_rank = 1',
  );
  out = out
    .replace(/JSON_SET\(/g, 'json_set(')
    .replace(/JSON_QUERY\(/g, 'json_extract(')
    .replace(/PARSE_JSON\(/g, 'json(')
    .replace(/COUNTIF\(([^()]+)\)/g, 'SUM(CASE WHEN $1 THEN 1 ELSE 0 END)')
    .replace(/SAFE_DIVIDE\((.+?), (COUNT\(\*\))\)/g, 'CAST($1 AS REAL) / NULLIF($2, 0)')
    .replace(/STRING_AGG\(/g, 'group_concat(')
    .replace(/JSON_VALUE\(/g, 'json_extract(')
    // A quote as a double-quoted GoogleSQL string; double quotes are identifiers in SQLite.
    .replaceAll(`"'"`, "''''")
    .replace(/SAFE_CAST\((json_extract\(analysis, '[$.\w]+'\)) AS NUMERIC\)/g, 'CAST($1 AS REAL)')
    .replace(/CAST\((\w+) AS FLOAT64\)/g, '$1')
    .replace(/\bDATE\(/g, 'date(');
  const leftover =
    /`|"|QUALIFY|COUNTIF|SAFE_DIVIDE|STRING_AGG|SAFE\.|SAFE_CAST|JSON_VALUE|JSON_SET|JSON_QUERY|PARSE_JSON|NUMERIC|FLOAT64|\bDATE\(|TIMESTAMP_|FORMAT_|ARRAY_AGG|STRUCT/.exec(
      out,
    );
  if (leftover) throw new Error(`untranslated GoogleSQL construct: ${leftover[0]}`);
  return out;
}

// ---------------------------------------------------------------------------------------------

const TABLE = 'acme-dev.docline.rows';

const run = (db: DatabaseSync, sql: string) =>
  db
    .prepare(sql)
    .all()
    .map((r) => ({ ...r })) as Array<Record<string, unknown>>;

const sortBy = (key: string) => (a: Record<string, unknown>, b: Record<string, unknown>) =>
  String(a[key]).localeCompare(String(b[key]));

const pick = (rows: Array<Record<string, unknown>>, keys: string[]) =>
  rows.map((r) => Object.fromEntries(keys.map((k) => [k, r[k]])));

describe('views in both dialects', () => {
  let db: DatabaseSync;
  beforeEach(() => {
    db = rowsDatabase(ALL_ROWS, ALL_CORRECTIONS);
  });
  afterEach(() => db.close());

  const dialects: Array<[string, (view: ViewName) => string]> = [
    ['SQLite', (view) => viewSql('sqlite', view, 'rows')],
    ['GoogleSQL (translated)', (view) => googleSqlToSqlite(viewSql('googlesql', view, TABLE), TABLE)],
  ];

  describe.each(dialects)('%s', (_dialect, sqlOf) => {
    it('documents: one row per dedup key, the first recorded (ties broken by message_id)', () => {
      const rows = run(db, sqlOf('documents')).sort(sortBy('dedup_key'));
      expect(pick(rows, ['dedup_key', 'message_id'])).toEqual(
        expectedDocuments(ALL_ROWS).sort((a, b) => a.dedup_key.localeCompare(b.dedup_key)),
      );
      expect(Object.keys(rows[0]!)).toEqual([...COLUMN_NAMES, 'original_analysis', 'corrected_fields']);
    });

    it('documents: the latest correction of each field applied, the analysed value kept', () => {
      const rows = run(db, sqlOf('documents'))
        .map((r) => ({
          dedup_key: r.dedup_key,
          analysis: JSON.parse(String(r.analysis)),
          original_analysis: JSON.parse(String(r.original_analysis)),
          corrected_fields: r.corrected_fields,
        }))
        .sort(sortBy('dedup_key'));
      const expected = expectedCorrected(ALL_ROWS, ALL_CORRECTIONS).sort(sortBy('dedup_key'));
      // A corrected analysis holds every correctable field (null when the analysis had none); one
      // with marks only is the analysed one, exactly.
      expect(rows).toEqual(
        expected.map(({ values, ...e }) => ({
          ...e,
          analysis: values > 0 ? expect.objectContaining(e.analysis as object) : e.analysis,
        })),
      );
      const fixed = rows.find((r) => r.dedup_key === 'gs://b/a.pdf#1')!;
      expect(fixed.analysis).toMatchObject({
        total_amount: 100.25,
        supplier_name: 'Corrigé SARL',
        due_date: null,
      });
      expect(fixed.corrected_fields).toBe('due_date,supplier_name,total_amount');
    });

    it('documents: a "dealt with" mark is named in corrected_fields and changes no value', () => {
      const rows = run(db, sqlOf('documents'));
      const marked = rows.find((r) => r.dedup_key === 'm5')!;
      expect(marked.corrected_fields).toBe('e_invoice_invalid,picture_xml_disagree:seller');
      // The analysis column is the analysed text itself: no field added, nothing rewritten.
      expect(marked.analysis).toBe(marked.original_analysis);
      expect(JSON.parse(String(marked.analysis))).toEqual(
        VIEW_FIXTURE.find((r) => r.message_id === 'm5')!.analysis,
      );
    });

    it('duplicate_objects: objects with more than one ok row, rejections aside', () => {
      const rows = run(db, sqlOf('duplicate_objects')).sort(sortBy('object_uri'));
      expect(
        pick(rows, ['object_uri', 'ok_rows', 'message_ids', 'first_processed_at', 'last_processed_at']),
      ).toEqual(expectedDuplicateObjects(ALL_ROWS).sort(sortBy('object_uri')));
    });

    it('delivery_stats: per day, rows by status, rows beyond the first per key, doubled objects', () => {
      const rows = run(db, sqlOf('delivery_stats')).sort(sortBy('day'));
      expect(rows).toEqual(expectedDeliveryStats(ALL_ROWS).sort(sortBy('day')));
    });

    it('duplicate_invoices: ok rows of different objects with one supplier, invoice number and total', () => {
      const rows = run(db, sqlOf('duplicate_invoices')).sort(sortBy('object_uri'));
      expect(
        pick(rows, [
          'supplier_key',
          'invoice_number_key',
          'total_amount',
          'group_objects',
          'object_uri',
          'arrived_at',
          'first_processed_at',
        ]),
      ).toEqual(
        expectedDuplicateInvoices(correctedDocuments(ALL_ROWS, ALL_CORRECTIONS)).sort(sortBy('object_uri')),
      );
      expect(Object.keys(rows[0]!)).toEqual([
        'supplier_key',
        'invoice_number_key',
        'total_amount',
        'group_objects',
        'object_uri',
        'object_name',
        'supplier_name',
        'invoice_number',
        'arrived_at',
        'first_processed_at',
      ]);
    });
  });

  it('the fixture exercises every case (so the comparisons above can fail)', () => {
    expect(expectedDocuments(VIEW_FIXTURE).length).toBeLessThan(VIEW_FIXTURE.length);
    expect(expectedDuplicateObjects(VIEW_FIXTURE).map((d) => d.object_uri)).toEqual([
      'gs://b/a.pdf#1',
      'gs://b/tie.pdf#1',
      'gs://b/twice.pdf#7',
    ]);
    expect(expectedDeliveryStats(VIEW_FIXTURE).map((d) => d.duplicate_rows)).toEqual([2, 0]);
    // One invoice under two names (VAT id and number typed differently), a SIRET pair (one with a
    // SIREN too), a name-only pair with one object recorded twice; the near misses stay out.
    const groups = (rows: Row[]) =>
      expectedDuplicateInvoices(rows)
        .map((d) => [d.supplier_key, d.object_uri!.replace('gs://b/inv/', '')])
        .sort();
    expect(groups(INVOICE_FIXTURE)).toEqual([
      ['name:acmeltd', 'name-a.pdf#1'],
      ['name:acmeltd', 'name-b.pdf#1'],
      ['siret:12345678900012', 'siret-a.pdf#1'],
      ['siret:12345678900012', 'siret-b.pdf#1'],
      ['vat:FR12345678901', 'facture-42.pdf#1'],
      ['vat:FR12345678901', 'scan-0001.pdf#1'],
    ]);
    // The corrections move the credit note into the VAT id's group and the SIRET pair out of theirs.
    expect(groups(correctedDocuments(INVOICE_FIXTURE, INVOICE_CORRECTIONS))).toEqual([
      ['name:acmeltd', 'name-a.pdf#1'],
      ['name:acmeltd', 'name-b.pdf#1'],
      ['vat:FR12345678901', 'facture-42-avoir.pdf#1'],
      ['vat:FR12345678901', 'facture-42.pdf#1'],
      ['vat:FR12345678901', 'scan-0001.pdf#1'],
    ]);
  });

  it.each(VIEW_NAMES)('%s has the same output columns in both dialects', (view) => {
    const sqlite = run(db, viewSql('sqlite', view, 'rows'));
    const google = run(db, googleSqlToSqlite(viewSql('googlesql', view, TABLE), TABLE));
    expect(Object.keys(google[0]!)).toEqual(Object.keys(sqlite[0]!));
  });
});

describe('the GoogleSQL views', () => {
  it('deduplicate with QUALIFY ROW_NUMBER over dedup_key, in the order SQLite uses', () => {
    const google = viewSql('googlesql', 'documents', TABLE);
    const sqlite = viewSql('sqlite', 'documents', 'rows');
    const window = 'ROW_NUMBER() OVER (PARTITION BY dedup_key ORDER BY processed_at, message_id)';
    expect(google).toContain(`QUALIFY ${window} = 1`);
    expect(sqlite).toContain(window);
  });

  it('quote the table (documents and duplicate_invoices: and the corrections beside it) and name no other table', () => {
    const corrections = '`acme-dev.docline.corrections`';
    for (const view of VIEW_NAMES) {
      const sql = viewSql('googlesql', view, TABLE);
      expect(sql).toContain(`FROM \`${TABLE}\``);
      // Other FROMs read the view's own named subqueries only.
      expect(sql.match(/`[^`]*`/g)).toEqual(
        view === 'documents' || view === 'duplicate_invoices'
          ? [`\`${TABLE}\``, corrections]
          : [`\`${TABLE}\``],
      );
      for (const from of sql.match(/FROM [^\s)]+/g) ?? []) {
        expect(from).toMatch(
          /^FROM (`acme-dev\.docline\.rows`|`acme-dev\.docline\.corrections`|documents|keyed|objects|first|latest|\(SELECT)$/,
        );
      }
    }
  });

  it('are refused by the translator when they use a construct it does not know', () => {
    expect(() => googleSqlToSqlite('SELECT ARRAY_AGG(x) FROM `p.d.t`', 'p.d.t')).toThrow(/ARRAY_AGG/);
  });
});
