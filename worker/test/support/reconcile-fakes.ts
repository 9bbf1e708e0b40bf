import type { ObjectResource } from '../../src/reconcile/notification';
import type {
  ComparisonQuery,
  LineIndex,
  NotificationPublisher,
  ObjectLister,
} from '../../src/reconcile/reconcile';
import type { RunOptions } from '../../src/reconcile/run';

/** In-memory ports for reconcile: a bucket listing in pages, a set of rows, a recording publisher. */

export const NOW = new Date('2026-11-30T12:00:00.000Z');
export const clock = { now: () => NOW };

/** A run's options: a report of the whole bucket, objects an hour old or more, unless `over` says. */
export const options = (over: Partial<RunOptions> = {}): RunOptions => ({
  prefix: '',
  olderThanMs: 60 * 60 * 1000,
  apply: false,
  yes: false,
  json: false,
  dedupKeyMode: 'object',
  ...over,
});

/** A live object created `minutesAgo` before {@link NOW}. */
export function object(name: string, minutesAgo: number, generation = '1764460800123456'): ObjectResource {
  const time = new Date(NOW.getTime() - minutesAgo * 60_000).toISOString();
  return {
    kind: 'storage#object',
    id: `acme/${name}/${generation}`,
    name,
    bucket: 'acme',
    generation,
    metageneration: '1',
    contentType: 'application/pdf',
    size: '1234',
    md5Hash: 'bWQ1',
    crc32c: 'AAAAAA==',
    timeCreated: time,
    updated: time,
  } as ObjectResource;
}

export class MemoryLister implements ObjectLister {
  readonly bucket = 'acme';
  pagesServed = 0;
  constructor(
    private readonly objects: ObjectResource[],
    private readonly pageSize = 2,
  ) {}
  async *pages(prefix: string): AsyncIterable<ObjectResource[]> {
    const matching = this.objects.filter((o) => o.name.startsWith(prefix));
    for (let i = 0; i < matching.length; i += this.pageSize) {
      this.pagesServed += 1;
      yield matching.slice(i, i + this.pageSize);
    }
  }
}

/** Rows as (object_uri, processed_at); answers the query as the SQL does. */
export class MemoryIndex implements LineIndex {
  readonly queries: ComparisonQuery[] = [];
  constructor(readonly rows: Array<{ uri: string; processedAt: Date }>) {}
  async objectUris(query: ComparisonQuery): Promise<Set<string>> {
    this.queries.push(query);
    const start = `gs://${query.bucket}/${query.prefix}`;
    const t = (r: { processedAt: Date }) => r.processedAt.getTime();
    return new Set(
      this.rows
        .filter(
          (r) =>
            r.uri.startsWith(start) &&
            t(r) >= query.since.getTime() &&
            (query.until === undefined || t(r) < query.until.getTime()),
        )
        .map((r) => r.uri),
    );
  }
}

/**
 * A table with `bytesPerDay` of the comparison's columns in every key day up to {@link NOW}'s, and no
 * row of the listed objects: its dry run is what BigQuery's would be, every row of a statement's days.
 */
export class DryRunIndex implements LineIndex {
  readonly queries: ComparisonQuery[] = [];
  constructor(private readonly bytesPerDay: number) {}
  /** The estimate of a statement: the days from its `since`'s to the day before `until` (or today). */
  estimate(query: ComparisonQuery): number {
    const day = (d: Date) => Math.floor(d.getTime() / 86_400_000);
    const end = query.until === undefined ? day(NOW) + 1 : day(query.until);
    return Math.max(0, end - day(query.since)) * this.bytesPerDay;
  }
  async estimateBytes(query: ComparisonQuery): Promise<number> {
    return this.estimate(query);
  }
  async objectUris(query: ComparisonQuery): Promise<Set<string>> {
    this.queries.push(query);
    return new Set();
  }
}

export class RecordingPublisher implements NotificationPublisher {
  readonly batches: Array<Array<{ data: Buffer; attributes: Record<string, string> }>> = [];
  async publish(messages: Array<{ data: Buffer; attributes: Record<string, string> }>): Promise<string[]> {
    this.batches.push(messages);
    const before = this.batches.slice(0, -1).reduce((n, b) => n + b.length, 0);
    return messages.map((_, i) => String(before + i + 1));
  }
  get messages() {
    return this.batches.flat();
  }
}
