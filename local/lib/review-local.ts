/**
 * The review page's backend on the local pipeline: the SQLite store of the data folder (documents
 * view, corrections) and the local bucket folder for the pictures; a PDF's first page is rendered
 * to PNG with pdf.js and @napi-rs/canvas, a text file is shown as its text.
 */
import { LocalBucketReader } from '../../worker/src/adapters/readers/local-bucket';
import { type DocumentRow, SqliteStore } from '../../worker/src/adapters/stores/sqlite-store';
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import { DELIVERY_DEFAULTS } from '../../worker/src/contract/settings';
import type { ReviewBackend } from './review-server';

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/webp']);

/** A PDF's first page as a PNG, 110 dpi. */
export async function firstPagePng(pdf: Buffer): Promise<Buffer> {
  const { renderPageAsImage } = await import('unpdf');
  const png = await renderPageAsImage(new Uint8Array(pdf), 1, {
    canvasImport: () => import('@napi-rs/canvas'),
    scale: 110 / 72,
  });
  return Buffer.from(png);
}

/** The local backend over a data folder; `close()` closes its store. */
export function localReviewBackend(
  dataDir?: string,
): ReviewBackend & { store: SqliteStore; close(): Promise<void> } {
  const layout = dataDirLayout(dataDir);
  const store = new SqliteStore({ path: layout.sqlite });
  const reader = new LocalBucketReader(layout.bucket);
  return {
    store,
    documents: async (where) => store.correctedDocuments(where),
    corrections: async (key) => store.corrections(key),
    correct: (correction) => store.correct(correction),
    picture: async (row: DocumentRow) => {
      if (!row.bucket || !row.object_name || !row.generation) return undefined;
      const bytes = await reader.read(
        { bucket: row.bucket, name: row.object_name, generation: row.generation },
        DELIVERY_DEFAULTS.maxObjectBytes,
      );
      const type = (row.content_type ?? '').split(';')[0]!.trim().toLowerCase();
      if (type === 'application/pdf') return { contentType: 'image/png', bytes: await firstPagePng(bytes) };
      if (IMAGE_TYPES.has(type)) return { contentType: type, bytes };
      if (type === 'text/plain') return { contentType: 'text/plain; charset=utf-8', bytes };
      return undefined;
    },
    close: () => store.close(),
  };
}
