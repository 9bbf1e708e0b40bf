import { costModel } from '../contract/cost-model';
import type { DedupKeyMode } from '../contract/settings';
import type { Clock } from '../core/ports';
import { type ObjectResource, objectUri, reconcileNotification } from './notification';

/**
 * Reconcile: compare the bucket's live objects with the table's rows, report every object that has
 * no line, and (with apply) announce each one again exactly as Cloud Storage would have. Safe in
 * object mode: the key `gs://bucket/name#generation` absorbs an announcement of an object that
 * already has its row (a late real notification, a second reconcile run).
 *
 * The ports below are implemented for the local pipeline (folder bucket, SQLite, emulator) and for
 * the cloud (Cloud Storage, BigQuery, Pub/Sub); this module holds the algorithm once.
 */

/** Lists the live objects of a bucket, one page at a time (any number of pages). */
export interface ObjectLister {
  readonly bucket: string;
  pages(prefix: string): AsyncIterable<ObjectResource[]>;
}

/** The object URIs that have at least one row (any status), among rows of one bucket and prefix. */
export interface LineIndex {
  /**
   * @param since the oldest listed object's creation time: a row is never older than its object, so
   *   older rows cannot matter (and on BigQuery this bounds the partitions read).
   */
  objectUris(query: { bucket: string; prefix: string; since: Date }): Promise<Set<string>>;
  /**
   * The pre-run estimate of {@link objectUris} for the same query, in bytes, where the index can
   * tell it before running (BigQuery: a dry run); absent, only the least bytes are known.
   */
  estimateBytes?(query: { bucket: string; prefix: string; since: Date }): Promise<number>;
}

/** Publishes messages to the pipeline's topic; resolves with their messageIds, in order. */
export interface NotificationPublisher {
  publish(messages: Array<{ data: Buffer; attributes: Record<string, string> }>): Promise<string[]>;
}

/** Raised for every failure reconcile reports: a stable code and one clear line. */
export class ReconcileError extends Error {
  constructor(
    readonly code:
      | 'usage'
      | 'message_mode'
      | 'needs_yes'
      | 'list_failed'
      | 'query_failed'
      | 'bytes_billed_limit'
      | 'publish_failed',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ReconcileError';
  }
}

/** Exit codes of `npm run reconcile` and of the job. */
export const RECONCILE_EXIT = { ok: 0, missing: 1, error: 2 } as const;

/** Above this many documents, `--apply` needs `--yes`. */
export const APPLY_CONFIRM_THRESHOLD = 100;
/** Messages per publish call (Pub/Sub takes at most 1,000 per request). */
export const PUBLISH_BATCH = 100;
/** Default of `--older-than`: leave uploads that may still be in flight alone. */
export const DEFAULT_OLDER_THAN_MS = 60 * 60 * 1000;

export interface ReconcileOptions {
  prefix: string;
  olderThanMs: number;
  /** The byte cap of the comparison query: a run that cannot fit under it is refused before it. */
  maximumBytesBilled?: number;
}

/**
 * The least the comparison query's pre-run estimate can be for these listed objects: the bytes of
 * the columns it reads (`object_uri`, `bucket`, `object_name`, `key_day`) in their own rows. The
 * query reads every row since the oldest listed object's day, of any prefix (a prefix does not prune
 * partitions; clustering does not shrink the estimate), so the real estimate is at least this, and
 * grows with how far back the oldest object goes, not with how few objects the prefix holds.
 */
export function comparisonLeastBytes(objects: readonly ObjectResource[]): number {
  let bytes = 0;
  for (const o of objects) {
    const strings = [objectUri(o), o.bucket, o.name].reduce(
      (n, v) => n + 2 + Buffer.byteLength(v, 'utf8'),
      0,
    );
    bytes += strings + 8;
  }
  return bytes;
}

/** What reconcile found. Counts are objects, except {@link orphanRows} (distinct object URIs of rows). */
export interface ReconcileReport {
  bucket: string;
  prefix: string;
  listed: number;
  withLine: number;
  missing: number;
  tooYoung: number;
  /** Rows whose object generation is no longer live (overwritten or deleted): for information. */
  orphanRows: number;
  /** The missing objects, oldest first. */
  missingObjects: ObjectResource[];
  /** The comparison query's pre-run estimate in bytes, where the index could tell it (BigQuery's dry run). */
  comparisonEstimateBytes?: number;
}

/** What a run refused by the byte cap can do instead. */
const NARROWER_RUN =
  'A prefix narrows the run only if its objects are recent (the query reads every ' +
  'key day since its oldest object, whatever the prefix): run it per recent date-shaped prefix (--prefix 2026/11/), ' +
  'or raise the cap for this run (--maximum-bytes-billed; MAXIMUM_BYTES_BILLED for the job).';

/** Compares the listing with the rows. */
export async function findMissing(
  options: ReconcileOptions,
  deps: { lister: ObjectLister; index: LineIndex; clock: Clock },
): Promise<ReconcileReport> {
  const objects: ObjectResource[] = [];
  try {
    for await (const page of deps.lister.pages(options.prefix)) objects.push(...page);
  } catch (error) {
    if (error instanceof ReconcileError) throw error;
    throw new ReconcileError(
      'list_failed',
      `cannot list gs://${deps.lister.bucket}/${options.prefix}: ${oneLine(error)}`,
      { cause: error },
    );
  }
  const report: ReconcileReport = {
    bucket: deps.lister.bucket,
    prefix: options.prefix,
    listed: objects.length,
    withLine: 0,
    missing: 0,
    tooYoung: 0,
    orphanRows: 0,
    missingObjects: [],
  };
  if (objects.length === 0) return report;
  const created = (o: ObjectResource) => Date.parse(o.timeCreated);
  const oldest = Math.min(...objects.map(created));
  const leastBytes = comparisonLeastBytes(objects);
  if (options.maximumBytesBilled !== undefined && leastBytes > options.maximumBytesBilled) {
    const since = new Date(oldest).toISOString().slice(0, 10);
    throw new ReconcileError(
      'bytes_billed_limit',
      `the comparison would read every row since ${since} (the oldest of the ${objects.length} objects listed), ` +
        `at least ${leastBytes} bytes for their own rows alone, over the byte cap of ${options.maximumBytesBilled} bytes: ` +
        `BigQuery would refuse it. ${NARROWER_RUN}`,
    );
  }
  const comparison = { bucket: deps.lister.bucket, prefix: options.prefix, since: new Date(oldest) };
  if (options.maximumBytesBilled !== undefined && deps.index.estimateBytes) {
    // The honest figure: what BigQuery estimates for the comparison itself, rows of other prefixes included.
    const estimate = await deps.index.estimateBytes(comparison);
    if (estimate > options.maximumBytesBilled) {
      const since = new Date(oldest).toISOString().slice(0, 10);
      throw new ReconcileError(
        'bytes_billed_limit',
        `the comparison is estimated at ${estimate} bytes (a dry run: every row since ${since}, the oldest of the ` +
          `${objects.length} objects listed, whatever the prefix), over the byte cap of ${options.maximumBytesBilled} bytes: ` +
          `BigQuery would refuse it. ${NARROWER_RUN}`,
      );
    }
    report.comparisonEstimateBytes = estimate;
  }
  let lines: Set<string>;
  try {
    lines = await deps.index.objectUris(comparison);
  } catch (error) {
    if (error instanceof ReconcileError) throw error;
    throw new ReconcileError('query_failed', `cannot read the rows: ${oneLine(error)}`, { cause: error });
  }
  const cutoff = deps.clock.now().getTime() - options.olderThanMs;
  const live = new Set<string>();
  for (const object of objects) {
    const uri = objectUri(object);
    live.add(uri);
    if (lines.has(uri)) report.withLine += 1;
    else if (!(created(object) <= cutoff)) report.tooYoung += 1;
    else report.missingObjects.push(object);
  }
  report.missingObjects.sort((a, b) => created(a) - created(b));
  report.missing = report.missingObjects.length;
  report.orphanRows = [...lines].filter((uri) => !live.has(uri)).length;
  return report;
}

/** The estimate printed before publishing: the benchmark's cost model for this many documents. */
export interface CostEstimate {
  documents: number;
  analysisUsd: number;
  bigQueryUsd: number;
  totalUsd: number;
}

export function estimateCost(documents: number): CostEstimate {
  const model = costModel({ documents });
  // The worker's statement for each document: the MERGE pruned to its key day, clustered (a new
  // document's seen() is skipped: the memo holds nothing for it), upper bound.
  const merge = model.merge.find((s) => s.pruned && s.clustered)!;
  const analysisUsd = model.gemini.usd;
  const bigQueryUsd = merge.usdHigh;
  return { documents, analysisUsd, bigQueryUsd, totalUsd: analysisUsd + bigQueryUsd };
}

export function costLine(estimate: CostEstimate): string {
  const usd = (n: number) => `$${n.toFixed(n < 1 ? 4 : 2)}`;
  return (
    `${estimate.documents} document(s) to announce; estimated cost ${usd(estimate.totalUsd)} ` +
    `(analysis ${usd(estimate.analysisUsd)} + BigQuery ${usd(estimate.bigQueryUsd)}, from the benchmark's cost model)`
  );
}

/** Refuses `--apply` where it would not be safe, with the reason. */
export function applyProblem(
  report: Pick<ReconcileReport, 'missing'>,
  options: { dedupKeyMode: DedupKeyMode; yes: boolean },
): ReconcileError | undefined {
  if (options.dedupKeyMode === 'message') {
    return new ReconcileError(
      'message_mode',
      '--apply refused: the pipeline runs with DEDUP_KEY=message, where every new message is new work, ' +
        'so announcing an object again could give it a second line (and a second paid analysis). ' +
        'Reconcile can only report in that mode; switch to DEDUP_KEY=object to re-announce safely.',
    );
  }
  if (report.missing > APPLY_CONFIRM_THRESHOLD && !options.yes) {
    return new ReconcileError(
      'needs_yes',
      `--apply would announce ${report.missing} documents (more than ${APPLY_CONFIRM_THRESHOLD}): ` +
        'check the estimate above and add --yes to go ahead.',
    );
  }
  return undefined;
}

/**
 * Announces every missing object again, in batches. `onProgress` gets the count done after each
 * batch. Returns the messageIds, in the order of `report.missingObjects`.
 */
export async function announceMissing(
  report: ReconcileReport,
  deps: {
    publisher: NotificationPublisher;
    clock: Clock;
    onProgress?: (done: number, total: number) => void;
  },
): Promise<string[]> {
  const runAt = deps.clock.now();
  const ids: string[] = [];
  const total = report.missingObjects.length;
  for (let i = 0; i < total; i += PUBLISH_BATCH) {
    const batch = report.missingObjects.slice(i, i + PUBLISH_BATCH);
    try {
      ids.push(...(await deps.publisher.publish(batch.map((o) => reconcileNotification(o, runAt)))));
    } catch (error) {
      throw new ReconcileError(
        'publish_failed',
        `publishing failed after ${ids.length} of ${total} announcements (a new run announces the rest; ` +
          `the object key absorbs any repeat): ${oneLine(error)}`,
        { cause: error },
      );
    }
    deps.onProgress?.(ids.length, total);
  }
  return ids;
}

/** The summary lines printed for people. */
export function summaryLines(report: ReconcileReport): string[] {
  const where = `gs://${report.bucket}/${report.prefix}`;
  return [
    `reconcile ${where}: ${report.listed} objects listed, ${report.withLine} with a line, ` +
      `${report.missing} missing, ${report.tooYoung} too young to judge, ` +
      `${report.orphanRows} rows whose object is gone (for information)`,
    ...(report.comparisonEstimateBytes === undefined
      ? []
      : [`the comparison query was estimated at ${report.comparisonEstimateBytes} bytes (a dry run)`]),
  ];
}

/** The first line of an error's message, for one-line reports. */
export function oneLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.trim().split('\n')[0]!.slice(0, 500);
}

/** Parses `--older-than`: `90s`, `30m`, `1h`, `2d`, or a number of milliseconds. */
export function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!m)
    throw new ReconcileError('usage', `--older-than must be a duration like 30m, 1h or 2d (got "${text}")`);
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(m[2] ?? 'ms') as 'ms'];
  return Math.round(Number(m[1]) * unit);
}
