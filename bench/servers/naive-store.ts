import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { insertSql, SQLITE_TABLE, sqliteValues } from '../../worker/src/adapters/stores/sqlite-store';
import { type Row, sqliteTableDdl } from '../../worker/src/contract/row';
import type { Store } from '../../worker/src/core/ports';

/** The worker's table DDL without the unique dedup key: what the plain sample would create. */
export function naiveTableDdl(table: string): string {
  return sqliteTableDdl(table, { unique: false });
}

/**
 * The store of the naive consumer (b): the "parse, process, insert" sample with no dedup at all.
 * `seen()` never looks and `record()` is a plain INSERT, so every delivery (redeliveries too) is
 * analysed and becomes a row. Same SQLite settings as {@link SqliteStore}, so the only difference
 * between the naive consumer and the worker is the dedup.
 */
export class NaiveSqliteStore implements Store {
  private readonly db: DatabaseSync;
  private readonly insert;

  constructor(options: { path: string }) {
    if (options.path !== ':memory:') mkdirSync(path.dirname(options.path), { recursive: true });
    this.db = new DatabaseSync(options.path);
    this.db.exec('PRAGMA busy_timeout = 5000');
    this.db.exec('PRAGMA journal_mode = WAL');
    this.db.exec('PRAGMA synchronous = FULL');
    this.db.exec(naiveTableDdl(SQLITE_TABLE));
    this.insert = this.db.prepare(insertSql(SQLITE_TABLE));
  }

  /** The naive consumer never looks: every delivery is new work. */
  async seen(_dedupKey: string): Promise<boolean> {
    return false;
  }

  /** A plain INSERT: always a new row. */
  async record(row: Row): Promise<boolean> {
    this.insert.run(sqliteValues(row));
    return true;
  }

  async ping(): Promise<void> {
    this.db.prepare('SELECT 1').get();
  }

  async close(): Promise<void> {
    if (this.db.isOpen) this.db.close();
  }

  /** Rows in the table (the benchmark checks that redeliveries became extra rows). */
  count(): number {
    return Number((this.db.prepare(`SELECT COUNT(*) AS n FROM ${SQLITE_TABLE}`).get() as { n: number }).n);
  }
}
