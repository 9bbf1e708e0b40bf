/**
 * The reconcile entry point of the worker image (`node worker/dist/reconcile/main.js`): the cloud
 * target, configured from the environment. Run as a Cloud Run job (CLOUD_RUN_JOB set) it prints its
 * summary as ONE Cloud Logging JSON line (WARNING when documents are missing, so an alert can fire);
 * otherwise the same lines as `npm run reconcile -- --target cloud`. Exit codes as the command's,
 * except that a job exits 0 when it found missing documents (its WARNING line reports them) and
 * fails only when reconcile itself failed.
 */
import { systemClock } from '../core/ports';
import { cloudSources } from './cloud';
import { jobConfig, runsAsJob } from './config';
import { oneLine, RECONCILE_EXIT, type ReconcileReport } from './reconcile';
import { countsOf, runReconcile } from './run';

/** The one log line of a job run. */
export function jobLogLine(report: ReconcileReport | undefined, error?: { code: string; message: string }) {
  if (!report || error) {
    return {
      severity: 'ERROR',
      message: `reconcile failed: ${error?.message ?? 'no report'}`,
      component: 'reconcile',
      ...(error ? { code: error.code } : {}),
      ...(report ? countsOf(report) : {}),
    };
  }
  return {
    severity: report.missing > 0 ? 'WARNING' : 'INFO',
    message:
      `reconcile gs://${report.bucket}/${report.prefix}: ${report.listed} listed, ${report.withLine} with a line, ` +
      `${report.missing} missing, ${report.tooYoung} too young, ${report.orphanRows} rows whose object is gone`,
    component: 'reconcile',
    ...countsOf(report),
  };
}

export async function main(env: NodeJS.ProcessEnv): Promise<number> {
  const job = runsAsJob(env);
  let config: ReturnType<typeof jobConfig>;
  try {
    config = jobConfig(env);
  } catch (error) {
    const message = oneLine(error);
    console.log(
      job ? JSON.stringify(jobLogLine(undefined, { code: 'usage', message })) : `ERROR: ${message}`,
    );
    return RECONCILE_EXIT.error;
  }
  const sources = cloudSources(config.cloud, {
    raiseCapHint: 'MAXIMUM_BYTES_BILLED (Pulumi: maximumBytesBilled)',
  });
  try {
    const result = await runReconcile(
      {
        prefix: config.prefix,
        olderThanMs: config.olderThanMs,
        apply: config.apply,
        // In the job, choosing apply in the stack's config is the confirmation.
        yes: true,
        json: false,
        dedupKeyMode: config.cloud.dedupKeyMode,
        maximumBytesBilled: config.cloud.maximumBytesBilled,
      },
      { ...sources, clock: systemClock, print: job ? () => {} : (line) => console.log(line) },
    );
    if (job) {
      const error = result.error ? { code: result.error.code, message: result.error.message } : undefined;
      console.log(JSON.stringify(jobLogLine(result.report, error)));
      // As a job, a failed execution means reconcile itself failed (and Cloud Run may retry it);
      // missing documents are reported by the WARNING line, which the alert watches.
      return result.code === RECONCILE_EXIT.missing ? RECONCILE_EXIT.ok : result.code;
    }
    return result.code;
  } finally {
    await sources.close();
  }
}

if (require.main === module) {
  main(process.env).then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error);
      process.exit(RECONCILE_EXIT.error);
    },
  );
}
