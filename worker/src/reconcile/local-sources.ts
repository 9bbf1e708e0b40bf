import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { SQLITE_TABLE } from '../adapters/stores/sqlite-store';
import type { ObjectResource } from './notification';
import type { ComparisonQuery, LineIndex, ObjectLister } from './reconcile';

/**
 * Reconcile's ports for the local pipeline: the folder bucket of `LocalBucket`
 * (`<root>/<bucket>/<sha256(name)>/<generation>` plus its `.json` object resource) and the SQLite
 * table the worker writes.
 */

/** Lists the live generation of every object of a local bucket, in pages like Cloud Storage. */
export class LocalBucketLister implements ObjectLister {
  constructor(
    /** The folder that holds every local bucket (`<DOCLINE_DATA_DIR>/bucket`). */
    private readonly root: string,
    readonly bucket: string,
    private readonly pageSize = 1000,
  ) {}

  async *pages(prefix: string): AsyncIterable<ObjectResource[]> {
    const dir = path.join(this.root, this.bucket);
    const entries = await readdir(dir, { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return [];
      throw error;
    });
    let page: ObjectResource[] = [];
    for (const entry of entries) {
      if (!entry.isDirectory()) continue;
      const files = await readdir(path.join(dir, entry.name));
      // The live generation is the highest one whose bytes are there (a replaced one is deleted).
      const live = files
        .filter((f) => /^\d+$/.test(f))
        .map((f) => BigInt(f))
        .sort((a, b) => (a < b ? 1 : a > b ? -1 : 0))[0];
      if (live === undefined) continue;
      const resource = JSON.parse(
        await readFile(path.join(dir, entry.name, `${live}.json`), 'utf8'),
      ) as ObjectResource;
      if (!resource.name.startsWith(prefix)) continue;
      page.push(resource);
      if (page.length === this.pageSize) {
        yield page;
        page = [];
      }
    }
    if (page.length > 0) yield page;
  }
}

/** The object URIs with a row in the local SQLite table (read-only; the worker keeps writing). */
export class SqliteLineIndex implements LineIndex {
  constructor(private readonly file: string) {}

  async objectUris(query: ComparisonQuery): Promise<Set<string>> {
    // No database yet: the worker has written no row.
    if (!existsSync(this.file)) return new Set();
    const db = new DatabaseSync(this.file, { readOnly: true });
    try {
      db.exec('PRAGMA busy_timeout = 5000');
      // processed_at stands for the range's time column: the ranges of one run are contiguous, so
      // together they read every row since the first `since`, whichever column bounds them.
      const until = query.until === undefined ? '' : ' AND processed_at < ?';
      const rows = db
        .prepare(
          `SELECT DISTINCT object_uri FROM ${SQLITE_TABLE} WHERE bucket = ? ` +
            `AND substr(object_name, 1, length(?)) = ? AND processed_at >= ?${until}`,
        )
        .all(
          query.bucket,
          query.prefix,
          query.prefix,
          query.since.toISOString(),
          ...(query.until === undefined ? [] : [query.until.toISOString()]),
        ) as Array<{
        object_uri: string;
      }>;
      return new Set(rows.map((r) => r.object_uri));
    } finally {
      db.close();
    }
  }
}
