/**
 * The order a first `pulumi up` on an empty project needs, read from what the engine sees: the
 * dependencies and property dependencies of every register request, followed transitively and
 * through components (a dependency on a component is a dependency on everything inside it).
 * No real deploy can run here, so this is how the orders of docs/deploy.md are proven, on both stack files.
 */

import { promqlMetricName } from '../components/dashboard';
import { REQUIRED_APIS } from '../components/foundation';
import { TABLE_ID } from '../components/warehouse';
import { type CapturedResource, ofType, one, type ProgramRun, runStack, T, waitsFor } from './harness';
import { docTable } from './support/doc-table';

/** The cases below, by name: each row of the order table in docs/deploy.md names those that prove it. */
const CASE = {
  apisFirst: 'enables Cloud Resource Manager with every other API, before every other resource',
  lookupsAfterApis: 'makes every data lookup wait for the APIs',
  image:
    'builds the image after its repository and runs the image the stack pushed, or the configured one, never a mutable tag',
  service: 'starts the worker service after every grant of its account (its startup probe reads the store)',
  subscription: 'creates the push subscription after run.invoker on the service and the token-creator grant',
  notification:
    'creates the bucket notification after the push subscription and the storage agent\u2019s publisher grant',
  duplicateCheck:
    'starts the scheduled duplicate check after its grants, the table and the duplicate_objects view',
  alerts:
    'creates every alert on a log-based metric after a Sleep that follows that metric (provider issue 11102)',
  reconcile: 'runs the reconcile job after its grants, and schedules it after the scheduler may run it',
} as const;

/** The "after" cell of each row of docs/deploy.md's order table, and the cases that prove the row. */
const DOCUMENTED_ORDERS: Record<string, ReadonlyArray<(typeof CASE)[keyof typeof CASE]>> = {
  'every other resource, and the `getProjectServiceAccount` / `getClientConfig` lookups': [
    CASE.apisFirst,
    CASE.lookupsAfterApis,
  ],
  'the image build and push': [CASE.image],
  'the Cloud Run service': [CASE.service],
  'the push subscription': [CASE.subscription],
  'the bucket notification': [CASE.notification],
  'the hourly scheduled check': [CASE.duplicateCheck],
  'the alert policies that read them': [CASE.alerts],
  'the reconcile job; its Cloud Scheduler trigger': [CASE.reconcile],
};

describe('the order table of docs/deploy.md', () => {
  it('has one row for each order proven below, and no other', () => {
    const afterCells = docTable('deploy.md', 'deploy-order').map((cells) => cells[2]);
    expect(afterCells).toEqual(Object.keys(DOCUMENTED_ORDERS));
    expect(new Set(Object.values(DOCUMENTED_ORDERS).flat())).toEqual(new Set(Object.values(CASE)));
  });
});

function expectOrder(run: ProgramRun, later: CapturedResource, earlier: CapturedResource[]): void {
  expect(earlier.length).toBeGreaterThan(0);
  const waits = waitsFor(run, later);
  const unordered = earlier.filter((first) => !waits.has(first.urn));
  expect(unordered.map((first) => `${later.name} after ${first.name}`)).toEqual([]);
}

/** Alert policies whose conditions read a log-based metric of the stack. */
function policiesOnLogMetrics(
  run: ProgramRun,
): Array<{ policy: CapturedResource; metrics: CapturedResource[] }> {
  return ofType(run, T.alert)
    .map((policy) => {
      const conditions = JSON.stringify(policy.inputs.conditions);
      // In a filter (`metric.type = "logging.googleapis.com/user/NAME"`) or in PromQL (its mapped name).
      const metrics = ofType(run, T.metric).filter((m) => {
        const metric = `logging.googleapis.com/user/${String(m.outputs.name)}`;
        return conditions.includes(`${metric}\\"`) || conditions.includes(`${promqlMetricName(metric)}{`);
      });
      return { policy, metrics };
    })
    .filter((p) => p.metrics.length > 0);
}

describe.each([
  ['dev', {}],
  ['prod', {}],
  ['dev', { 'docline:reconcileMode': 'apply' }],
] as const)('the deploy order of the %s stack %j', (stack, overrides) => {
  let run: ProgramRun;

  beforeAll(async () => {
    run = await runStack(stack, overrides);
  });

  it(CASE.apisFirst, () => {
    const apis = ofType(run, T.api);
    expect(apis.map((a) => a.inputs.service)).toEqual(
      expect.arrayContaining(['cloudresourcemanager.googleapis.com']),
    );
    expect(apis).toHaveLength(REQUIRED_APIS.length);

    for (const resource of run.resources.filter((r) => r.custom && r.type !== T.api)) {
      expectOrder(run, resource, apis);
    }
  });

  it(CASE.lookupsAfterApis, () => {
    const apis = ofType(run, T.api).map((a) => a.urn);

    expect(run.invokes.map((i) => i.token)).toEqual(
      expect.arrayContaining(['gcp:storage/getProjectServiceAccount:getProjectServiceAccount']),
    );
    const early = run.invokes.filter((invoke) => !apis.every((a) => invoke.registeredBefore.includes(a)));
    expect(early.map((invoke) => invoke.token)).toEqual([]);
  });

  it(CASE.service, () => {
    const workerGrants = [
      ...ofType(run, T.bucketIam),
      ...ofType(run, T.datasetIam),
      ...ofType(run, T.projectIam),
    ].filter((g) => String(g.inputs.member).includes('-worker@'));

    expect(workerGrants.map((g) => g.inputs.role).sort()).toEqual([
      'roles/aiplatform.user',
      'roles/bigquery.dataEditor',
      'roles/bigquery.jobUser',
      'roles/storage.objectCreator',
      'roles/storage.objectUser',
      'roles/storage.objectViewer',
      'roles/storage.objectViewer',
    ]);
    expectOrder(run, one(run, T.run), workerGrants);
  });

  it(CASE.subscription, () => {
    expectOrder(run, one(run, T.subscription, '-push'), [
      one(run, T.runIam),
      one(run, T.accountIam, '-push-token-creator'),
    ]);
  });

  it(CASE.notification, () => {
    expectOrder(run, one(run, T.notification), [
      one(run, T.subscription, '-push'),
      one(run, T.topicIam, '-storage-publisher'),
    ]);
  });

  it(CASE.duplicateCheck, () => {
    const views = ofType(run, T.table);
    expectOrder(run, one(run, T.transfer), [
      one(run, T.projectIam, '-dupcheck-job-user'),
      one(run, T.datasetIam, '-dupcheck-data-viewer'),
      views.find((t) => t.inputs.tableId === TABLE_ID)!,
      views.find((t) => t.inputs.tableId === 'duplicate_objects')!,
    ]);
  });

  it(CASE.alerts, () => {
    const policies = policiesOnLogMetrics(run);
    expect(policies.map((p) => p.policy.name).sort()).toEqual(
      [
        `docline-${stack}-alerts-duplicate-rate`,
        `docline-${stack}-reconcile-missing`,
        `docline-${stack}-operations-no-throughput`,
        `docline-${stack}-operations-gemini-rate-limited`,
        `docline-${stack}-operations-duplicate-check-not-run`,
      ].sort(),
    );
    for (const { policy, metrics } of policies) {
      const sleeps = ofType(run, T.sleep).filter((s) => waitsFor(run, policy).has(s.urn));
      expect(sleeps.length).toBeGreaterThan(0);
      for (const metric of metrics) {
        expect(sleeps.some((s) => waitsFor(run, s).has(metric.urn))).toBe(true);
      }
      expect(sleeps.every((s) => /^\d+s$/.test(String(s.inputs.createDuration)))).toBe(true);
    }
  });

  it(CASE.reconcile, () => {
    const reconcilerGrants = run.resources
      .filter((r) => r.type.includes('IAMMember') || r.type.includes('IamMember'))
      .filter((g) => String(g.inputs.member).includes('-reconcile@'));

    expect(reconcilerGrants.length).toBe(
      overrides['docline:reconcileMode' as keyof typeof overrides] === 'apply' ? 4 : 3,
    );
    expectOrder(run, one(run, T.job), reconcilerGrants);
    expectOrder(run, one(run, T.scheduler), [one(run, T.jobIam), one(run, T.job)]);
  });

  it(CASE.image, () => {
    const image = (one(run, T.run).inputs.template as { containers: Array<{ image: string }> }).containers[0]!
      .image;

    if (ofType(run, T.image).length === 1) {
      expectOrder(run, one(run, T.image), [one(run, T.repository)]);
      expectOrder(run, one(run, T.run), [one(run, T.image)]);
      expect(image).toBe(one(run, T.image).outputs.ref);
    }
    expect(image).toMatch(/@sha256:[0-9a-f]{64}$/);
  });
});
