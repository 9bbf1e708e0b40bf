import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';
import * as time from '@pulumiverse/time';
import { PARTITION_COLUMN } from '../../worker/src/contract/row';
import { CANARY_PREFIX } from '../../worker/src/contract/views';
import { DUPLICATE_RATE_PER_MILLE, OLDEST_UNACKED_AGE_SECONDS } from '../fixed';
import { DoclineComponent, type ProjectArgs } from './component';
import { grantsSettled, LOG_METRIC_SETTLE_DURATION } from './lifecycle';

/** The user label every alert policy carries: the stack's prefix, to tell two stacks in one project apart. */
export const STACK_LABEL = 'docline-stack';

/** What every alert policy of a stack shares: its project, its channels, its label, conditions joined by OR. */
export function alertPolicyBasics(
  project: pulumi.Input<string>,
  prefix: string,
  notificationChannels: pulumi.Input<pulumi.Input<string>[]>,
) {
  return { project, combiner: 'OR', notificationChannels, userLabels: { [STACK_LABEL]: prefix } };
}

/** An alert policy's documentation, in Markdown. */
export const markdown = (content: string) => ({ mimeType: 'text/markdown', content });

/** An alert policy of one condition, with the basics it shares with the others and its Markdown documentation. */
export function oneConditionPolicy(
  name: string,
  basics: ReturnType<typeof alertPolicyBasics>,
  {
    condition,
    documentation,
    ...policy
  }: Omit<gcp.monitoring.AlertPolicyArgs, 'combiner' | 'conditions' | 'documentation'> & {
    condition: gcp.types.input.monitoring.AlertPolicyCondition;
    documentation: string;
  },
  opts: pulumi.CustomResourceOptions,
): gcp.monitoring.AlertPolicy {
  const args = { ...basics, ...policy, conditions: [condition], documentation: markdown(documentation) };
  return new gcp.monitoring.AlertPolicy(name, args, opts);
}

/** The worker's log lines: those of its Cloud Run service. */
export const workerLogs = (serviceName: pulumi.Input<string>) =>
  pulumi.interpolate`resource.type = "cloud_run_revision" AND resource.labels.service_name = "${serviceName}"`;

/** Sum every series of a metric over `seconds` (a count per window). */
export const sumOver = (seconds: number) => [
  { alignmentPeriod: `${seconds}s`, perSeriesAligner: 'ALIGN_DELTA', crossSeriesReducer: 'REDUCE_SUM' },
];

/** The descriptor of a log metric that counts lines. */
export const COUNTER = { metricKind: 'DELTA', valueType: 'INT64', unit: '1' };

/** A log filter term that leaves out the worker's lines about the deploy canary's objects. */
export const notCanaryLog = `NOT jsonPayload.objectUri =~ "^gs://[^/]+/${CANARY_PREFIX}"`;

/** Window over which the duplicate share is computed; long enough to hold a few hundred answers. */
const DUPLICATE_WINDOW_SECONDS = 600;
/** The share of all answers above which duplicate answers alert (infra/fixed.ts). */
const DUPLICATE_RATE_THRESHOLD = DUPLICATE_RATE_PER_MILLE / 1000;

/** The parts of the pipeline that {@link Alerts} watches and the dashboard charts. */
export interface ObservedPipelineArgs extends ProjectArgs {
  /**
   * The stack's prefix (`docline-<stack>`): it starts every display name and is the value of the
   * {@link STACK_LABEL} label, so that two stacks in one project never share an alert's or a
   * dashboard's name.
   */
  prefix: string;
  /** The push subscription (its short name): the age of its oldest unacked message is watched. */
  pushSubscriptionName: pulumi.Input<string>;
  /** The dead-letter pull subscription (its short name): messages piling up there are watched. */
  deadLetterSubscriptionName: pulumi.Input<string>;
  /** The worker's Cloud Run service name; its log lines feed the outcome metrics. */
  serviceName: pulumi.Input<string>;
}

/** Arguments of {@link Alerts}. */
export interface AlertsArgs extends ObservedPipelineArgs {
  /** Notification channels every policy notifies. Default none (incidents show in the console). */
  notificationChannels?: pulumi.Input<pulumi.Input<string>[]>;
  /** The table the hourly check reads (`project.dataset.table`), recent partitions only. */
  tableRef: pulumi.Input<string>;
  /** The table and the duplicate_objects view resources: the check starts after both exist. */
  table: pulumi.Resource;
  duplicateObjectsView: pulumi.Resource;
  /** Days of partitions the check reads: the redelivery window. */
  redeliveryWindowDays: pulumi.Input<number>;
  /** The dataset of that view (the check's account may read it) and its location. */
  datasetId: pulumi.Input<string>;
  dataLocation: pulumi.Input<string>;
}

/** How often the scheduled query looks for objects with more than one ok row, and how far back. */
const DUPLICATE_OBJECTS_CHECK_HOURS = 1;

/**
 * The scheduled query's SQL: it fails (BigQuery's ERROR()) when objects got a second ok row within
 * the last period, so that the transfer run logs an error the alert matches. Cloud Monitoring cannot
 * read BigQuery; a failing scheduled query is how a non-empty view becomes an incident.
 *
 * It groups like the duplicate_objects view (ok rows of one object_uri), but reads the table with a
 * filter on the partitioning column, so only the last `windowDays` partitions are scanned: the
 * view aggregates the whole table first, and its cost would grow with the table.
 */
export function duplicateObjectsCheckSql(table: string, windowDays: number): string {
  return (
    `SELECT IF(COUNT(*) = 0, 'no duplicate objects', ERROR(FORMAT('docline: %d objects have more than one ok row, ` +
    `the last in the past ${DUPLICATE_OBJECTS_CHECK_HOURS} h; see the duplicate_objects view', COUNT(*)))) AS result ` +
    `FROM (SELECT object_uri FROM \`${table}\` ` +
    // The partitioning column (each key's day): a filter on it prunes, one on processed_at would not.
    `WHERE ${PARTITION_COLUMN} >= DATE_SUB(CURRENT_DATE(), INTERVAL ${windowDays} DAY) ` +
    `AND status = 'ok' AND object_uri IS NOT NULL GROUP BY object_uri ` +
    `HAVING COUNT(*) > 1 AND MAX(processed_at) >= TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL ${DUPLICATE_OBJECTS_CHECK_HOURS} HOUR))`
  );
}

/**
 * Alert policies on the symptoms that need a human: dead letters accumulating, the push backlog
 * getting old, a dependency of the worker out, the worker answering `duplicate` too often, and the
 * hourly duplicate-objects check failing or finding an object with more than one `ok` row. A few
 * duplicates per mille are Pub/Sub's at-least-once delivery; a few percent mean the ack deadline is
 * too short for the worker or a second notification exists.
 */
export class Alerts extends DoclineComponent {
  /** Counts the worker's `duplicate` answers. */
  readonly duplicateAnswers: gcp.logging.Metric;
  /** Counts every answer (ok, rejected, duplicate): the denominator of the duplicate share. */
  readonly allAnswers: gcp.logging.Metric;
  /** The wait between the log metrics and the policies that read them. */
  readonly metricsSettled: time.Sleep;
  /** The hourly scheduled query over recent partitions, and the alert on its failures. */
  readonly duplicateObjectsCheck: gcp.bigquery.DataTransferConfig;

  constructor(name: string, args: AlertsArgs, opts?: pulumi.ComponentResourceOptions) {
    super('docline:index:Alerts', name, opts);
    const common = alertPolicyBasics(args.project, args.prefix, args.notificationChannels ?? []);
    const subscriptionMetric = (metric: string, subscription: pulumi.Input<string>) =>
      pulumi.interpolate`resource.type = "pubsub_subscription" AND resource.labels.subscription_id = "${subscription}" AND metric.type = "pubsub.googleapis.com/subscription/${metric}"`;

    const deadLetters = oneConditionPolicy(
      `${name}-dead-letters`,
      common,
      {
        displayName: pulumi.interpolate`${args.prefix}: dead letters in ${args.deadLetterSubscriptionName}`,
        condition: {
          displayName: 'Undelivered dead letters',
          conditionThreshold: {
            filter: subscriptionMetric('num_undelivered_messages', args.deadLetterSubscriptionName),
            comparison: 'COMPARISON_GT',
            // Any dead letter is an incident.
            thresholdValue: 0,
            duration: '0s',
            aggregations: [{ alignmentPeriod: '300s', perSeriesAligner: 'ALIGN_MAX' }],
          },
        },
        documentation:
          'Messages reached the dead-letter topic after the maximum delivery attempts. Inspect them with ' +
          '`gcloud pubsub subscriptions pull SUBSCRIPTION --limit 10`, fix the cause, then replay them.',
      },
      this.child,
    );

    const backlogAge = oneConditionPolicy(
      `${name}-backlog-age`,
      common,
      {
        displayName: pulumi.interpolate`${args.prefix}: old unacked messages in ${args.pushSubscriptionName}`,
        condition: {
          displayName: 'Oldest unacked message age',
          conditionThreshold: {
            filter: subscriptionMetric('oldest_unacked_message_age', args.pushSubscriptionName),
            comparison: 'COMPARISON_GT',
            thresholdValue: OLDEST_UNACKED_AGE_SECONDS,
            duration: '300s',
            aggregations: [{ alignmentPeriod: '60s', perSeriesAligner: 'ALIGN_MAX' }],
          },
        },
        documentation:
          'The worker is not acknowledging messages: it is failing (503s retry until dead-lettered), too slow, ' +
          'or not reachable. Check the worker logs and the push subscription metrics.',
      },
      this.child,
    );

    const logs = workerLogs(args.serviceName);
    this.duplicateAnswers = new gcp.logging.Metric(
      `${name}-duplicate-answers`,
      {
        project: args.project,
        description: 'docline worker answers with status duplicate (a redelivery, or a lost race).',
        // The deploy canary is left out of the duplicate share (it is one invoice per deploy, not
        // traffic); it still counts as an answer, so a canary alone is never "uploads, no answer".
        filter: pulumi.interpolate`${logs} AND jsonPayload.status = "duplicate" AND ${notCanaryLog}`,
        metricDescriptor: COUNTER,
      },
      this.child,
    );
    this.allAnswers = new gcp.logging.Metric(
      `${name}-all-answers`,
      {
        project: args.project,
        description: 'docline worker answers of every status (ok, rejected, duplicate), by status.',
        filter: pulumi.interpolate`${logs} AND jsonPayload.status = ("ok" OR "rejected" OR "duplicate")`,
        // The dashboard charts answers by status; the alert sums over it.
        metricDescriptor: { ...COUNTER, labels: [{ key: 'status', valueType: 'STRING' }] },
        labelExtractors: { status: 'EXTRACT(jsonPayload.status)' },
      },
      this.child,
    );
    this.metricsSettled = new time.Sleep(
      `${name}-metrics-settle`,
      {
        createDuration: LOG_METRIC_SETTLE_DURATION,
        // A replaced metric is new to Cloud Monitoring again: wait again. Nothing else re-runs it.
        triggers: { duplicateAnswers: this.duplicateAnswers.id, allAnswers: this.allAnswers.id },
      },
      this.childAfter(this.duplicateAnswers, this.allAnswers),
    );
    // The worker's outage breaker logs an ERROR line with `outage` when a dependency has failed every
    // call for 30 s, and again every 5 minutes while it lasts; a refusal of the worker (billing,
    // region, credentials, model) is an ERROR line with error `dependency_refused`, and a statement
    // BigQuery refuses (byte cap, access, a missing table) one with error `configuration`. Deliveries are
    // retried meanwhile (Pub/Sub's retry horizon covers 6 hours): an operator has that long.
    oneConditionPolicy(
      `${name}-dependency-outage`,
      common,
      {
        displayName: `${args.prefix}: a dependency of the worker is out`,
        condition: {
          displayName: 'The worker reports a dependency outage or refusal',
          conditionMatchedLog: {
            filter: pulumi.interpolate`${logs} AND severity >= ERROR AND (jsonPayload.outage:* OR jsonPayload.error = ("dependency_refused" OR "configuration"))`,
          },
        },
        // Re-logged every 5 minutes while it lasts: the incident stays open until 30 minutes after.
        alertStrategy: { notificationRateLimit: { period: '300s' }, autoClose: '1800s' },
        documentation:
          'Gemini or BigQuery is failing every call (`outage`: which one, since when, the last error), or refuses ' +
          'the worker itself (`dependency_refused`: billing, region, credentials, model; `configuration`: a statement ' +
          'BigQuery refuses for its byte cap, access or a missing table). Deliveries answer 503 and ' +
          'Pub/Sub retries them for about 15 hours with the default settings, so nothing is lost if the cause is ' +
          'fixed within 6 hours; after that, replay the dead letters or run the reconcile job.',
      },
      this.child,
    );
    const userMetric = (metric: gcp.logging.Metric) =>
      pulumi.interpolate`resource.type = "cloud_run_revision" AND metric.type = "logging.googleapis.com/user/${metric.name}"`;
    const sumOverWindow = sumOver(DUPLICATE_WINDOW_SECONDS);
    const duplicateRate = oneConditionPolicy(
      `${name}-duplicate-rate`,
      common,
      {
        displayName: pulumi.interpolate`${args.prefix}: duplicate answers above ${DUPLICATE_RATE_THRESHOLD} of all answers`,
        condition: {
          displayName: 'Share of duplicate answers',
          conditionThreshold: {
            // A ratio condition: numerator / denominator, both summed over the same window.
            filter: userMetric(this.duplicateAnswers),
            aggregations: sumOverWindow,
            denominatorFilter: userMetric(this.allAnswers),
            denominatorAggregations: sumOverWindow,
            comparison: 'COMPARISON_GT',
            thresholdValue: DUPLICATE_RATE_THRESHOLD,
            duration: '0s',
            evaluationMissingData: 'EVALUATION_MISSING_DATA_INACTIVE',
          },
        },
        documentation:
          'A few duplicates per mille are normal at-least-once delivery. More usually means the ack deadline is ' +
          'shorter than the worker needs (changed by hand: `pulumi up` sets it to workerTimeoutSeconds + 10 s) or that the ' +
          'bucket has a second notification (`gcloud storage buckets notifications list gs://BUCKET`).',
      },
      this.childAfter(this.metricsSettled),
    );

    // duplicate_objects non-empty: an hourly scheduled query that fails when it finds new rows, run by
    // an account that may only run jobs and read the dataset.
    const checker = new gcp.serviceaccount.Account(
      `${name}-dupcheck`,
      {
        project: args.project,
        accountId: `${args.prefix}-dupcheck`,
        displayName: `${args.prefix}: duplicate-objects check (scheduled query)`,
      },
      this.child,
    );
    const checkerJobUser = new gcp.projects.IAMMember(
      `${name}-dupcheck-job-user`,
      { project: args.project, role: 'roles/bigquery.jobUser', member: checker.member },
      this.child,
    );
    const checkerDataViewer = new gcp.bigquery.DatasetIamMember(
      `${name}-dupcheck-data-viewer`,
      {
        project: args.project,
        datasetId: args.datasetId,
        role: 'roles/bigquery.dataViewer',
        member: checker.member,
      },
      this.child,
    );
    // Scheduled queries run as the checker through the BigQuery Data Transfer service agent, which
    // mints the checker's token. The agent exists only after the API's first use, so it is created
    // here, and it may act as the checker only (not as every account of the project).
    const transferAgent = new gcp.projects.ServiceIdentity(
      `${name}-transfer-agent`,
      { project: args.project, service: 'bigquerydatatransfer.googleapis.com' },
      this.child,
    );
    const agentTokenCreator = new gcp.serviceaccount.IAMMember(
      `${name}-dupcheck-token-creator`,
      {
        serviceAccountId: checker.name,
        role: 'roles/iam.serviceAccountTokenCreator',
        member: transferAgent.member,
      },
      this.child,
    );
    const checkGrants = [checkerJobUser, checkerDataViewer, agentTokenCreator];
    const grantsPropagated = grantsSettled(`${name}-dupcheck-grants-settle`, checkGrants, this.child);
    this.duplicateObjectsCheck = new gcp.bigquery.DataTransferConfig(
      `${name}-duplicate-objects-check`,
      {
        project: args.project,
        location: args.dataLocation,
        displayName: `${args.prefix}: duplicate objects check`,
        dataSourceId: 'scheduled_query',
        schedule: `every ${DUPLICATE_OBJECTS_CHECK_HOURS} hours`,
        serviceAccountName: checker.email,
        params: {
          query: pulumi
            .all([args.tableRef, args.redeliveryWindowDays])
            .apply(([table, days]) => duplicateObjectsCheckSql(table, days)),
        },
      },
      // A first run without its grants (propagated: the first run starts at creation) or its table
      // fails, and the failure raises a false alert that stays open for a day.
      this.childAfter(...checkGrants, grantsPropagated, args.table, args.duplicateObjectsView),
    );
    const configId = this.duplicateObjectsCheck.name.apply((n) => n.split('/').pop() ?? n);
    const duplicateObjects = oneConditionPolicy(
      `${name}-duplicate-objects`,
      common,
      {
        displayName: `${args.prefix}: objects with more than one ok row`,
        condition: {
          displayName: 'The duplicate-objects check failed',
          conditionMatchedLog: {
            filter: pulumi.interpolate`resource.type = "bigquery_dts_config" AND resource.labels.config_id = "${configId}" AND severity >= ERROR`,
          },
        },
        alertStrategy: { notificationRateLimit: { period: '3600s' }, autoClose: '86400s' },
        documentation:
          'Some objects got two ok rows: a notification was created twice on the bucket while the worker runs in ' +
          'message mode (or the check itself failed: read the log entry). Query the duplicate_objects view, delete ' +
          'the extra notification (`npm run check:notifications -- --bucket BUCKET`), keep DEDUP_KEY=object.',
      },
      this.child,
    );

    this.registerOutputs({
      duplicateObjectsPolicy: duplicateObjects.name,
      deadLetterPolicy: deadLetters.name,
      backlogAgePolicy: backlogAge.name,
      duplicateRatePolicy: duplicateRate.name,
    });
  }
}
