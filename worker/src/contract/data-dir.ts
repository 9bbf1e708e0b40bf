import path from 'node:path';

/**
 * The local data folder (DOCLINE_DATA_DIR), one definition of its layout: the worker's config puts
 * its SQLite store, bucket and memo there, `npm start` leaves pipeline.json for its companions, and
 * every local tool finds them through {@link dataDirLayout}. A restart keeps the folder.
 */

/** The data folder when DOCLINE_DATA_DIR (or `--data-dir`) is not set, relative to the working directory. */
export const DEFAULT_DATA_DIR = '.docline';

/** What lives in a data folder, and where. */
export interface DataDirLayout {
  /** The folder itself, absolute. */
  readonly root: string;
  /** The SQLite store (rows and the documents views). */
  readonly sqlite: string;
  /** The folder that holds every local bucket (`<bucket>/<sha256(name)>/<generation>`). */
  readonly bucket: string;
  /** The file memo of paid analyses. */
  readonly memo: string;
  /** What a running `npm start` tells `upload`, `dlq`, `reconcile`: emulator, topic, worker URL. */
  readonly pipelineState: string;
  /**
   * The local pipeline's delivery ledger: one JSON line per answer the worker gave (ok, rejected,
   * duplicate, error), appended by `npm start`. The table keeps one row per document; the answers
   * that wrote none (a redelivery, a doubled announcement) are counted from here (`npm run close`).
   */
  readonly deliveries: string;
}

/** The layout of a data folder (resolved against the working directory). */
export function dataDirLayout(dataDir: string = DEFAULT_DATA_DIR): DataDirLayout {
  const root = path.resolve(dataDir);
  return {
    root,
    sqlite: path.join(root, 'docline.sqlite'),
    bucket: path.join(root, 'bucket'),
    memo: path.join(root, 'memo'),
    pipelineState: path.join(root, 'pipeline.json'),
    deliveries: path.join(root, 'deliveries.jsonl'),
  };
}
