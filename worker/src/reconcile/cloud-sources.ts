import type { BigQuery } from '@google-cloud/bigquery';
import type { Topic } from '@google-cloud/pubsub';
import type { Bucket } from '@google-cloud/storage';
import { bigQueryError, quotedTable } from '../adapters/stores/bigquery-store';
import { PARTITION_COLUMN } from '../contract/row';
import { ConfigurationError } from '../core/errors';
import type { ObjectResource } from './notification';
import {
  type ComparisonQuery,
  type LineIndex,
  type NotificationPublisher,
  type ObjectLister,
  ReconcileError,
} from './reconcile';

/**
 * Reconcile's ports on Google Cloud, each through its client library: Cloud Storage lists the live
 * objects page by page, BigQuery answers one parameterised query, Pub/Sub publishes.
 */

/** Lists live objects (no older versions) through `bucket.getFiles`, one API page at a time. */
export class GcsObjectLister implements ObjectLister {
  readonly bucket: string;
  constructor(
    private readonly storage: Bucket,
    private readonly pageSize = 1000,
  ) {
    this.bucket = storage.name;
  }

  async *pages(prefix: string): AsyncIterable<ObjectResource[]> {
    let pageToken: string | undefined;
    do {
      const [, next, response] = (await this.storage.getFiles({
        autoPaginate: false,
        maxResults: this.pageSize,
        ...(prefix ? { prefix } : {}),
        ...(pageToken ? { pageToken } : {}),
      })) as unknown as [unknown, { pageToken?: string } | null, { items?: ObjectResource[] } | undefined];
      // The raw API items are the JSON_API_V1 object resources, exactly what a notification carries.
      yield response?.items ?? [];
      pageToken = next?.pageToken ?? undefined;
    } while (pageToken);
  }
}

/** The named parameters of {@link reconcileSql}; `until` only in a bounded statement. */
export const RECONCILE_PARAMETER_TYPES = { bucket: 'STRING', prefix: 'STRING', since: 'TIMESTAMP' } as const;
export const RECONCILE_UNTIL_TYPE = 'TIMESTAMP';

/**
 * The reconcile query: the object URIs that have a row, any status, for one bucket and prefix.
 * `key_day >= DATE(@since)` (the oldest listed object's creation: an object's rows carry its
 * creation day, or a later publish day) restricts the partitions it reads; a `bounded` statement
 * also stops before `DATE(@until)`, so a run too large for the byte cap is split into statements
 * by key day (reconcile.ts), each under it.
 */
export function reconcileSql(table: string, options: { bounded?: boolean } = {}): string {
  return (
    `SELECT DISTINCT object_uri FROM ${quotedTable(table)} ` +
    `WHERE ${PARTITION_COLUMN} >= DATE(@since) ` +
    (options.bounded ? `AND ${PARTITION_COLUMN} < DATE(@until) ` : '') +
    'AND bucket = @bucket AND STARTS_WITH(object_name, @prefix)'
  );
}

export interface BigQueryLineIndexOptions {
  bigquery: BigQuery;
  /** `project.dataset.table`. */
  table: string;
  location?: string | undefined;
  maximumBytesBilled: number;
  /** How to raise the cap, named in the error (the command's flag, or the job's variable). */
  raiseCapHint: string;
}

export class BigQueryLineIndex implements LineIndex {
  constructor(private readonly options: BigQueryLineIndexOptions) {}

  /** The comparison statement for one bucket, prefix and key-day range. */
  private statement(query: ComparisonQuery) {
    const { bigquery } = this.options;
    const bounded = query.until !== undefined;
    return {
      query: reconcileSql(this.options.table, { bounded }),
      params: {
        bucket: query.bucket,
        prefix: query.prefix,
        since: bigquery.timestamp(query.since),
        ...(bounded ? { until: bigquery.timestamp(query.until!) } : {}),
      },
      types: { ...RECONCILE_PARAMETER_TYPES, ...(bounded ? { until: RECONCILE_UNTIL_TYPE } : {}) },
      useLegacySql: false,
      ...(this.options.location ? { location: this.options.location } : {}),
    };
  }

  /**
   * The comparison's pre-run estimate, by a dry run of the very statement {@link objectUris} runs
   * (free, runs nothing): every row of its key days, of any prefix.
   */
  async estimateBytes(query: ComparisonQuery): Promise<number> {
    try {
      const [job] = await this.options.bigquery.createQueryJob({ ...this.statement(query), dryRun: true });
      const bytes = Number(job.metadata?.statistics?.totalBytesProcessed);
      if (!Number.isFinite(bytes)) throw new Error('the dry run answered no totalBytesProcessed');
      return bytes;
    } catch (error) {
      throw new ReconcileError(
        'query_failed',
        `cannot estimate the reconcile query: ${bigQueryError(error, 'reconcile').message.split('\n')[0]}`,
        {
          cause: error,
        },
      );
    }
  }

  async objectUris(query: ComparisonQuery): Promise<Set<string>> {
    const { bigquery } = this.options;
    try {
      // autoPaginate (the default) follows every page of the results.
      const [rows] = await bigquery.query({
        ...this.statement(query),
        maximumBytesBilled: String(this.options.maximumBytesBilled),
        labels: { app: 'docline', op: 'reconcile' },
      });
      return new Set((rows as Array<{ object_uri: string }>).map((r) => r.object_uri));
    } catch (error) {
      const mapped = bigQueryError(error, 'reconcile');
      if (mapped instanceof ConfigurationError && mapped.code === 'bigquery_bytes_billed_limit') {
        const detail = /Query exceeded limit for bytes billed[^"]*?required\./i.exec(
          `${(error as Error).message ?? ''} ${JSON.stringify((error as { errors?: unknown }).errors ?? '')}`,
        );
        throw new ReconcileError(
          'bytes_billed_limit',
          `BigQuery refused the reconcile query: its estimate is over the byte cap of ${this.options.maximumBytesBilled} bytes` +
            `${detail ? ` (${detail[0]})` : ''}. Raise it with ${this.options.raiseCapHint}, or narrow the run with --prefix.`,
          { cause: error },
        );
      }
      if (mapped instanceof ConfigurationError && mapped.code === 'bigquery_access_denied') {
        const detail = /\((.*)\): grant/.exec(mapped.message)?.[1] ?? 'access denied';
        throw new ReconcileError(
          'query_failed',
          `BigQuery denied the reconcile query (${detail}): grant the identity running reconcile ` +
            'roles/bigquery.dataViewer on the dataset and roles/bigquery.jobUser on the project.',
          { cause: error },
        );
      }
      throw new ReconcileError('query_failed', mapped.message.split('\n')[0]!, { cause: error });
    }
  }
}

/** Publishes through @google-cloud/pubsub (which batches); resolves when every message is accepted. */
export class PubSubPublisher implements NotificationPublisher {
  constructor(private readonly topic: Topic) {}

  publish(messages: Array<{ data: Buffer; attributes: Record<string, string> }>): Promise<string[]> {
    return Promise.all(
      messages.map((m) => this.topic.publishMessage({ data: m.data, attributes: m.attributes })),
    );
  }
}
