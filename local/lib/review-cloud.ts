/**
 * The review page's backend against a deployed stack, with the user's own credentials (Application
 * Default Credentials): the `documents` view and the `corrections` table of the stack's dataset,
 * written by the same rule as locally (BigQueryCorrectionStore), and the pictures read from the
 * documents bucket at the row's generation.
 */
import { BigQuery } from '@google-cloud/bigquery';
import { Storage } from '@google-cloud/storage';
import { BigQueryCorrectionStore } from '../../worker/src/adapters/stores/bigquery-correction-store';
import type { DocumentRow } from '../../worker/src/adapters/stores/sqlite-store';
import { CORRECTIONS_TABLE } from '../../worker/src/contract/corrections';
import { COLUMN_NAMES, keyDay, type Row } from '../../worker/src/contract/row';
import { firstPagePng } from './review-local';
import type { ReviewBackend } from './review-server';

export interface CloudReviewOptions {
  /** `project.dataset` of the stack (its `viewIds.documents` without the view's name). */
  dataset: string;
  location?: string;
  bigquery?: Pick<BigQuery, 'query'>;
  storage?: Storage;
}

/** A value of the client's answer as the row holds it: timestamps as ISO text, JSON parsed. */
function plain(value: unknown): unknown {
  if (value && typeof value === 'object' && 'value' in value) return (value as { value: unknown }).value;
  return value;
}

/** One row of the documents view, as the client answers it. */
export function documentRowOf(record: Record<string, unknown>): DocumentRow {
  const row: Record<string, unknown> = {};
  const json = (v: unknown) => (typeof v === 'string' ? JSON.parse(v) : (v ?? null));
  for (const name of COLUMN_NAMES) {
    const value = plain(record[name]) ?? null;
    row[name] = name === 'analysis' || name === 'confidence' ? json(value) : value;
  }
  return {
    ...(row as unknown as Row),
    original_analysis: json(record.original_analysis),
    corrected_fields: typeof record.corrected_fields === 'string' ? record.corrected_fields.split(',') : [],
  };
}

export function cloudReviewBackend(options: CloudReviewOptions): ReviewBackend {
  const bigquery = options.bigquery ?? new BigQuery();
  const storage = options.storage ?? new Storage();
  const store = new BigQueryCorrectionStore({
    bigquery,
    table: `${options.dataset}.${CORRECTIONS_TABLE}`,
    location: options.location,
  });
  const documents = async (where?: { dedupKey: string }) => {
    const [rows] = await bigquery.query({
      query:
        `SELECT * FROM \`${options.dataset}.documents\` WHERE ` +
        (where ? 'dedup_key = @dedup_key' : "status = 'ok' AND review IS NOT NULL AND review != 'none'"),
      params: where ? { dedup_key: where.dedupKey } : {},
      useLegacySql: false,
      ...(options.location ? { location: options.location } : {}),
    });
    return (rows as Record<string, unknown>[]).map(documentRowOf);
  };
  return {
    documents,
    corrections: (key) => store.corrections(key),
    correct: async (correction) => {
      const [row] = await documents({ dedupKey: correction.dedup_key });
      return store.correct(correction, keyDay(row ?? { event_time: null, publish_time: null }, new Date()));
    },
    picture: async (row) => {
      if (!row.bucket || !row.object_name || !row.generation) return undefined;
      const [bytes] = await storage
        .bucket(row.bucket)
        .file(row.object_name, { generation: Number(row.generation) })
        .download();
      const type = (row.content_type ?? '').split(';')[0]!.trim().toLowerCase();
      if (type === 'application/pdf') return { contentType: 'image/png', bytes: await firstPagePng(bytes) };
      if (type.startsWith('image/')) return { contentType: type, bytes };
      if (type === 'text/plain') return { contentType: 'text/plain; charset=utf-8', bytes };
      return undefined;
    },
  };
}
