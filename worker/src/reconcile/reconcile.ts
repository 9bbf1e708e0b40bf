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

/**
 * One comparison statement: the rows of one bucket and prefix from `since` on and, unless it is the
 * last of a run, before `until`. A run's statements cover contiguous ranges (each `until` is the
 * next one's `since`, the last has none), so together they read exactly what one statement from the
 * oldest object on would.
 */
export interface ComparisonQuery {
  bucket: string;
  prefix: string;
  /**
   * The first statement's: the oldest listed object's creation time (a row is never older than its
   * object, so older rows cannot matter); a later statement's: the start of its first key day.
   */
  since: Date;
  /** The start of the day after the statement's last key day; absent on a run's last statement. */
  until?: Date;
}

/** The object URIs that have at least one row (any status), among rows of one bucket and prefix. */
export interface LineIndex {
  /**
   * The rows of {@link ComparisonQuery}'s range, by the index's own time column (BigQuery: the key
   * day, which bounds the partitions read; SQLite: `processed_at`).
   */
  objectUris(query: ComparisonQuery): Promise<Set<string>>;
  /**
   * The pre-run estimate of {@link objectUris} for the same query, in bytes, where the index can
   * tell it before running (BigQuery: a dry run); absent, only the least bytes are known.
   */
  estimateBytes?(query: ComparisonQuery): Promise<number>;
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
 * The least the comparison's pre-run estimate can be for these listed objects: the bytes of the
 * columns it reads (`object_uri`, `bucket`, `object_name`, `key_day`) in their own rows. A statement
 * reads every row of its key days, of any prefix (a prefix does not prune partitions; clustering
 * does not shrink the estimate), so its real estimate is at least this for the objects of its days.
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
  /**
   * The comparison's pre-run estimate in bytes, where the index could tell it (BigQuery's dry run):
   * the sum over its statements.
   */
  comparisonEstimateBytes?: number;
  /** The comparison's statements, by key-day range: more than one when one would be over the cap. */
  comparisonQueries?: number;
}

const DAY_MS = 86_400_000;
const dayOf = (ms: number) => Math.floor(ms / DAY_MS);
const isoDay = (day: number) => new Date(day * DAY_MS).toISOString().slice(0, 10);

/** What a run refused by the byte cap can do instead, when one key day alone is over it. */
const RAISE_CAP =
  'No split by key day makes it smaller (a prefix prunes no partition): raise the cap for this run ' +
  '(--maximum-bytes-billed; MAXIMUM_BYTES_BILLED for the job).';

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
  const statements = await planComparison(objects, options, deps);
  if (statements.some((s) => s.estimateBytes !== undefined))
    report.comparisonEstimateBytes = statements.reduce((n, s) => n + (s.estimateBytes ?? 0), 0);
  const lines = new Set<string>();
  try {
    for (const statement of statements)
      for (const uri of await deps.index.objectUris(statement.query)) lines.add(uri);
  } catch (error) {
    if (error instanceof ReconcileError) throw error;
    throw new ReconcileError('query_failed', `cannot read the rows: ${oneLine(error)}`, { cause: error });
  }
  report.comparisonQueries = statements.length;
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

/**
 * The comparison's statements, each under the byte cap: one from the oldest listed object on when
 * it fits, else the range split in two by key day, again and again, until every part fits. A
 * statement's size is the index's dry run where it has one, else the least bytes of the listed
 * objects created in its days. Everything is planned before any statement runs; a single key day
 * over the cap is refused (no split makes it smaller), before any statement runs.
 */
async function planComparison(
  objects: readonly ObjectResource[],
  options: ReconcileOptions,
  deps: { lister: ObjectLister; index: LineIndex; clock: Clock },
): Promise<Array<{ query: ComparisonQuery; estimateBytes?: number }>> {
  const created = objects.map((o) => Date.parse(o.timeCreated));
  // A loop, not Math.min(...created): spreading a listing of some 100,000 objects or more into
  // arguments overflows the stack, and a whole bucket at volume holds millions.
  let oldest = Number.POSITIVE_INFINITY;
  let newest = Number.NEGATIVE_INFINITY;
  for (const t of created) {
    if (t < oldest) oldest = t;
    if (t > newest) newest = t;
  }
  const firstDay = dayOf(oldest);
  // Key days are UTC days from the oldest object's on; an open range has no last day.
  const query = (from: number, to: number | undefined): ComparisonQuery => ({
    bucket: deps.lister.bucket,
    prefix: options.prefix,
    since: new Date(from === firstDay ? oldest : from * DAY_MS),
    ...(to === undefined ? {} : { until: new Date(to * DAY_MS) }),
  });
  const cap = options.maximumBytesBilled;
  if (cap === undefined) return [{ query: query(firstDay, undefined) }];

  const byDay = new Map<number, ObjectResource[]>();
  objects.forEach((o, i) => {
    const day = dayOf(created[i]!);
    const own = byDay.get(day);
    if (own) own.push(o);
    else byDay.set(day, [o]);
  });
  for (const [day, own] of [...byDay].sort(([a], [b]) => a - b)) {
    const least = comparisonLeastBytes(own);
    if (least > cap)
      throw new ReconcileError(
        'bytes_billed_limit',
        `the comparison must read key day ${isoDay(day)} whole: at least ${least} bytes for the rows of the ` +
          `${own.length} objects listed from that day alone, over the byte cap of ${cap} bytes: BigQuery would refuse it. ${RAISE_CAP}`,
      );
  }
  const leastOf = (from: number, to: number | undefined) =>
    comparisonLeastBytes(
      objects.filter((_, i) => dayOf(created[i]!) >= from && (to === undefined || dayOf(created[i]!) < to)),
    );
  const sizeOf = async (q: ComparisonQuery, from: number, to: number | undefined) =>
    deps.index.estimateBytes ? deps.index.estimateBytes(q) : leastOf(from, to);
  // An open range's days end with today's, or the newest object's if later.
  const lastDay = Math.max(dayOf(deps.clock.now().getTime()), dayOf(newest));

  const plan = async (
    from: number,
    to: number | undefined,
  ): Promise<Array<{ query: ComparisonQuery; estimateBytes?: number }>> => {
    const q = query(from, to);
    const bytes = await sizeOf(q, from, to);
    const known = deps.index.estimateBytes ? { estimateBytes: bytes } : {};
    if (bytes <= cap) return [{ query: q, ...known }];
    const end = to ?? lastDay + 1;
    if (end - from <= 1)
      throw new ReconcileError(
        'bytes_billed_limit',
        `the comparison of key day ${isoDay(from)}${to === undefined ? ' (and any later)' : ''} alone is estimated at ${bytes} bytes ` +
          `(a dry run: that day's rows, whatever the prefix), over the byte cap of ${cap} bytes: BigQuery would refuse it. ${RAISE_CAP}`,
      );
    const middle = from + Math.floor((end - from) / 2);
    return [...(await plan(from, middle)), ...(await plan(middle, to))];
  };
  return plan(firstDay, undefined);
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
      : (report.comparisonQueries ?? 1) > 1
        ? [
            `the comparison ran as ${report.comparisonQueries} queries by key day, each under the byte cap, ` +
              `estimated at ${report.comparisonEstimateBytes} bytes together (dry runs)`,
          ]
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
