import { adapt, managedwriter } from '@google-cloud/bigquery-storage';
import { bigQuerySchema, COLUMNS, keyDay, PARTITION_COLUMN, type Row } from '../../contract/row';
import type { Deadline } from '../../core/deadline';
import { ConfigurationError, TransientError } from '../../core/errors';
import { type Clock, type Store, systemClock } from '../../core/ports';
import { BigQueryStore, type BigQueryStoreOptions, quotedTable } from './bigquery-store';

/**
 * The high-rate store (WRITE_MODE=append): rows go through the Storage Write API's default stream,
 * without MERGE, so the per-table limit of mutating DML (2 running + 20 queued) no longer applies.
 * The default stream is at-least-once and checks nothing: `record()` cannot know whether the key
 * was already there and answers true; `seen()` is the same windowed lookup as the MERGE store, and
 * the `documents` view keeps the first row per key.
 */

/** A row as the Storage Write API's JSON writer takes it. */
export type StorageWriteRow = Record<string, string | number | Date | null>;

/**
 * The one call the store needs from the Storage Write API, so tests can stand in for the gRPC
 * stream. Resolves when the rows are committed; rejects with the client's error otherwise.
 */
export interface RowAppender {
  append(rows: StorageWriteRow[]): Promise<AppendResult>;
  close?(): Promise<void>;
}

/** What an append answers (the fields of AppendRowsResponse the store reads). */
export interface AppendResult {
  error?: { code?: number | null; message?: string | null } | null;
  rowErrors?: Array<{ index?: number | null; code?: unknown; message?: string | null }> | null;
}

/**
 * A row in the Storage Write API's JSON form: timestamps as Dates (the encoder turns them into
 * epoch microseconds), INT64 as numbers, the JSON column as JSON text, nulls as nulls.
 */
export function toStorageWriteRow(row: Row): StorageWriteRow {
  const out: StorageWriteRow = {};
  for (const column of COLUMNS) {
    const value = row[column.name] as unknown;
    if (value === null || value === undefined) {
      out[column.name] = null;
      continue;
    }
    switch (column.type) {
      case 'TIMESTAMP':
        out[column.name] = new Date(String(value));
        break;
      case 'INT64':
        out[column.name] = Number(value);
        break;
      case 'JSON':
        out[column.name] = JSON.stringify(value);
        break;
      default:
        out[column.name] = String(value);
    }
  }
  // The layout's key day (contract/row.ts), as a DATE: the encoder turns a Date into days since 1970.
  out[PARTITION_COLUMN] = new Date(`${keyDay(row, new Date(row.processed_at))}T00:00:00Z`);
  return out;
}

// gRPC status codes (google.rpc.Code).
const TRANSIENT_CODES = new Set([1, 2, 4, 8, 10, 13, 14]); // CANCELLED, UNKNOWN, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNAVAILABLE
const CONFIGURATION_CODES = new Set([5, 7, 9, 16]); // NOT_FOUND, PERMISSION_DENIED, FAILED_PRECONDITION, UNAUTHENTICATED

/** Maps a Storage Write API failure (a gax error, or an error in the append response) to docline's errors. */
export function storageWriteError(error: unknown): Error {
  if (error instanceof TransientError || error instanceof ConfigurationError) return error;
  const e = (error ?? {}) as { code?: unknown; message?: string };
  const code = typeof e.code === 'number' ? e.code : undefined;
  const detail = (e.message ?? String(error)).split('\n')[0]!.slice(0, 500);
  const options = { cause: error };
  if (code === undefined || TRANSIENT_CODES.has(code)) {
    return new TransientError('bigquery_append_unavailable', `Storage Write API: ${detail}`, options);
  }
  if (CONFIGURATION_CODES.has(code)) {
    return new ConfigurationError(
      'bigquery_append_denied',
      `Storage Write API refused the append (${code}): ${detail}. Check BIGQUERY_TABLE and grant the worker's ` +
        'service account roles/bigquery.dataEditor on the dataset.',
      options,
    );
  }
  // INVALID_ARGUMENT and the rest: the row does not fit the table (a schema drift): an operator's fix.
  return new ConfigurationError(
    'bigquery_append_rejected',
    `Storage Write API rejected the row (${code}): ${detail}`,
    options,
  );
}

/** Options of {@link BigQueryAppendStore}: the MERGE store's, plus the appender. */
export interface BigQueryAppendStoreOptions extends BigQueryStoreOptions {
  appender: RowAppender;
}

/** {@link Store} on BigQuery through the Storage Write API's default stream. */
export class BigQueryAppendStore implements Store {
  /** The default stream inserts whatever it is given: deliveries ask `seen()` first, memo or not. */
  readonly conditionalRecord = false;
  private readonly lookup: BigQueryStore;
  private readonly appender: RowAppender;
  private readonly clock: Clock;

  constructor(options: BigQueryAppendStoreOptions) {
    const { appender, ...rest } = options;
    // seen() and ping() are the MERGE store's: the same windowed, typed, capped SELECT.
    this.lookup = new BigQueryStore(rest);
    this.appender = appender;
    this.clock = rest.clock ?? systemClock;
  }

  /** Builds the store with a managedwriter JSONWriter on the table's default stream. */
  static async create(options: BigQueryStoreOptions): Promise<BigQueryAppendStore> {
    quotedTable(options.table); // validates the id before any connection
    return new BigQueryAppendStore({
      ...options,
      appender: await createDefaultStreamAppender(options.table),
    });
  }

  seen(dedupKey: string, deadline?: Deadline): Promise<boolean> {
    return this.lookup.seen(dedupKey, deadline);
  }

  /** Appends the row; true, because the default stream cannot say whether the key was there. */
  async record(row: Row): Promise<boolean> {
    let result: AppendResult;
    try {
      // Stamped when it is appended (the default stream commits on append), not when it arrived.
      result = await this.appender.append([
        toStorageWriteRow({ ...row, processed_at: this.clock.now().toISOString() }),
      ]);
    } catch (error) {
      throw storageWriteError(error);
    }
    if (result.error?.code) throw storageWriteError(result.error);
    const [rowError] = result.rowErrors ?? [];
    if (rowError) {
      throw new ConfigurationError(
        'bigquery_append_rejected',
        `Storage Write API rejected the row: ${rowError.message ?? 'no detail'}`,
      );
    }
    return true;
  }

  ping(): Promise<void> {
    return this.lookup.ping();
  }

  async close(): Promise<void> {
    await this.appender.close?.();
  }
}

/**
 * The real appender: one managedwriter connection to `projects/P/datasets/D/tables/T/streams/_default`,
 * with a proto descriptor derived from the contract's schema (no round trip to read the table's).
 * Write retries stay off (the library's default): Pub/Sub retries the delivery.
 */
export async function createDefaultStreamAppender(table: string): Promise<RowAppender> {
  const [project, dataset, tableId] = table.split('.') as [string, string, string];
  const destinationTable = `projects/${project}/datasets/${dataset}/tables/${tableId}`;
  const client = new managedwriter.WriterClient({ projectId: project });
  const storageSchema = adapt.convertBigQuerySchemaToStorageTableSchema({ fields: bigQuerySchema() });
  const protoDescriptor = adapt.convertStorageSchemaToProto2Descriptor(storageSchema, 'root');
  const connection = await client.createStreamConnection({
    streamId: managedwriter.DefaultStream,
    destinationTable,
  });
  const writer = new managedwriter.JSONWriter({ connection, protoDescriptor });
  return {
    async append(rows) {
      return (await writer.appendRows(rows).getResult()) as AppendResult;
    },
    async close() {
      writer.close();
      client.close();
    },
  };
}
