import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync, type SQLInputValue } from 'node:sqlite';
import {
  CORRECTION_COLUMN_NAMES,
  CORRECTIONS_TABLE,
  type Correction,
  type CorrectionOutcome,
  decide,
  sqliteCorrectionsDdl,
} from '../../contract/corrections';
import { COLUMN_NAMES, COLUMNS, type Row, sqliteTableDdl } from '../../contract/row';
import {
  DUPLICATE_INVOICE_ROWS,
  DUPLICATE_KEY_FIELDS,
  duplicateInvoiceKeySql,
  NOT_CANARY,
  VIEW_NAMES,
  type ViewName,
  viewSql,
} from '../../contract/views';
import { TransientError } from '../../core/errors';
import { type BatchStore, type Clock, systemClock } from '../../core/ports';

export const SQLITE_TABLE = 'rows';

export interface SqliteStoreOptions {
  /** Database file; `:memory:` for a private in-memory store. */
  path: string;
  /** How long a write waits for another process's lock before it is a transient failure. */
  busyTimeoutMs?: number;
  /** Stamps `processed_at` at commit. */
  clock?: Clock;
}

const JSON_COLUMNS = new Set<string>(COLUMNS.filter((c) => c.type === 'JSON').map((c) => c.name));

/** A row as named SQLite parameters (`:column`): JSON columns as text, everything else as is. */
export function sqliteValues(row: Row): Record<string, SQLInputValue> {
  const values: Record<string, SQLInputValue> = {};
  for (const name of COLUMN_NAMES) {
    const value = row[name];
    values[name] =
      JSON_COLUMNS.has(name) && value !== null ? JSON.stringify(value) : (value as SQLInputValue);
  }
  return values;
}

/** One row's `duplicate_invoices` group keys (null: the key is missing, the row is in no group). */
interface InvoiceKeys {
  supplier_key: string | null;
  invoice_number_key: string | null;
  total_amount: number | null;
  object_uri: string;
}

const complete = (k: InvoiceKeys) =>
  k.supplier_key !== null && k.invoice_number_key !== null && k.total_amount !== null;

/** `INSERT INTO table (…) VALUES (:…)` over every column, in table order. */
export function insertSql(table: string): string {
  return `INSERT INTO ${table} (${COLUMN_NAMES.join(', ')}) VALUES (${COLUMN_NAMES.map((c) => `:${c}`).join(', ')})`;
}

/**
 * How the SQLite store finds the `duplicate_invoices` group of one row without reading the view:
 * an index on the view's group keys (the view's own expressions, over its ok rows), the keys of
 * one row (`?`: its dedup key), and a page of the other objects with those keys, in object order
 * (`:supplier_key`, `:invoice_number_key`, `:total_amount`, `:object_uri` to leave out, `:limit`):
 * a search of that index, whatever the group's size. Two statements: as one (the keys in a CTE)
 * SQLite evaluates the key expressions again for each range of the search, at 2.5 times the cost.
 */
export function duplicateInvoiceLookupSql(table: string): {
  index: string;
  keysOf: string;
  groupPage: string;
  keyedGroupPage: string;
  correctedKeysOf: string;
  keyCorrected: string;
} {
  const keys = duplicateInvoiceKeySql('sqlite');
  const rows = `${DUPLICATE_INVOICE_ROWS} AND ${NOT_CANARY}`;
  const selectKeys =
    `SELECT ${keys.supplier_key} AS supplier_key, ${keys.invoice_number_key} AS invoice_number_key, ` +
    `${keys.total_amount} AS total_amount, object_uri`;
  const sameKeys =
    `${keys.supplier_key} = :supplier_key AND ${keys.invoice_number_key} = :invoice_number_key ` +
    `AND ${keys.total_amount} = :total_amount AND object_uri <> :object_uri ORDER BY object_uri LIMIT :limit`;
  return {
    index:
      `CREATE INDEX IF NOT EXISTS ${table}_duplicate_invoices ON ${table} ` +
      `(${keys.supplier_key}, ${keys.invoice_number_key}, ${keys.total_amount}, object_uri) WHERE ${DUPLICATE_INVOICE_ROWS}`,
    keysOf: `${selectKeys} FROM ${table} WHERE dedup_key = ? AND ${rows}`,
    groupPage: `SELECT DISTINCT object_uri FROM ${table} WHERE ${rows} AND ${sameKeys}`,
    // Once a key field was corrected: the page with each object's dedup key, and the corrected keys
    // (read from the `documents` view, which applies the corrections) of the keys given as JSON.
    keyedGroupPage: `SELECT DISTINCT object_uri, dedup_key FROM ${table} WHERE ${rows} AND ${sameKeys}`,
    correctedKeysOf: `${selectKeys}, dedup_key FROM documents WHERE dedup_key IN (SELECT value FROM json_each(?)) AND ${rows}`,
    keyCorrected: `SELECT DISTINCT dedup_key FROM ${CORRECTIONS_TABLE} WHERE field IN (${DUPLICATE_KEY_FIELDS.map((f) => `'${f}'`).join(', ')})`,
  };
}

/**
 * The embedded store: SQLite through node:sqlite, in WAL mode so that several worker processes can
 * share one file. The unique dedup key makes `record()` one conditional statement.
 */
export class SqliteStore implements BatchStore {
  private readonly db: DatabaseSync;
  private readonly insert;
  private readonly insertCorrection;
  private readonly lookup;
  private readonly lookupMany;
  private readonly invoiceKeysOf;
  private readonly invoiceGroupPage;
  private readonly invoiceKeyedGroupPage;
  private readonly invoiceCorrectedKeysOf;
  private readonly invoiceKeyCorrected;
  private readonly clock: Clock;

  constructor(options: SqliteStoreOptions) {
    this.clock = options.clock ?? systemClock;
    if (options.path !== ':memory:') mkdirSync(path.dirname(options.path), { recursive: true });
    this.db = new DatabaseSync(options.path);
    // busy_timeout first: the journal-mode switch itself may meet another process's lock.
    this.db.exec(`PRAGMA busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? 5_000)}`);
    this.db.exec('PRAGMA journal_mode = WAL');
    // FULL, not NORMAL: in WAL mode NORMAL skips the fsync at each commit, so after a power loss a
    // row that was acknowledged (200, Pub/Sub acks) could be gone. FULL syncs the WAL at every
    // commit: a 200 is only given for a durable row.
    this.db.exec('PRAGMA synchronous = FULL');
    this.db.exec(sqliteTableDdl(SQLITE_TABLE));
    this.db.exec(sqliteCorrectionsDdl());
    this.migrate();
    // duplicate_invoices' group keys, indexed for the ok rows it reads: `npm start` finds the group a
    // new row joins with one index search, however many objects the group already has.
    const duplicates = duplicateInvoiceLookupSql(SQLITE_TABLE);
    this.db.exec(duplicates.index);
    this.invoiceKeysOf = this.db.prepare(duplicates.keysOf);
    this.invoiceGroupPage = this.db.prepare(duplicates.groupPage);
    this.invoiceKeyedGroupPage = this.db.prepare(duplicates.keyedGroupPage);
    this.invoiceCorrectedKeysOf = this.db.prepare(duplicates.correctedKeysOf);
    this.invoiceKeyCorrected = this.db.prepare(duplicates.keyCorrected);
    this.insert = this.db.prepare(`${insertSql(SQLITE_TABLE)} ON CONFLICT (dedup_key) DO NOTHING`);
    this.insertCorrection = this.db.prepare(
      `INSERT INTO ${CORRECTIONS_TABLE} (${CORRECTION_COLUMN_NAMES.join(', ')}) VALUES (${CORRECTION_COLUMN_NAMES.map((c) => `:${c}`).join(', ')}) ON CONFLICT (correction_id) DO NOTHING`,
    );
    this.lookup = this.db.prepare(`SELECT 1 AS hit FROM ${SQLITE_TABLE} WHERE dedup_key = ? LIMIT 1`);
    // The keys travel as one JSON array parameter, the way BigQuery's batch gets `UNNEST(@keys)`.
    this.lookupMany = this.db.prepare(
      `SELECT dedup_key FROM ${SQLITE_TABLE} WHERE dedup_key IN (SELECT value FROM json_each(?))`,
    );
  }

  /**
   * Brings a database file written by an earlier version up to this one: the columns added since
   * (NULLABLE, at the end, as BigQuery adds them), and the views whose SQL changed (they hold no
   * data). Only when something differs, in one write transaction, so that worker processes opening
   * the same file at once do it once.
   */
  private migrate(): void {
    const missing = () => {
      const have = new Set(
        (this.db.prepare(`PRAGMA table_info(${SQLITE_TABLE})`).all() as Array<{ name: string }>).map(
          (c) => c.name,
        ),
      );
      return COLUMNS.filter((c) => !have.has(c.name));
    };
    const stale = () => {
      const views = new Map(
        (
          this.db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'view'").all() as Array<{
            name: string;
            sql: string;
          }>
        ).map((v) => [v.name, v.sql]),
      );
      return VIEW_NAMES.filter((view) => views.get(view) !== viewDdl(view));
    };
    if (missing().length === 0 && stale().length === 0) return;
    this.db.exec('BEGIN IMMEDIATE');
    try {
      for (const column of missing()) {
        if (column.mode === 'REQUIRED') throw new Error(`cannot add the REQUIRED column ${column.name}`);
        const type = column.type === 'INT64' ? 'INTEGER' : 'TEXT';
        this.db.exec(`ALTER TABLE ${SQLITE_TABLE} ADD COLUMN ${column.name} ${type}`);
      }
      for (const view of stale()) {
        this.db.exec(`DROP VIEW IF EXISTS ${view}`);
        this.db.exec(viewDdl(view));
      }
      this.db.exec('COMMIT');
    } catch (error) {
      if (this.db.isTransaction) this.db.exec('ROLLBACK');
      throw error;
    }
  }

  async seen(dedupKey: string): Promise<boolean> {
    return this.guard(() => this.lookup.get(dedupKey) !== undefined);
  }

  async record(row: Row): Promise<boolean> {
    return this.guard(() => this.insert.run(sqliteValues(this.committed(row))).changes === 1);
  }

  async seenMany(keys: readonly string[]): Promise<Set<string>> {
    if (keys.length === 0) return new Set();
    return this.guard(() => {
      const rows = this.lookupMany.all(JSON.stringify(keys)) as Array<{ dedup_key: string }>;
      return new Set(rows.map((r) => r.dedup_key));
    });
  }

  /** A batch in one transaction: every row goes in, or (on an error) none does. */
  async recordMany(rows: readonly Row[]): Promise<Set<string>> {
    if (rows.length === 0) return new Set();
    return this.guard(() => {
      const inserted = new Set<string>();
      // IMMEDIATE takes the write lock up front, so a busy file fails here, before any insert.
      this.db.exec('BEGIN IMMEDIATE');
      try {
        // Stamped under the write lock: the order of the stamps is the order of the commits.
        const committed = rows.map((row) => this.committed(row));
        for (const row of committed) {
          if (this.insert.run(sqliteValues(row)).changes === 1) inserted.add(row.dedup_key);
        }
        this.db.exec('COMMIT');
      } catch (error) {
        if (this.db.isTransaction) this.db.exec('ROLLBACK');
        throw error;
      }
      return inserted;
    });
  }

  /** The row as it is committed: `processed_at` is the time of the commit, not of the row's arrival. */
  private committed(row: Row): Row {
    return { ...row, processed_at: this.clock.now().toISOString() };
  }

  async ping(): Promise<void> {
    this.guard(() => this.db.prepare('SELECT 1').get());
  }

  async close(): Promise<void> {
    if (this.db.isOpen) this.db.close();
  }

  /** The durability settings this connection runs with, read back from SQLite (for tests and checks). */
  durability(): { journalMode: string; synchronous: 'OFF' | 'NORMAL' | 'FULL' | 'EXTRA' } {
    const journal = this.db.prepare('PRAGMA journal_mode').get() as { journal_mode: string };
    const sync = this.db.prepare('PRAGMA synchronous').get() as { synchronous: number };
    const names = ['OFF', 'NORMAL', 'FULL', 'EXTRA'] as const;
    return { journalMode: journal.journal_mode, synchronous: names[sync.synchronous]! };
  }

  /** Every row stored under a key (one at most: the key is unique). */
  rowsFor(dedupKey: string): Row[] {
    return this.query(`SELECT * FROM ${SQLITE_TABLE} WHERE dedup_key = ?`, dedupKey);
  }

  /** Rows whose column equals a value (tools and checks; the column comes from a fixed list). */
  rowsWhere(column: 'object_uri' | 'object_name' | 'message_id' | 'status', value: string): Row[] {
    const allowed = ['object_uri', 'object_name', 'message_id', 'status'];
    if (!allowed.includes(column)) throw new Error(`cannot filter on ${column}`);
    return this.query(
      `SELECT * FROM ${SQLITE_TABLE} WHERE ${column} = ? ORDER BY processed_at, message_id`,
      value,
    );
  }

  /** Dedup keys with more than one row in the table (never any here: the key is unique). */
  keysRecordedTwice(): string[] {
    const rows = this.db
      .prepare(`SELECT dedup_key FROM ${SQLITE_TABLE} GROUP BY dedup_key HAVING COUNT(*) > 1`)
      .all() as Array<{ dedup_key: string }>;
    return rows.map((r) => r.dedup_key);
  }

  /** All rows of a view, for the local tools. */
  view(name: ViewName): Record<string, unknown>[] {
    return this.db.prepare(`SELECT * FROM ${name}`).all() as Record<string, unknown>[];
  }

  /**
   * The other objects of the `duplicate_invoices` group that the ok row stored under `dedupKey`
   * belongs to, in object order, at most `limit` of them (none when it is in no group). One search
   * of the index on the view's group keys: the cost is the same for a group of 2 or of 5,000.
   */
  duplicateInvoiceOthers(dedupKey: string, limit: number): string[] {
    // Rows whose supplier, number or total an accountant corrected: their group is the corrected one.
    const corrected = new Set(
      (this.invoiceKeyCorrected.all() as Array<{ dedup_key: string }>).map((r) => r.dedup_key),
    );
    if (corrected.size === 0) {
      const keys = this.invoiceKeysOf.get(dedupKey) as InvoiceKeys | undefined;
      if (!keys || !complete(keys)) return [];
      return (this.invoiceGroupPage.all({ ...keys, limit }) as Array<{ object_uri: string }>).map(
        (r) => r.object_uri,
      );
    }
    // The raw index's page, less the corrected rows, and the corrected rows whose keys now match.
    const [mine] = this.invoiceCorrectedKeysOf.all(JSON.stringify([dedupKey])) as unknown as InvoiceKeys[];
    if (!mine || !complete(mine)) return [];
    const { supplier_key, invoice_number_key, total_amount, object_uri } = mine;
    const page = this.invoiceKeyedGroupPage.all({
      supplier_key,
      invoice_number_key,
      total_amount,
      object_uri,
      limit: limit + corrected.size,
    }) as Array<{ object_uri: string; dedup_key: string }>;
    const others = new Set(page.filter((r) => !corrected.has(r.dedup_key)).map((r) => r.object_uri));
    for (const r of this.invoiceCorrectedKeysOf.all(
      JSON.stringify([...corrected]),
    ) as unknown as InvoiceKeys[])
      if (
        r.object_uri !== object_uri &&
        r.supplier_key === supplier_key &&
        r.invoice_number_key === invoice_number_key &&
        r.total_amount === total_amount
      )
        others.add(r.object_uri);
    return [...others].sort().slice(0, limit);
  }

  /** The documents view as typed rows, oldest first. */
  documents(): Row[] {
    return this.query('SELECT * FROM documents ORDER BY processed_at, message_id');
  }

  /** The documents view with what the corrections left readable: the analysis as analysed, the fields corrected. */
  correctedDocuments(where?: { dedupKey: string }): DocumentRow[] {
    const sql = `SELECT * FROM documents${where ? ' WHERE dedup_key = ?' : ''} ORDER BY processed_at, message_id`;
    const records = this.db.prepare(sql).all(...(where ? [where.dedupKey] : [])) as Record<string, unknown>[];
    return records.map((record) => ({
      ...toRow(record),
      original_analysis:
        typeof record.original_analysis === 'string' ? JSON.parse(record.original_analysis) : null,
      corrected_fields: typeof record.corrected_fields === 'string' ? record.corrected_fields.split(',') : [],
    }));
  }

  /** The corrections of a row, oldest first (every one: the view applies the latest of each field). */
  corrections(dedupKey: string): Correction[] {
    return this.db
      .prepare(`SELECT * FROM ${CORRECTIONS_TABLE} WHERE dedup_key = ? ORDER BY corrected_at, correction_id`)
      .all(dedupKey) as unknown as Correction[];
  }

  /**
   * Writes a correction unless it is already there or its field was corrected meanwhile
   * (contract/corrections.ts `decide`), the check and the insert in one write transaction.
   */
  async correct(correction: Correction): Promise<CorrectionOutcome> {
    return this.guard(() => {
      this.db.exec('BEGIN IMMEDIATE');
      try {
        const outcome = decide(correction, this.corrections(correction.dedup_key));
        if (outcome.status === 'recorded')
          this.insertCorrection.run(correction as unknown as Record<string, SQLInputValue>);
        this.db.exec('COMMIT');
        return outcome;
      } catch (error) {
        if (this.db.isTransaction) this.db.exec('ROLLBACK');
        throw error;
      }
    });
  }

  private query(sql: string, ...params: SQLInputValue[]): Row[] {
    return (this.db.prepare(sql).all(...params) as Record<string, unknown>[]).map(toRow);
  }

  private guard<T>(work: () => T): T {
    try {
      return work();
    } catch (error) {
      const code = (error as { errcode?: number }).errcode;
      // SQLITE_BUSY (5) and SQLITE_LOCKED (6), with their extended codes: another writer holds the lock.
      if (code !== undefined && [5, 6].includes(code & 0xff)) {
        throw new TransientError('store_busy', 'the SQLite database is busy', { cause: error });
      }
      throw error;
    }
  }
}

/** A row of the documents view: the table's columns (the analysis corrected), and what corrections left readable. */
export type DocumentRow = Row & { original_analysis: unknown; corrected_fields: string[] };

/** The statement that creates a view, as SQLite keeps it in sqlite_master. */
function viewDdl(view: ViewName): string {
  return `CREATE VIEW ${view} AS ${viewSql('sqlite', view, SQLITE_TABLE)}`;
}

function toRow(record: Record<string, unknown>): Row {
  const row: Record<string, unknown> = {};
  for (const name of COLUMN_NAMES) {
    const value = record[name] ?? null;
    row[name] = JSON_COLUMNS.has(name) && typeof value === 'string' ? JSON.parse(value) : value;
  }
  return row as unknown as Row;
}
