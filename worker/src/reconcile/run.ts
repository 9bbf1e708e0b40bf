import type { DedupKeyMode } from '../contract/settings';
import type { Clock } from '../core/ports';
import {
  announceMissing,
  applyProblem,
  costLine,
  estimateCost,
  findMissing,
  type LineIndex,
  type NotificationPublisher,
  type ObjectLister,
  objectUri,
  RECONCILE_EXIT,
  ReconcileError,
  type ReconcileReport,
  summaryLines,
} from './index';

/** Options of one reconcile run (the command's flags, or the job's environment). */
export interface RunOptions {
  prefix: string;
  olderThanMs: number;
  apply: boolean;
  yes: boolean;
  json: boolean;
  dedupKeyMode: DedupKeyMode;
  /** The comparison query's byte cap: a run that cannot fit under it is refused before it runs. */
  maximumBytesBilled?: number;
}

export interface RunDeps {
  lister: ObjectLister;
  index: LineIndex;
  /** Needed only with `apply`. */
  publisher?: NotificationPublisher;
  clock: Clock;
  /** A line of the result (stdout). */
  print: (line: string) => void;
  /** Progress for people (stderr); called with the fraction done. */
  progress?: (done: number, total: number) => void;
}

export interface RunResult {
  code: number;
  report?: ReconcileReport;
  /** The messageIds of the announcements, with `apply`. */
  announced?: string[];
  error?: ReconcileError;
}

/**
 * One reconcile run: list, compare, print the summary (or JSON), and with `apply` announce what is
 * missing after the count and cost estimate. Exit code: 0 nothing missing (or all announced),
 * 1 something missing (report mode), 2 usage or API error (one line, `ERROR: …`).
 */
export async function runReconcile(options: RunOptions, deps: RunDeps): Promise<RunResult> {
  let report: ReconcileReport | undefined;
  try {
    if (options.apply && options.dedupKeyMode === 'message') {
      // Refused before any listing: nothing in this mode can make a re-announcement safe.
      throw applyProblem({ missing: 0 }, { dedupKeyMode: 'message', yes: options.yes })!;
    }
    report = await findMissing(options, deps);
    if (!options.json) for (const line of summaryLines(report)) deps.print(line);
    if (!options.apply || report.missing === 0) {
      if (options.json) deps.print(JSON.stringify(jsonReport(report)));
      else
        for (const o of report.missingObjects)
          deps.print(`missing  ${objectUri(o)}  (created ${o.timeCreated})`);
      return {
        code: report.missing > 0 && !options.apply ? RECONCILE_EXIT.missing : RECONCILE_EXIT.ok,
        report,
      };
    }
    const estimate = estimateCost(report.missing);
    if (!options.json) deps.print(costLine(estimate));
    const problem = applyProblem(report, options);
    if (problem) throw problem;
    if (!deps.publisher) throw new ReconcileError('usage', 'no publisher for --apply');
    const announced = await announceMissing(report, {
      publisher: deps.publisher,
      clock: deps.clock,
      ...(deps.progress ? { onProgress: deps.progress } : {}),
    });
    if (options.json)
      deps.print(JSON.stringify({ ...jsonReport(report), estimate, announced: announced.length }));
    else
      deps.print(
        `announced ${announced.length} document(s) again; each gets its line as the pipeline processes it`,
      );
    return { code: RECONCILE_EXIT.ok, report, announced };
  } catch (error) {
    const e =
      error instanceof ReconcileError
        ? error
        : new ReconcileError('query_failed', String((error as Error)?.message ?? error).split('\n')[0]!, {
            cause: error,
          });
    if (options.json)
      deps.print(
        JSON.stringify({
          ...(report ? jsonReport(report) : {}),
          error: { code: e.code, message: e.message },
        }),
      );
    else deps.print(`ERROR: ${e.message}`);
    return { code: RECONCILE_EXIT.error, ...(report ? { report } : {}), error: e };
  }
}

/** The `--json` shape: the counts and the missing object URIs. */
export function jsonReport(report: ReconcileReport) {
  return {
    bucket: report.bucket,
    prefix: report.prefix,
    ...countsOf(report),
    missingObjects: report.missingObjects.map((o) => objectUri(o)),
    ...(report.comparisonEstimateBytes === undefined
      ? {}
      : { comparisonEstimateBytes: report.comparisonEstimateBytes }),
    ...((report.comparisonQueries ?? 1) > 1 ? { comparisonQueries: report.comparisonQueries } : {}),
  };
}

/** A report's counts, as the `--json` shape and the job's log line give them. */
export const countsOf = (r: ReconcileReport) => ({
  listed: r.listed,
  withLine: r.withLine,
  missing: r.missing,
  tooYoung: r.tooYoung,
  orphanRows: r.orphanRows,
});

/** A text progress bar for long runs (one line, redrawn). */
export function progressBar(done: number, total: number, width = 30): string {
  const filled = total === 0 ? width : Math.round((done / total) * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} announced`;
}
