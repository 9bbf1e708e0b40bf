import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { COLUMNS } from '../../worker/src/contract/row';
import { UsageError } from './args';

/**
 * A month of the local table, as `npm run export` and `npm run close` read it: the rows of the
 * `documents` view (so whatever the view applies, corrections included, is what they see) whose
 * document arrived in that month, UTC. A document arrived on the day of its key
 * (contract/row.ts, `keyDay`): the event's time (the object's creation), else the message's
 * publish time, else the commit time.
 */

/** `YYYY-MM`, a calendar month. */
export type Month = string;

/** Checks `--month`; throws {@link UsageError}. */
export function parseMonth(value: string | undefined, usage: string): Month {
  if (value === undefined) throw new UsageError(`--month YYYY-MM is required. ${usage}`);
  const match = /^(\d{4})-(0[1-9]|1[0-2])$/.exec(value);
  if (!match) throw new UsageError(`--month must be a month as YYYY-MM (got ${value}). ${usage}`);
  return value;
}

/** The days of a month, `YYYY-MM-DD`, first to last. */
export function daysOf(month: Month): string[] {
  const [year, mon] = month.split('-').map(Number) as [number, number];
  const last = new Date(Date.UTC(year, mon, 0)).getUTCDate();
  return Array.from({ length: last }, (_, i) => `${month}-${String(i + 1).padStart(2, '0')}`);
}

/** A row of the documents view as SQLite returns it: every column the view has, JSON as text. */
export type StoredRow = Record<string, string | number | null>;

/** The UTC day a row's document arrived on (the day of its key), or undefined. */
export function arrivalDay(row: StoredRow): string | undefined {
  for (const column of ['event_time', 'publish_time', 'processed_at']) {
    const value = row[column];
    if (typeof value !== 'string') continue;
    const ms = Date.parse(value);
    if (Number.isFinite(ms)) return new Date(ms).toISOString().slice(0, 10);
  }
  return undefined;
}

const JSON_COLUMNS = new Set<string>(COLUMNS.filter((c) => c.type === 'JSON').map((c) => c.name));

/**
 * A stored row with its JSON read: the table's JSON columns, and any other text of the view that
 * is a JSON object or array (a column a later view adds, such as a review verdict, is read the
 * same way without this code knowing it).
 */
export type MonthRow = Record<string, unknown> & {
  dedup_key: string;
  message_id: string;
  status: string;
  object_uri: string | null;
  object_name: string | null;
  day: string;
};

function readJson(name: string, value: string | number | null): unknown {
  if (typeof value !== 'string') return value;
  const looksJson = /^\s*[[{]/.test(value) || (JSON_COLUMNS.has(name) && value !== '');
  if (!looksJson) return value;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

/** The month's rows read from a SQLite file (read-only), oldest first, and the columns of the view. */
export function readMonth(
  file: string,
  month: Month,
): { rows: MonthRow[]; stored: StoredRow[]; columns: string[] } {
  if (!existsSync(file)) return { rows: [], stored: [], columns: [] };
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    db.exec('PRAGMA busy_timeout = 5000');
    const statement = db.prepare('SELECT * FROM documents ORDER BY processed_at, message_id');
    const columns = statement.columns().map((c) => c.name);
    const all = statement.all() as StoredRow[];
    const stored = all.filter((row) => arrivalDay(row)?.startsWith(`${month}-`));
    return { rows: stored.map(monthRow), stored, columns };
  } finally {
    db.close();
  }
}

/** A stored row as the export and the certificate read it. */
export function monthRow(row: StoredRow): MonthRow {
  const read: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(row)) read[name] = readJson(name, value);
  return { ...read, day: arrivalDay(row) ?? '' } as MonthRow;
}

/** The canonical text of one stored row over `columns`: its `[column, value]` pairs as JSON. */
export function canonicalRow(row: StoredRow, columns: readonly string[]): string {
  return JSON.stringify(columns.map((c) => [c, row[c] ?? null]));
}

/**
 * The SHA-256 of a month's rows, as the certificate states it and `--verify` recomputes it: the
 * rows sorted by dedup key then message id, each written as the JSON array of its `[column, value]`
 * pairs over `columns` (values as SQLite stores them: JSON columns as their text), one per line
 * (`\n`, none after the last), UTF-8. Any change to a hashed value, a row added to the month or
 * taken from it, changes the digest.
 */
export function monthDigest(rows: readonly StoredRow[], columns: readonly string[]): string {
  // Code-unit order, not a locale's: the digest must not depend on the machine that computes it.
  const order = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  const sorted = [...rows].sort(
    (a, b) =>
      order(String(a.dedup_key), String(b.dedup_key)) || order(String(a.message_id), String(b.message_id)),
  );
  const text = sorted.map((row) => canonicalRow(row, columns)).join('\n');
  return createHash('sha256').update(text, 'utf8').digest('hex');
}
