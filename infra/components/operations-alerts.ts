import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';
import * as time from '@pulumiverse/time';
import { alertPolicyBasics, COUNTER, markdown, oneConditionPolicy, sumOver, workerLogs } from './alerts';
import { DoclineComponent, type ProjectArgs } from './component';
import { promqlMetricName } from './dashboard';
import { LOG_METRIC_SETTLE_DURATION } from './lifecycle';

/**
 * The error code a delivery's failure line carries (`jsonPayload.cause.code`) when Gemini still
 * answered 429 after the delivery waited its turn (ANALYZER_QUOTA_WAIT_MS): the worker's
 * `RATE_LIMITED`, which infra/test keeps equal to this.
 */
export const GEMINI_RATE_LIMITED_CODE = 'analyzer_rate_limited';

/** Window over which uploads and answers are compared: longer than a burst's quiet moments. */
export const NO_THROUGHPUT_WINDOW = '30m';
/** Share of the worker's answers that may be 5xx before someone looks (transient failures retry). */
export const SERVER_ERROR_SHARE = 0.05;
/** Deliveries that gave up on Gemini's 429s within 15 minutes before someone looks. */
export const GEMINI_GAVE_UP_PER_15_MINUTES = 5;
/** A daily job counts as not run after this long without a run (a day and two hours of slack). */
export const DAILY_RUN_WINDOW = '26h';
/** The hourly duplicate check counts as not run after this long without a run. */
export const HOURLY_RUN_WINDOW = '3h';
/** Seconds of {@link HOURLY_RUN_WINDOW}. */
const HOURLY_RUN_SECONDS = 3 * 3600;
/** How far back "it ran before" looks: the not-run alerts stay quiet on a stack that never ran yet. */
export const RAN_BEFORE_WINDOW = '7d';
/** Shares of the monthly budget at which the budget notifies. */
export const BUDGET_THRESHOLDS = [0.5, 0.9, 1] as const;

/** Arguments of {@link OperationsAlerts}. */
export interface OperationsAlertsArgs extends ProjectArgs {
  /** The stack's prefix (`docline-<stack>`): display names and the label {@link alertPolicyBasics} sets. */
  prefix: string;
  /** The worker's Cloud Run service name. */
  serviceName: pulumi.Input<string>;
  /** The uploads topic's short name: what the bucket publishes. */
  uploadsTopicName: pulumi.Input<string>;
  /** The log metric of every answer (ok, rejected, duplicate): what "processed" means. */
  allAnswersMetric: pulumi.Input<string>;
  /**
   * The wait that follows that metric's creation (the Alerts component's Sleep): an alert policy
   * that reads a new log metric is refused until Cloud Monitoring knows it, PromQL ones included.
   */
  allAnswersSettled: pulumi.Resource;
  /** The scheduled duplicate check's transfer config name (`projects/…/transferConfigs/ID`). */
  duplicateCheckConfigName: pulumi.Input<string>;
  /** The reconcile job's name; undefined when reconcile is off. */
  reconcileJobName?: pulumi.Input<string>;
  /** Notification channels every policy notifies. */
  notificationChannels: pulumi.Input<pulumi.Input<string>[]>;
  /** A monthly budget on the project; undefined: none. */
  budget?: { billingAccount: string; monthlyAmount: number; projectNumber: pulumi.Input<string> };
}

/**
 * The provider the budget is created with. The Billing Budgets API needs a quota project, and with
 * user credentials (a laptop's `gcloud auth application-default login`) it has none unless the
 * provider names one and sends it. The Budget resource's own warning: "If you are using User ADCs
 * (Application Default Credentials) with this resource, you must specify a `billing_project` and set
 * `user_project_override` to true in the provider configuration. Otherwise the Billing Budgets API
 * will return a 403 error." (terraform-provider-google, website/docs/r/billing_budget.html.markdown).
 * The stack's project is the quota project: Foundation enables billingbudgets.googleapis.com there,
 * and the deploy identity may use its services (serviceUsageAdmin). Service accounts work the same way.
 */
export function budgetProvider(
  name: string,
  project: pulumi.Input<string>,
  opts: pulumi.CustomResourceOptions,
): gcp.Provider {
  return new gcp.Provider(
    name,
    { project, billingProject: project, userProjectOverride: true },
    { parent: opts.parent, dependsOn: opts.dependsOn },
  );
}

/** A condition filter: one metric type on one monitored resource type, and more terms. */
function metricFilter(resource: string, metric: string, ...terms: string[]): string {
  return [`resource.type = "${resource}"`, `metric.type = "${metric}"`, ...terms].join(' AND ');
}

/*
 * Why filters and not PromQL here: Cloud Monitoring validates a filter condition against the metric
 * descriptor, which exists for a built-in metric from the start and for a log-based metric once the
 * settle wait is over, while a PromQL condition on a series that has never emitted may be refused on
 * creation (reported by third parties, not documented), and a first `up` has emitted nothing. The one
 * PromQL condition left (reconcileNotRun) says why.
 */

/** Seconds of {@link NO_THROUGHPUT_WINDOW}. */
const NO_THROUGHPUT_WINDOW_SECONDS = 1800;

/**
 * "Uploads were published to the topic, and the worker answered none of them", as two conditions
 * joined by AND: the topic's publishes over the window, and no answer line for as long. A metric-absence
 * condition is met only for a series that wrote a point after the policy was created (Cloud Monitoring,
 * "Create metric-absence alerting policies"), so a worker that never answered at all since is the
 * deploy canary's to catch, not this alert's.
 */
export function noThroughputConditions(topic: string, allAnswersMetric: string) {
  return [
    {
      displayName: `Uploads published in ${NO_THROUGHPUT_WINDOW}`,
      conditionThreshold: {
        filter: metricFilter(
          'pubsub_topic',
          'pubsub.googleapis.com/topic/send_request_count',
          `resource.labels.topic_id = "${topic}"`,
        ),
        aggregations: sumOver(NO_THROUGHPUT_WINDOW_SECONDS),
        comparison: 'COMPARISON_GT',
        thresholdValue: 0,
        duration: '300s',
        evaluationMissingData: 'EVALUATION_MISSING_DATA_INACTIVE',
      },
    },
    {
      displayName: `No worker answer in ${NO_THROUGHPUT_WINDOW}`,
      conditionAbsent: {
        filter: metricFilter('cloud_run_revision', `logging.googleapis.com/user/${allAnswersMetric}`),
        aggregations: sumOver(300),
        duration: `${NO_THROUGHPUT_WINDOW_SECONDS}s`,
      },
    },
  ];
}

/** The worker's 5xx share of its requests over 10 minutes, as a ratio condition on `request_count`. */
export function serverErrorCondition(service: string) {
  const requests = (...terms: string[]) =>
    metricFilter(
      'cloud_run_revision',
      'run.googleapis.com/request_count',
      `resource.labels.service_name = "${service}"`,
      ...terms,
    );
  const rate = [
    { alignmentPeriod: '600s', perSeriesAligner: 'ALIGN_RATE', crossSeriesReducer: 'REDUCE_SUM' },
  ];
  return {
    filter: requests('metric.labels.response_code_class = "5xx"'),
    aggregations: rate,
    denominatorFilter: requests(),
    denominatorAggregations: rate,
    comparison: 'COMPARISON_GT',
    thresholdValue: SERVER_ERROR_SHARE,
    duration: '600s',
    evaluationMissingData: 'EVALUATION_MISSING_DATA_INACTIVE',
  };
}

/**
 * The PromQL of "a job that ran in the last {@link RAN_BEFORE_WINDOW} has not run in `window`". The
 * second half keeps a stack that never ran yet (a first deploy) from alerting.
 */
export function notRunQuery(series: string, window: string): string {
  return `absent_over_time(${series}[${window}]) and on() (count(count_over_time(${series}[${RAN_BEFORE_WINDOW}])) > 0)`;
}

/**
 * Alerts on the golden signals the per-message alerts cannot see: the pipeline stopped while uploads
 * still arrive (a deleted notification or subscription, a worker that answers nothing), the worker's
 * 5xx share, deliveries that gave up on Gemini's 429s, a reconcile or duplicate check that stopped
 * running, and a monthly budget. docs/operations.md says what each means and what to do.
 */
export class OperationsAlerts extends DoclineComponent {
  constructor(name: string, args: OperationsAlertsArgs, opts?: pulumi.ComponentResourceOptions) {
    super('docline:index:OperationsAlerts', name, opts);
    const common = alertPolicyBasics(args.project, args.prefix, args.notificationChannels);

    // Counts deliveries that gave up on Gemini's 429s.
    const geminiGaveUp = new gcp.logging.Metric(
      `${name}-gemini-gave-up`,
      {
        project: args.project,
        description:
          'docline deliveries answered 503 because Gemini still answered 429 after their wait in line.',
        filter: pulumi.interpolate`${workerLogs(args.serviceName)} AND jsonPayload.status = "error" AND jsonPayload.cause.code = "${GEMINI_RATE_LIMITED_CODE}"`,
        metricDescriptor: COUNTER,
      },
      this.child,
    );
    const configId = pulumi.output(args.duplicateCheckConfigName).apply((n) => n.split('/').pop() ?? n);
    // Counts the scheduled duplicate check's log lines: one run writes several.
    const duplicateCheckRuns = new gcp.logging.Metric(
      `${name}-duplicate-check-runs`,
      {
        project: args.project,
        description:
          'Log lines of the hourly duplicate-objects check (every run writes some, passed or failed).',
        filter: pulumi.interpolate`resource.type = "bigquery_dts_config" AND resource.labels.config_id = "${configId}"`,
        metricDescriptor: COUNTER,
      },
      this.child,
    );
    // Alert policies on a new log metric are refused until Cloud Monitoring knows it.
    const settled = new time.Sleep(
      `${name}-metrics-settle`,
      {
        createDuration: LOG_METRIC_SETTLE_DURATION,
        triggers: { geminiGaveUp: geminiGaveUp.id, duplicateCheckRuns: duplicateCheckRuns.id },
      },
      this.childAfter(geminiGaveUp, duplicateCheckRuns),
    );

    const noThroughput = new gcp.monitoring.AlertPolicy(
      `${name}-no-throughput`,
      {
        ...common,
        displayName: `${args.prefix}: uploads arrive, nothing is processed`,
        // Both: uploads were published AND no answer line was written for as long.
        combiner: 'AND',
        conditions: pulumi
          .all([args.uploadsTopicName, args.allAnswersMetric])
          .apply(([topic, metric]) => noThroughputConditions(topic, metric)),
        documentation: markdown(
          'Uploads are published to the topic but the worker answered none of them: the push subscription is ' +
            'gone or detached, pushes are refused before the worker logs (401/403: its invoker grant), or the ' +
            'worker does not start. See docs/operations.md, "What each alert means".',
        ),
      },
      // It reads the answers metric, new in a first `up`: after that metric's settling wait.
      this.childAfter(args.allAnswersSettled),
    );
    const serverErrors = oneConditionPolicy(
      `${name}-server-errors`,
      common,
      {
        displayName: `${args.prefix}: worker 5xx above ${SERVER_ERROR_SHARE * 100} % of requests`,
        condition: {
          displayName: '5xx share of the worker\u2019s requests',
          conditionThreshold: pulumi.output(args.serviceName).apply(serverErrorCondition),
        },
        documentation:
          'The worker answers 503 for transient failures (BigQuery, Gemini, the bucket, the memo), which Pub/Sub ' +
          'retries with backoff and counts towards the dead letter. A sustained share means a dependency is down ' +
          'or refusing. Read the worker\u2019s error lines (`jsonPayload.error`, `jsonPayload.cause`).',
      },
      this.child,
    );
    const geminiRateLimited = oneConditionPolicy(
      `${name}-gemini-rate-limited`,
      common,
      {
        displayName: `${args.prefix}: deliveries give up on Gemini 429s`,
        condition: {
          displayName: `More than ${GEMINI_GAVE_UP_PER_15_MINUTES} deliveries gave up on 429s in 15 min`,
          conditionThreshold: {
            filter: geminiGaveUp.name.apply((metric) =>
              metricFilter('cloud_run_revision', `logging.googleapis.com/user/${metric}`),
            ),
            aggregations: sumOver(900),
            comparison: 'COMPARISON_GT',
            thresholdValue: GEMINI_GAVE_UP_PER_15_MINUTES,
            duration: '0s',
            evaluationMissingData: 'EVALUATION_MISSING_DATA_INACTIVE',
          },
        },
        documentation:
          'Gemini kept answering 429 after deliveries waited their turn (ANALYZER_QUOTA_WAIT_MS): the quota is spent ' +
          '(a tier\u2019s per-minute or per-day limit) or shared capacity is short. Pub/Sub retries them. Raise the ' +
          'quota or buy Provisioned Throughput; lower maxInstances or analyzerMaxInFlight to spread the load.',
      },
      this.childAfter(settled),
    );
    const duplicateCheckNotRun = oneConditionPolicy(
      `${name}-duplicate-check-not-run`,
      common,
      {
        displayName: `${args.prefix}: the duplicate-objects check stopped running`,
        condition: {
          displayName: `No run of the hourly check in ${HOURLY_RUN_WINDOW}`,
          // Met only once the check has run after the policy was created: never before its first run.
          conditionAbsent: {
            filter: duplicateCheckRuns.name.apply((metric) =>
              metricFilter('bigquery_dts_config', `logging.googleapis.com/user/${metric}`),
            ),
            aggregations: sumOver(600),
            duration: `${HOURLY_RUN_SECONDS}s`,
          },
        },
        documentation:
          'The scheduled query that looks for objects with two ok rows has not run: it was paused, deleted, or ' +
          'its account lost its grants. Until it runs, a doubled notification in message mode goes unseen.',
      },
      this.childAfter(settled),
    );
    if (args.reconcileJobName !== undefined) {
      oneConditionPolicy(
        `${name}-reconcile-not-run`,
        common,
        {
          displayName: `${args.prefix}: the daily reconcile stopped running`,
          condition: {
            displayName: `No reconcile execution in ${DAILY_RUN_WINDOW}`,
            // PromQL, not an absence condition: an absence lasts at most 23.5 hours (Cloud
            // Monitoring, "Create metric-absence alerting policies"), shorter than a day between
            // two daily runs, so it would fire every day. The series is built-in
            // (run.googleapis.com/job/completed_execution_count); its creation on a job that
            // never ran is what only a real project can confirm (docs/deploy.md).
            conditionPrometheusQueryLanguage: {
              query: pulumi
                .output(args.reconcileJobName)
                .apply((job) =>
                  notRunQuery(
                    `${promqlMetricName('run.googleapis.com/job/completed_execution_count')}{monitored_resource="cloud_run_job",job_name="${job}"}`,
                    DAILY_RUN_WINDOW,
                  ),
                ),
              duration: '0s',
              evaluationInterval: '60s',
            },
          },
          documentation:
            'No execution of the reconcile job completed for more than a day: its Cloud Scheduler trigger is ' +
            'paused or failing (its account lost run.invoker), or the job cannot start. Documents without a ' +
            'row go unseen until it runs again.',
        },
        this.child,
      );
    }
    if (args.budget !== undefined) {
      new gcp.billing.Budget(
        `${name}-budget`,
        {
          billingAccount: args.budget.billingAccount,
          displayName: `${args.prefix} monthly`,
          budgetFilter: {
            projects: [pulumi.interpolate`projects/${args.budget.projectNumber}`],
            calendarPeriod: 'MONTH',
          },
          // The billing account's own currency: a budget in another one is refused.
          amount: { specifiedAmount: { units: String(args.budget.monthlyAmount) } },
          thresholdRules: BUDGET_THRESHOLDS.map((share) => ({ thresholdPercent: share })),
          allUpdatesRule: { monitoringNotificationChannels: args.notificationChannels },
        },
        { ...this.child, provider: budgetProvider(`${name}-budget-provider`, args.project, this.child) },
      );
    }

    this.registerOutputs({
      noThroughputPolicy: noThroughput.name,
      serverErrorsPolicy: serverErrors.name,
      geminiRateLimitedPolicy: geminiRateLimited.name,
      duplicateCheckNotRunPolicy: duplicateCheckNotRun.name,
    });
  }
}
