import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';
import * as time from '@pulumiverse/time';
import { RECONCILE_EXIT } from '../../worker/src/reconcile/reconcile';
import { RECONCILE_SCHEDULE } from '../fixed';
import { alertPolicyBasics, COUNTER, oneConditionPolicy, sumOver } from './alerts';
import { DoclineComponent, type ProjectArgs } from './component';
import { LOG_METRIC_SETTLE_DURATION } from './lifecycle';

/** The reconcile entry point inside the worker image (worker/src/reconcile/main.ts, compiled). */
export const RECONCILE_ENTRY_POINT = 'worker/dist/reconcile/main.js';

/**
 * The job's command line. The entry point takes everything from its environment (it always targets
 * the cloud): `RECONCILE_MODE` says report or apply, and in the job choosing apply in the stack's
 * config is the confirmation that `--yes` gives on the command line.
 */
export function reconcileArgs(): string[] {
  return [RECONCILE_ENTRY_POINT];
}

/**
 * What a failed execution of the job means, for the alert's documentation. As a job the entry point
 * (worker/src/reconcile/main.ts) exits 0 when it found missing documents (its WARNING summary line
 * feeds the other alert) and exits with the command's error code only when reconcile itself failed.
 */
export const FAILED_EXECUTION_DOCUMENTATION =
  `A reconcile execution failed (exit ${RECONCILE_EXIT.error}): reconcile itself could not run (a permission, ` +
  'the byte cap, a missing setting; its ERROR line names it). Missing documents do not fail an execution: ' +
  'they are reported by the WARNING summary line and the "documents without a row" alert. ' +
  'Read the execution log: `gcloud run jobs executions list --job JOB`.';

/** How long one run may take: listing a large bucket and one windowed query. */
const JOB_TIMEOUT_SECONDS = 3600;

/** Arguments of {@link Reconcile}. */
export interface ReconcileArgs extends ProjectArgs {
  region: pulumi.Input<string>;
  /** The worker image (the job runs its reconcile entry point). */
  image: pulumi.Input<string>;
  /** `report` or `apply` (`off` means no Reconcile at all). */
  mode: 'report' | 'apply';
  /** MAXIMUM_BYTES_BILLED of the reconcile query, the worker's cap. */
  maximumBytesBilled: number;
  /** The documents bucket (DOCLINE_BUCKET). */
  bucketName: pulumi.Input<string>;
  /** The uploads topic's short name (DOCLINE_TOPIC); published to in apply mode only. */
  topicName: pulumi.Input<string>;
  /** `project.dataset.table` (DOCLINE_TABLE) and its dataset and location. */
  tableRef: pulumi.Input<string>;
  datasetId: pulumi.Input<string>;
  dataLocation: pulumi.Input<string>;
  /** DEDUP_KEY: reconcile compares object URIs; it refuses `--apply` in message mode. */
  dedupKeyMode: pulumi.Input<string>;
  notificationChannels?: pulumi.Input<pulumi.Input<string>[]>;
  /**
   * The stack's prefix: it starts the service account ids (`<prefix>-reconcile`,
   * `<prefix>-scheduler`) and the alerts' display names, and labels the alerts.
   */
  accountIdPrefix: string;
}

/**
 * The safety net for uploads whose notification never arrived: a Cloud Run job that compares the
 * bucket's live objects with the table and reports (or, in apply mode, announces again) what has no
 * row, started daily by Cloud Scheduler. Its account reads the bucket and the dataset and runs
 * queries; it may publish to the uploads topic only in apply mode. The scheduler's account may run this job and nothing else. Two alerts: a run
 * found missing documents (a log metric on the job's summary line), or a run failed (built-in).
 */
export class Reconcile extends DoclineComponent {
  readonly job: gcp.cloudrunv2.Job;
  readonly scheduler: gcp.cloudscheduler.Job;
  readonly serviceAccount: gcp.serviceaccount.Account;

  constructor(name: string, args: ReconcileArgs, opts?: pulumi.ComponentResourceOptions) {
    super('docline:index:Reconcile', name, opts);
    const prefix = args.accountIdPrefix;
    const account = (suffix: string, id: string, purpose: string) =>
      new gcp.serviceaccount.Account(
        `${name}-${suffix}`,
        { project: args.project, accountId: `${prefix}-${id}`, displayName: `${prefix}: ${purpose}` },
        this.child,
      );
    this.serviceAccount = account('runtime', 'reconcile', 'reconcile (Cloud Run job)');
    const schedulerAccount = account(
      'scheduler',
      'scheduler',
      'reconcile scheduler (may only run the reconcile job)',
    );
    const member = this.serviceAccount.member;
    const grants: pulumi.Resource[] = [
      new gcp.storage.BucketIAMMember(
        `${name}-object-viewer`,
        { bucket: args.bucketName, role: 'roles/storage.objectViewer', member },
        this.child,
      ),
      new gcp.bigquery.DatasetIamMember(
        `${name}-data-viewer`,
        { project: args.project, datasetId: args.datasetId, role: 'roles/bigquery.dataViewer', member },
        this.child,
      ),
      // Running a query is a project-level permission in BigQuery.
      new gcp.projects.IAMMember(
        `${name}-job-user`,
        { project: args.project, role: 'roles/bigquery.jobUser', member },
        this.child,
      ),
    ];
    if (args.mode === 'apply') {
      grants.push(
        new gcp.pubsub.TopicIAMMember(
          `${name}-publisher`,
          { project: args.project, topic: args.topicName, role: 'roles/pubsub.publisher', member },
          this.child,
        ),
      );
    }

    const envs = {
      DOCLINE_PROJECT: args.project,
      DOCLINE_BUCKET: args.bucketName,
      DOCLINE_TOPIC: args.topicName,
      DOCLINE_TABLE: args.tableRef,
      BIGQUERY_LOCATION: args.dataLocation,
      DEDUP_KEY: args.dedupKeyMode,
      RECONCILE_MODE: args.mode,
      MAXIMUM_BYTES_BILLED: String(args.maximumBytesBilled),
    };
    this.job = new gcp.cloudrunv2.Job(
      `${name}-job`,
      {
        project: args.project,
        location: args.region,
        // A job holds no data; protecting it would only block `pulumi destroy`.
        deletionProtection: false,
        template: {
          taskCount: 1,
          template: {
            serviceAccount: this.serviceAccount.email,
            timeout: `${JOB_TIMEOUT_SECONDS}s`,
            // A run that found missing documents exits 0 (its WARNING line feeds the alert); one that
            // failed exits RECONCILE_EXIT.error, and a retry would most likely meet the same fault.
            maxRetries: 0,
            containers: [
              {
                image: args.image,
                commands: ['node'],
                args: reconcileArgs(),
                envs: Object.entries(envs).map(([envName, value]) => ({ name: envName, value })),
                resources: { limits: { cpu: '1', memory: '512Mi' } },
              },
            ],
          },
        },
      },
      // Its first run must not fail for want of a grant.
      this.childAfter(...grants),
    );

    // The scheduler's account may run this job only: run.invoker on the job resource
    // (it carries run.jobs.run), no project-wide role.
    const runner = new gcp.cloudrunv2.JobIamMember(
      `${name}-scheduler-invoker`,
      {
        project: args.project,
        location: args.region,
        name: this.job.name,
        role: 'roles/run.invoker',
        member: schedulerAccount.member,
      },
      this.child,
    );
    this.scheduler = new gcp.cloudscheduler.Job(
      `${name}-schedule`,
      {
        project: args.project,
        region: args.region,
        description: `${args.accountIdPrefix}: daily reconcile (${args.mode})`,
        schedule: RECONCILE_SCHEDULE,
        timeZone: 'Etc/UTC',
        retryConfig: { retryCount: 0 },
        httpTarget: {
          httpMethod: 'POST',
          uri: pulumi.interpolate`https://run.googleapis.com/v2/projects/${args.project}/locations/${args.region}/jobs/${this.job.name}:run`,
          oauthToken: {
            serviceAccountEmail: schedulerAccount.email,
            scope: 'https://www.googleapis.com/auth/cloud-platform',
          },
        },
      },
      this.childAfter(runner),
    );

    const jobLogs = pulumi.interpolate`resource.type = "cloud_run_job" AND resource.labels.job_name = "${this.job.name}"`;
    // Counts summary lines with `missing` above 0.
    const missingMetric = new gcp.logging.Metric(
      `${name}-missing`,
      {
        project: args.project,
        description: 'docline reconcile runs that found documents without a row (summary line, missing > 0).',
        filter: pulumi.interpolate`${jobLogs} AND jsonPayload.component = "reconcile" AND jsonPayload.missing > 0`,
        metricDescriptor: COUNTER,
      },
      this.child,
    );
    // See LOG_METRIC_SETTLE_DURATION: up to 10 minutes before an alert may read a new log metric.
    const settled = new time.Sleep(
      `${name}-metric-settle`,
      { createDuration: LOG_METRIC_SETTLE_DURATION, triggers: { missing: missingMetric.id } },
      this.childAfter(missingMetric),
    );
    // Both alerts fire on any count within ten minutes. An incident stays open a day at most: the
    // next daily run says whether it still holds.
    const dailyRunAlert = (
      suffix: string,
      alert: { displayName: string; condition: string; filter: pulumi.Input<string>; content: string },
      childOptions: pulumi.CustomResourceOptions,
    ) =>
      oneConditionPolicy(
        `${name}-${suffix}`,
        alertPolicyBasics(args.project, args.accountIdPrefix, args.notificationChannels ?? []),
        {
          displayName: alert.displayName,
          condition: {
            displayName: alert.condition,
            conditionThreshold: {
              filter: alert.filter,
              comparison: 'COMPARISON_GT',
              thresholdValue: 0,
              duration: '0s',
              aggregations: sumOver(600),
              evaluationMissingData: 'EVALUATION_MISSING_DATA_INACTIVE',
            },
          },
          alertStrategy: { autoClose: '86400s' },
          documentation: alert.content,
        },
        childOptions,
      );
    dailyRunAlert(
      'missing',
      {
        displayName: `${args.accountIdPrefix}: documents without a row (reconcile)`,
        condition: 'A reconcile run found missing documents',
        filter: pulumi.interpolate`resource.type = "cloud_run_job" AND metric.type = "logging.googleapis.com/user/${missingMetric.name}"`,
        content:
          'The daily reconcile found documents in the bucket without a row in the table (the job log lists them). ' +
          'Bring them in with `npm run reconcile -- --target cloud --apply`, or set docline:reconcileMode apply.',
      },
      this.childAfter(settled),
    );
    dailyRunAlert(
      'failed',
      {
        displayName: `${args.accountIdPrefix}: reconcile job failed`,
        condition: 'A reconcile execution failed',
        filter: pulumi.interpolate`${jobLogs} AND metric.type = "run.googleapis.com/job/completed_execution_count" AND metric.labels.result = "failed"`,
        content: FAILED_EXECUTION_DOCUMENTATION,
      },
      this.child,
    );

    this.registerOutputs({ jobName: this.job.name, schedulerName: this.scheduler.name });
  }
}
