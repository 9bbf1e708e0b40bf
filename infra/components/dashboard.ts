import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';
import { type ObservedPipelineArgs, workerLogs } from './alerts';
import { DoclineComponent } from './component';

/**
 * Built-in metrics the dashboard charts, each documented by Google Cloud
 * (https://cloud.google.com/monitoring/api/metrics_gcp). Everything else it charts is a log-based
 * metric of this stack; a test checks both.
 */
export const BUILT_IN_METRICS = [
  'pubsub.googleapis.com/subscription/num_undelivered_messages',
  'pubsub.googleapis.com/subscription/oldest_unacked_message_age',
  'run.googleapis.com/request_count',
  'run.googleapis.com/request_latencies',
] as const;

/** Arguments of {@link Dashboard}. */
export interface DashboardArgs extends ObservedPipelineArgs {
  /** Log-based metrics of the Alerts component (their `name` outputs). */
  allAnswersMetric: pulumi.Input<string>;
  duplicateAnswersMetric: pulumi.Input<string>;
  /** The worker's service account: the BigQuery jobs it runs are this stack's, not another's in the project. */
  workerServiceAccountEmail: pulumi.Input<string>;
}

interface ChartInput {
  /** The stack's prefix: the dashboard's display name. */
  prefix: string;
  service: string;
  push: string;
  deadLetters: string;
  answers: string;
  duplicates: string;
  tokens: string;
  bytesBilled: string;
}

/** Cloud Monitoring's legend template for a series' status label (a Monitoring placeholder, not JavaScript's). */
const STATUS_LEGEND = ['$', '{metric.label.status}'].join('');

const user = (metric: string) => `logging.googleapis.com/user/${metric}`;

/**
 * A Cloud Monitoring metric's name in PromQL: the first `/` becomes `:`, every other character
 * PromQL does not allow in a name becomes `_` (cloud.google.com/monitoring/promql/promql-mapping).
 */
export function promqlMetricName(metric: string): string {
  const slash = metric.indexOf('/');
  const [domain, path] = slash < 0 ? [metric, ''] : [metric.slice(0, slash), metric.slice(slash + 1)];
  const clean = (part: string) => part.replace(/[^A-Za-z0-9_]/g, '_');
  return slash < 0 ? clean(domain) : `${clean(domain)}:${clean(path)}`;
}

/** A tile's position: Cloud Monitoring drops a 0 coordinate, so it is left out rather than sent as 0. */
function position(x: number, y: number): { xPos?: number; yPos?: number } {
  return { ...(x === 0 ? {} : { xPos: x }), ...(y === 0 ? {} : { yPos: y }) };
}

/**
 * The dashboard's JSON (Cloud Monitoring `Dashboard` resource), from the names it charts, in the
 * form the API returns it: the provider compares its input with what the API answers, and the API
 * drops zero numbers and empty lists (hashicorp/terraform-provider-google#16173), so any of them
 * here would show as a diff on every `up`. Distribution sums are PromQL (`prometheusQuery`): MQL is
 * no longer supported for new work.
 */
export function dashboardJson(m: ChartInput): string {
  const revision = `resource.type = "cloud_run_revision" AND resource.labels.service_name = "${m.service}"`;
  const filterOf = (metric: string, resource: string, extra = '') =>
    `metric.type = "${metric}" AND ${resource}${extra ? ` AND ${extra}` : ''}`;
  const perMinute = (groupBy: string[] = []) => ({
    alignmentPeriod: '60s',
    perSeriesAligner: 'ALIGN_DELTA',
    crossSeriesReducer: 'REDUCE_SUM',
    ...(groupBy.length > 0 ? { groupByFields: groupBy } : {}),
  });
  const line = (filter: string, aggregation: object, legend?: string) => ({
    timeSeriesQuery: { timeSeriesFilter: { filter, aggregation } },
    plotType: 'LINE',
    ...(legend ? { legendTemplate: legend } : {}),
  });
  // Distribution metrics (values extracted from log lines) are summed through their `_sum` series.
  const hourlySum = (metric: string, selector: string) => ({
    timeSeriesQuery: {
      prometheusQuery: `sum(increase(${promqlMetricName(metric)}_sum{${selector}}[1h]))`,
    },
    plotType: 'STACKED_BAR',
  });
  const chart = (title: string, dataSets: object[]) => ({ title, xyChart: { dataSets } });
  const subscriptionMax = (metric: string, id: string) =>
    line(
      filterOf(
        `pubsub.googleapis.com/subscription/${metric}`,
        `resource.type = "pubsub_subscription" AND resource.labels.subscription_id = "${id}"`,
      ),
      { alignmentPeriod: '60s', perSeriesAligner: 'ALIGN_MAX' },
    );
  const percentile = (p: number) =>
    line(
      filterOf('run.googleapis.com/request_latencies', revision),
      {
        alignmentPeriod: '60s',
        perSeriesAligner: `ALIGN_PERCENTILE_${p}`,
        crossSeriesReducer: 'REDUCE_MEAN',
      },
      `p${p}`,
    );
  const widgets = [
    chart('Answers per minute by status', [
      line(filterOf(user(m.answers), revision), perMinute(['metric.label.status']), STATUS_LEGEND),
      line(
        filterOf('run.googleapis.com/request_count', revision, 'metric.labels.response_code_class = "5xx"'),
        perMinute(),
        '5xx',
      ),
    ]),
    chart('Duplicate share of answers', [
      {
        timeSeriesQuery: {
          timeSeriesFilterRatio: {
            numerator: { filter: filterOf(user(m.duplicates), revision), aggregation: perMinute() },
            denominator: { filter: filterOf(user(m.answers), revision), aggregation: perMinute() },
          },
        },
        plotType: 'LINE',
      },
    ]),
    chart('Dead letters waiting', [subscriptionMax('num_undelivered_messages', m.deadLetters)]),
    chart('Oldest unacked message (s)', [subscriptionMax('oldest_unacked_message_age', m.push)]),
    chart('Worker latency p50 / p99 (ms)', [percentile(50), percentile(99)]),
    chart('Gemini tokens per hour', [
      hourlySum(user(m.tokens), `monitored_resource="cloud_run_revision",service_name="${m.service}"`),
    ]),
    chart('BigQuery bytes billed by the worker (app=docline) per hour', [
      hourlySum(user(m.bytesBilled), 'monitored_resource="bigquery_project"'),
    ]),
  ];
  return JSON.stringify({
    displayName: `${m.prefix}: ${m.service}`,
    mosaicLayout: {
      columns: 12,
      tiles: widgets.map((widget, i) => ({
        ...position((i % 2) * 6, Math.floor(i / 2) * 4),
        width: 6,
        height: 4,
        widget,
      })),
    },
  });
}

/**
 * A Cloud Monitoring dashboard of the pipeline: answers per minute by status, the duplicate share,
 * dead letters waiting, the oldest unacked message, worker latency p50/p99, Gemini tokens per hour,
 * and BigQuery bytes billed by the worker's jobs. Two log-based metrics of its own extract values:
 * the tokens of each outcome line, and the billed bytes of each finished BigQuery job labelled
 * `app=docline` that this stack's worker account ran (BigQuery's audit log, always on): every
 * docline stack labels its jobs alike, and two stacks may share a project.
 */
export class Dashboard extends DoclineComponent {
  readonly dashboard: gcp.monitoring.Dashboard;
  /** The console URL of the dashboard. */
  readonly url: pulumi.Output<string>;

  constructor(name: string, args: DashboardArgs, opts?: pulumi.ComponentResourceOptions) {
    super('docline:index:Dashboard', name, opts);
    const distribution = (unit: string) => ({
      metricDescriptor: { metricKind: 'DELTA', valueType: 'DISTRIBUTION', unit },
      bucketOptions: { exponentialBuckets: { numFiniteBuckets: 32, growthFactor: 2, scale: 1 } },
    });
    // Its own two metrics serve only its charts.
    const tokensMetric = new gcp.logging.Metric(
      `${name}-tokens`,
      {
        project: args.project,
        description: 'Gemini tokens (prompt + output, thinking included) of each docline worker answer.',
        filter: pulumi.interpolate`${workerLogs(args.serviceName)} AND jsonPayload.tokens > 0`,
        valueExtractor: 'EXTRACT(jsonPayload.tokens)',
        ...distribution('1'),
      },
      this.child,
    );
    const bytesBilledMetric = new gcp.logging.Metric(
      `${name}-bytes-billed`,
      {
        project: args.project,
        description:
          "Bytes billed by each finished BigQuery job labelled app=docline that this stack's worker ran (seen, record).",
        filter: pulumi.interpolate`resource.type = "bigquery_project" AND protoPayload.metadata.jobChange.after = "DONE" AND protoPayload.metadata.jobChange.job.jobConfig.labels.app = "docline" AND protoPayload.authenticationInfo.principalEmail = "${args.workerServiceAccountEmail}"`,
        valueExtractor: 'EXTRACT(protoPayload.metadata.jobChange.job.jobStats.queryStats.totalBilledBytes)',
        ...distribution('By'),
      },
      this.child,
    );
    this.dashboard = new gcp.monitoring.Dashboard(
      `${name}-dashboard`,
      {
        project: args.project,
        dashboardJson: pulumi
          .all([
            args.serviceName,
            args.pushSubscriptionName,
            args.deadLetterSubscriptionName,
            args.allAnswersMetric,
            args.duplicateAnswersMetric,
            tokensMetric.name,
            bytesBilledMetric.name,
          ])
          .apply(([service, push, deadLetters, answers, duplicates, tokens, bytesBilled]) =>
            dashboardJson({
              prefix: args.prefix,
              service,
              push,
              deadLetters,
              answers,
              duplicates,
              tokens,
              bytesBilled,
            }),
          ),
      },
      this.child,
    );
    this.url = pulumi.interpolate`https://console.cloud.google.com/monitoring/dashboards/builder/${this.dashboard.id.apply((id) => id.split('/').pop() ?? id)}?project=${args.project}`;
    this.registerOutputs({ url: this.url });
  }
}
