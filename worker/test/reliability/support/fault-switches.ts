/**
 * What the faulty worker (faulty-worker.ts, a process entry) and the suites share. Kept apart from
 * the entry, which starts a worker as soon as it is loaded.
 */

/** The points where the faulty worker can be killed. */
export type CrashPoint = 'after_read' | 'after_analysis' | 'after_record';

/** The file, in the worker's data dir, where every analysis appends one line before it starts. */
export const ANALYSES_LOG = 'analyses.log';

/** One line of {@link ANALYSES_LOG}. */
export interface AnalysisLogLine {
  name: string;
  pid: number;
}
