/**
 * The alerts on the golden signals and the budget, as the stack declares them, and docs/operations.md's
 * table of what every alert means and what to do, kept to the alerts the stack creates.
 */
import { RATE_LIMITED } from '../../worker/src/core/errors';
import {
  BUDGET_THRESHOLDS,
  GEMINI_RATE_LIMITED_CODE,
  noThroughputConditions,
  notRunQuery,
  SERVER_ERROR_SHARE,
  serverErrorCondition,
} from '../components/operations-alerts';
import { parseStackConfig } from '../config';
import {
  type CapturedResource,
  MOCK_PROJECT_NUMBER,
  ofType,
  one,
  type ProgramRun,
  runStack,
  T,
} from './harness';
import { docTable } from './support/doc-table';

const BUDGET = {
  'docline:budgetBillingAccount': '012345-6789AB-CDEF01',
  'docline:budgetMonthlyAmount': '300',
};

type Condition = Record<string, Record<string, unknown> | string>;
const conditionsOf = (alert: CapturedResource) => alert.inputs.conditions as Condition[];
const queryOf = (alert: CapturedResource) =>
  (alert.inputs.conditions as { conditionPrometheusQueryLanguage: { query: string } }[])[0]!
    .conditionPrometheusQueryLanguage.query;

describe('the operations alerts of the prod stack', () => {
  let run: ProgramRun;
  beforeAll(async () => {
    run = await runStack('prod', BUDGET);
  });

  it('alert when uploads are published to the stack\u2019s topic and the worker answered none', () => {
    const alert = one(run, T.alert, '-operations-no-throughput');
    const topic = one(run, T.topic, '-documents-uploads').outputs.name as string;
    const answers = one(run, T.metric, '-alerts-all-answers').outputs.name as string;

    expect(alert.inputs.combiner).toBe('AND');
    expect(conditionsOf(alert)).toEqual(noThroughputConditions(topic, answers));
    const [uploads, none] = conditionsOf(alert) as Array<
      Record<string, { filter: string; duration: string }>
    >;
    expect(uploads!.conditionThreshold!.filter).toBe(
      `resource.type = "pubsub_topic" AND metric.type = "pubsub.googleapis.com/topic/send_request_count" AND resource.labels.topic_id = "${topic}"`,
    );
    expect(none!.conditionAbsent).toMatchObject({
      filter: `resource.type = "cloud_run_revision" AND metric.type = "logging.googleapis.com/user/${answers}"`,
      duration: '1800s',
    });
  });

  it('express every condition a first `up` must create before any data as a filter on metric.type, not PromQL', () => {
    // Monitoring validates a filter against the metric's descriptor; PromQL on a series that never
    // emitted may be refused at creation. Only reconcileNotRun stays PromQL (an absence lasts 23.5 h at most).
    const promql = ofType(run, T.alert)
      .filter((a) => conditionsOf(a).some((c) => c.conditionPrometheusQueryLanguage !== undefined))
      .map((a) => a.name);
    expect(promql).toEqual(['docline-prod-operations-reconcile-not-run']);
    for (const alert of ofType(run, T.alert).filter(
      (a) => a.name.includes('-operations-') && !promql.includes(a.name),
    )) {
      for (const c of conditionsOf(alert)) {
        const body = (c.conditionThreshold ?? c.conditionAbsent) as { filter: string } | undefined;
        expect([alert.name, body?.filter]).toEqual([alert.name, expect.stringMatching(/metric\.type = "/)]);
      }
    }
  });

  it('alert on the worker\u2019s 5xx share of its own requests', () => {
    const alert = one(run, T.alert, '-operations-server-errors');
    const service = one(run, T.run).outputs.name as string;
    const condition = conditionsOf(alert)[0]!.conditionThreshold as Record<string, unknown>;
    expect(condition).toEqual(serverErrorCondition(service));
    expect(condition.filter).toContain(
      `resource.labels.service_name = "${service}" AND metric.labels.response_code_class = "5xx"`,
    );
    expect(condition.thresholdValue).toBe(SERVER_ERROR_SHARE);
  });

  it('count the deliveries that gave up on Gemini\u2019s 429s by the code the worker logs, and alert after the metric settles', () => {
    expect(GEMINI_RATE_LIMITED_CODE).toBe(RATE_LIMITED);
    const metric = one(run, T.metric, '-operations-gemini-gave-up');
    expect(metric.inputs.filter).toMatch(
      /resource.labels.service_name = "docline-prod-worker.*jsonPayload.status = "error" AND jsonPayload.cause.code = "analyzer_rate_limited"/,
    );
    const alert = one(run, T.alert, '-operations-gemini-rate-limited');
    expect(conditionsOf(alert)[0]!.conditionThreshold).toMatchObject({
      filter: `resource.type = "cloud_run_revision" AND metric.type = "logging.googleapis.com/user/${metric.outputs.name}"`,
      thresholdValue: 5,
    });
    const settle = one(run, T.sleep, '-operations-metrics-settle');
    expect(alert.dependencies).toContain(settle.urn);
    expect(settle.dependencies).toContain(metric.urn);
  });

  it('alert when the hourly duplicate check or the daily reconcile stopped running, not before they ever ran', () => {
    const check = one(run, T.alert, '-operations-duplicate-check-not-run');
    const configId = String(one(run, T.transfer).outputs.name).split('/').pop();
    const runs = one(run, T.metric, '-operations-duplicate-check-runs');
    expect(runs.inputs.filter).toBe(
      `resource.type = "bigquery_dts_config" AND resource.labels.config_id = "${configId}"`,
    );
    // An absence condition is met only after a point written since the policy was created.
    expect(conditionsOf(check)[0]!.conditionAbsent).toMatchObject({
      filter: `resource.type = "bigquery_dts_config" AND metric.type = "logging.googleapis.com/user/${runs.outputs.name}"`,
      duration: '10800s',
    });

    const reconcile = one(run, T.alert, '-operations-reconcile-not-run');
    const job = one(run, T.job).outputs.name as string;
    expect(queryOf(reconcile)).toBe(
      notRunQuery(
        `run_googleapis_com:job_completed_execution_count{monitored_resource="cloud_run_job",job_name="${job}"}`,
        '26h',
      ),
    );
  });

  it('budget the project monthly on the billing account, notifying the same channels', () => {
    const budget = one(run, T.budget);
    expect(budget.inputs).toMatchObject({
      billingAccount: '012345-6789AB-CDEF01',
      budgetFilter: { projects: [`projects/${MOCK_PROJECT_NUMBER}`], calendarPeriod: 'MONTH' },
      amount: { specifiedAmount: { units: '300' } },
      thresholdRules: BUDGET_THRESHOLDS.map((thresholdPercent) => ({ thresholdPercent })),
      allUpdatesRule: {
        monitoringNotificationChannels: ['projects/docline-prod-example/notificationChannels/1234567890'],
      },
    });
  });

  it('create the budget through a provider that names its quota project, so user credentials work too', () => {
    // The Budget resource's warning: with user ADCs, billing_project and user_project_override or a 403.
    const budget = one(run, T.budget);
    const provider = one(run, 'pulumi:providers:gcp', '-budget-provider');
    expect(budget.provider.startsWith(`${provider.urn}::`)).toBe(true);
    expect(provider.inputs).toMatchObject({
      project: 'docline-prod-example',
      billingProject: 'docline-prod-example',
      userProjectOverride: 'true',
    });
    // Nothing else leaves the default provider.
    expect(run.resources.filter((r) => r.provider !== '' && r.type !== T.budget && r.custom)).toEqual([]);
  });
});

describe('the operations alerts elsewhere', () => {
  it('declare no budget and no reconcile alert when neither is configured', async () => {
    const run = await runStack('dev', { 'docline:reconcileMode': 'off' });
    expect(ofType(run, T.budget)).toEqual([]);
    expect(ofType(run, T.alert).filter((a) => a.name.endsWith('-reconcile-not-run'))).toEqual([]);
    expect(ofType(run, T.alert).filter((a) => a.name.includes('-operations-'))).toHaveLength(4);
  });

  it('refuse a budget without an amount, or a billing account id that is not one', () => {
    expect(() => parseStackConfig('p', 'dev', { budgetBillingAccount: '012345-6789AB-CDEF01' })).toThrow(
      /budgetMonthlyAmount must be above 0 when budgetBillingAccount is set/,
    );
    expect(() =>
      parseStackConfig('p', 'dev', { budgetBillingAccount: 'billingAccounts/1', budgetMonthlyAmount: '5' }),
    ).toThrow(/budgetBillingAccount must be a billing account id/);
  });
});

describe('docs/operations.md, what each alert means', () => {
  it('has one row per alert policy the stack can create, and no other', async () => {
    const run = await runStack('prod', BUDGET);
    const rows = docTable('operations.md', 'alerts');
    const declared = [
      ...ofType(run, T.alert).map((a) => a.name.replace('docline-prod-', '')),
      ...ofType(run, T.budget).map((b) => b.name.replace('docline-prod-', '')),
    ];
    expect(rows.map((cells) => cells[1]!.replaceAll('`', '')).sort()).toEqual([...declared].sort());
    for (const [, alert, means, todo] of rows) {
      expect([alert, means!.length > 20, todo!.length > 20]).toEqual([alert, true, true]);
    }
  });
});
