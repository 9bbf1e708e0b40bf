/**
 * The review page's server (`npm run review`): the rows whose verdict is not `none`, each with its
 * document's picture, and the corrections an accountant makes, written through a
 * {@link ReviewBackend} (the local SQLite store and bucket; BigQuery in the cloud). A correction is
 * never a second row nor an update of one (contract/corrections.ts); a reason that names no
 * correctable field is closed by a "dealt with" mark, posted as a correction of the reason.
 */
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import path from 'node:path';
import type { DocumentRow } from '../../worker/src/adapters/stores/sqlite-store';
import {
  CORRECTABLE_FIELDS,
  type Correction,
  type CorrectionOutcome,
  correctionOf,
  DEALT_WITH,
  InvalidCorrectionError,
  isMarkableReason,
  latestByField,
} from '../../worker/src/contract/corrections';
import { type Clock, systemClock } from '../../worker/src/core/ports';
import { openReasons, parseReview, THRESHOLDS } from '../../worker/src/core/review';

/** Where the review page reads documents and writes corrections. */
export interface ReviewBackend {
  /** The documents view's rows, corrections applied. */
  documents(where?: { dedupKey: string }): Promise<DocumentRow[]>;
  corrections(dedupKey: string): Promise<Correction[]>;
  correct(correction: Correction): Promise<CorrectionOutcome>;
  /** The document's picture as the browser shows it (a PDF's first page as PNG), or undefined. */
  picture(row: DocumentRow): Promise<{ contentType: string; bytes: Buffer } | undefined>;
}

/** One row as the page gets it: what the documents view says, the reasons still open, each field's latest correction. */
export interface ReviewItem {
  dedup_key: string;
  object_name: string | null;
  content_type: string | null;
  processed_at: string;
  analysis: unknown;
  original_analysis: unknown;
  confidence: unknown;
  review: string[];
  open: string[];
  /** The reasons of `review` no field correction closes, open or not: each is closed by a "dealt with" mark. */
  markable: string[];
  corrected_fields: string[];
  /** Per field (or marked reason), the latest correction (its id is what the next correction replaces). */
  latest: Record<
    string,
    Pick<Correction, 'correction_id' | 'value' | 'corrected_by' | 'corrected_at' | 'why'>
  >;
}

export interface ReviewServerOptions {
  backend: ReviewBackend;
  /** Who the corrections are made by (the page may say otherwise). */
  who: string;
  clock?: Clock;
}

const PAGE_DIR = path.join(__dirname, '..', 'review');
const STATIC: Record<string, [string, string]> = {
  '/': ['page.html', 'text/html; charset=utf-8'],
  '/review.js': ['review.js', 'text/javascript; charset=utf-8'],
  '/review.css': ['review.css', 'text/css; charset=utf-8'],
};

async function item(backend: ReviewBackend, row: DocumentRow): Promise<ReviewItem> {
  const latest = latestByField(await backend.corrections(row.dedup_key));
  return {
    dedup_key: row.dedup_key,
    object_name: row.object_name,
    content_type: row.content_type,
    processed_at: row.processed_at,
    analysis: row.analysis,
    original_analysis: row.original_analysis,
    confidence: row.confidence,
    review: parseReview(row.review),
    open: openReasons(row.review, row.corrected_fields),
    markable: parseReview(row.review).filter(isMarkableReason),
    corrected_fields: row.corrected_fields,
    latest: Object.fromEntries(
      [...latest].map(([field, c]) => [
        field,
        {
          correction_id: c.correction_id,
          value: c.value,
          corrected_by: c.corrected_by,
          corrected_at: c.corrected_at,
          why: c.why,
        },
      ]),
    ),
  };
}

/** The rows to review: analysed, verdict not `none`; those with reasons still open first, oldest first. */
export async function reviewQueue(backend: ReviewBackend): Promise<ReviewItem[]> {
  const rows = (await backend.documents()).filter(
    (r) => r.status === 'ok' && parseReview(r.review).length > 0,
  );
  const items = await Promise.all(rows.map((row) => item(backend, row)));
  return items.sort((a, b) => Number(a.open.length === 0) - Number(b.open.length === 0));
}

function send(response: ServerResponse, status: number, body: unknown, type = 'application/json'): void {
  const bytes = Buffer.isBuffer(body)
    ? body
    : Buffer.from(type === 'application/json' ? JSON.stringify(body) : String(body));
  response.writeHead(status, {
    'content-type': type,
    'cache-control': 'no-store',
    'content-length': bytes.length,
  });
  response.end(bytes);
}

async function bodyOf(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > 64 * 1024) throw new InvalidCorrectionError('the request is over 64 KiB');
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new InvalidCorrectionError('the request is not JSON');
  }
}

/** The HTTP server of the page (not listening). */
export function createReviewServer(options: ReviewServerOptions): Server {
  const { backend, who } = options;
  const clock = options.clock ?? systemClock;
  const one = async (key: string) => (await backend.documents({ dedupKey: key }))[0];
  return createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://review.local');
    const handled = (async () => {
      const asset = STATIC[url.pathname];
      if (request.method === 'GET' && asset) {
        return send(response, 200, await readFile(path.join(PAGE_DIR, asset[0])), asset[1]);
      }
      if (request.method === 'GET' && url.pathname === '/api/queue') {
        return send(response, 200, {
          who,
          fields: CORRECTABLE_FIELDS,
          dealtWith: DEALT_WITH,
          thresholds: THRESHOLDS,
          items: await reviewQueue(backend),
        });
      }
      const key = url.searchParams.get('key');
      if (request.method === 'GET' && url.pathname === '/api/picture' && key) {
        const row = await one(key);
        const picture = row ? await backend.picture(row) : undefined;
        if (!picture) return send(response, 404, { error: 'no picture for this document' });
        return send(response, 200, picture.bytes, picture.contentType);
      }
      if (request.method === 'POST' && url.pathname === '/api/corrections') {
        const body = (await bodyOf(request)) as Record<string, unknown>;
        const dedupKey = String(body.dedup_key ?? '');
        const row = await one(dedupKey);
        if (!row) return send(response, 404, { error: `no document under ${dedupKey}` });
        const field = String(body.field ?? '');
        // A mark is of a reason the row carries: one of another row's reasons closes nothing here.
        if (isMarkableReason(field) && !parseReview(row.review).includes(field))
          throw new InvalidCorrectionError(`${field} is not a review reason of ${dedupKey}: nothing to mark`);
        const correction = correctionOf(
          {
            dedupKey,
            field,
            value: body.value,
            replaces: typeof body.replaces === 'string' ? body.replaces : null,
            by: typeof body.by === 'string' && body.by.trim() !== '' ? body.by : who,
            why: typeof body.why === 'string' ? body.why : null,
          },
          clock.now(),
        );
        const outcome = await backend.correct(correction);
        const after = await item(backend, (await one(dedupKey))!);
        return send(response, outcome.status === 'conflict' ? 409 : 200, { ...outcome, item: after });
      }
      return send(response, 404, { error: `${request.method} ${url.pathname}: no such page` });
    })();
    handled.catch((error: unknown) => {
      if (error instanceof InvalidCorrectionError) return send(response, 400, { error: error.message });
      send(response, 500, { error: error instanceof Error ? error.message : String(error) });
    });
  });
}
