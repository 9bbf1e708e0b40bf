/**
 * The order a first `pulumi up` on an empty project needs, read from what the engine sees: the
 * dependencies and property dependencies of every register request, followed transitively and
 * through components (a dependency on a component is a dependency on everything inside it).
 * No real deploy can run here, so this is how the issue-15 orders are proven, on both stack files.
 */
import { REQUIRED_APIS } from '../components/foundation';
import { type CapturedResource, ofType, one, type ProgramRun, runProgram, stackConfig } from './harness';

const T = {
  api: 'gcp:projects/service:Service',
  bucketIam: 'gcp:storage/bucketIAMMember:BucketIAMMember',
  datasetIam: 'gcp:bigquery/datasetIamMember:DatasetIamMember',
  projectIam: 'gcp:projects/iAMMember:IAMMember',
  topicIam: 'gcp:pubsub/topicIAMMember:TopicIAMMember',
  accountIam: 'gcp:serviceaccount/iAMMember:IAMMember',
  runIam: 'gcp:cloudrunv2/serviceIamMember:ServiceIamMember',
  jobIam: 'gcp:cloudrunv2/jobIamMember:JobIamMember',
  run: 'gcp:cloudrunv2/service:Service',
  job: 'gcp:cloudrunv2/job:Job',
  scheduler: 'gcp:cloudscheduler/job:Job',
  subscription: 'gcp:pubsub/subscription:Subscription',
  notification: 'gcp:storage/notification:Notification',
  transfer: 'gcp:bigquery/dataTransferConfig:DataTransferConfig',
  table: 'gcp:bigquery/table:Table',
  metric: 'gcp:logging/metric:Metric',
  alert: 'gcp:monitoring/alertPolicy:AlertPolicy',
  sleep: 'time:index/sleep:Sleep',
  image: 'docker-build:index:Image',
};

/** Everything `resource` waits for, transitively, with components expanded to their descendants. */
function waitsFor(run: ProgramRun, resource: CapturedResource): Set<string> {
  const byUrn = new Map(run.resources.map((r) => [r.urn, r]));
  const childrenOf = (urn: string) => run.resources.filter((r) => r.parent === urn).map((r) => r.urn);
  const seen = new Set<string>();
  const direct = (r: CapturedResource) => [
    ...r.dependencies,
    ...Object.values(r.propertyDependencies).flat(),
  ];
  const queue = [...direct(resource)];
  while (queue.length > 0) {
    const urn = queue.pop()!;
    if (seen.has(urn)) continue;
    seen.add(urn);
    const dep = byUrn.get(urn);
    if (dep === undefined) continue;
    queue.push(...direct(dep));
    if (!dep.custom) queue.push(...childrenOf(urn));
  }
  return seen;
}

function expectOrder(run: ProgramRun, later: CapturedResource, earlier: CapturedResource[]): void {
  expect(earlier.length).toBeGreaterThan(0);
  const waits = waitsFor(run, later);
  for (const first of earlier) {
    expect({ resource: later.name, waitsFor: first.name, ordered: waits.has(first.urn) }).toEqual({
      resource: later.name,
      waitsFor: first.name,
      ordered: true,
    });
  }
}

/** Alert policies whose conditions read a log-based metric of the stack. */
function policiesOnLogMetrics(
  run: ProgramRun,
): Array<{ policy: CapturedResource; metrics: CapturedResource[] }> {
  return ofType(run, T.alert)
    .map((policy) => {
      const conditions = JSON.stringify(policy.inputs.conditions);
      const metrics = ofType(run, T.metric).filter((m) =>
        conditions.includes(`logging.googleapis.com/user/${String(m.outputs.name)}\\"`),
      );
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
    run = await runProgram(stackConfig(stack, overrides), { stack });
  });

  it('enables Cloud Resource Manager with every other API, before every other resource', () => {
    const apis = ofType(run, T.api);
    expect(apis.map((a) => a.inputs.service)).toEqual(
      expect.arrayContaining(['cloudresourcemanager.googleapis.com']),
    );
    expect(apis).toHaveLength(REQUIRED_APIS.length);

    for (const resource of run.resources.filter((r) => r.custom && r.type !== T.api)) {
      expectOrder(run, resource, apis);
    }
  });

  it('makes every data lookup wait for the APIs', () => {
    const apis = ofType(run, T.api).map((a) => a.urn);

    expect(run.invokes.map((i) => i.token)).toEqual(
      expect.arrayContaining([
        'gcp:organizations/getProject:getProject',
        'gcp:storage/getProjectServiceAccount:getProjectServiceAccount',
      ]),
    );
    for (const invoke of run.invokes) {
      expect({
        invoke: invoke.token,
        apisFirst: apis.every((a) => invoke.registeredBefore.includes(a)),
      }).toEqual({
        invoke: invoke.token,
        apisFirst: true,
      });
    }
  });

  it('starts the worker service after every grant of its account (its startup probe reads the store)', () => {
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
      'roles/storage.objectViewer',
      'roles/storage.objectViewer',
    ]);
    expectOrder(run, one(run, T.run), workerGrants);
  });

  it('creates the push subscription after run.invoker on the service and the token-creator grant', () => {
    expectOrder(run, one(run, T.subscription, '-push'), [
      one(run, T.runIam),
      one(run, T.accountIam, '-push-token-creator'),
    ]);
  });

  it('creates the bucket notification after the push subscription and the storage agent\u2019s publisher grant', () => {
    expectOrder(run, one(run, T.notification), [
      one(run, T.subscription, '-push'),
      one(run, T.topicIam, '-storage-publisher'),
    ]);
  });

  it('starts the scheduled duplicate check after its grants, the table and the duplicate_objects view', () => {
    const views = ofType(run, T.table);
    expectOrder(run, one(run, T.transfer), [
      one(run, T.projectIam, '-dupcheck-job-user'),
      one(run, T.datasetIam, '-dupcheck-data-viewer'),
      views.find((t) => t.inputs.tableId === 'deliveries')!,
      views.find((t) => t.inputs.tableId === 'duplicate_objects')!,
    ]);
  });

  it('creates every alert on a log-based metric after a Sleep that follows that metric (provider issue 11102)', () => {
    const policies = policiesOnLogMetrics(run);
    expect(policies.map((p) => p.policy.name).sort()).toEqual(
      [`docline-${stack}-alerts-duplicate-rate`, `docline-${stack}-reconcile-missing`].sort(),
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

  it('runs the reconcile job after its grants, and schedules it after the scheduler may run it', () => {
    const reconcilerGrants = run.resources
      .filter((r) => r.type.includes('IAMMember') || r.type.includes('IamMember'))
      .filter((g) => String(g.inputs.member).includes('-reconcile@'));

    expect(reconcilerGrants.length).toBe(
      overrides['docline:reconcileMode' as keyof typeof overrides] === 'apply' ? 4 : 3,
    );
    expectOrder(run, one(run, T.job), reconcilerGrants);
    expectOrder(run, one(run, T.scheduler), [one(run, T.jobIam), one(run, T.job)]);
  });

  it('runs the image the stack pushed, or the configured one, never a mutable tag', () => {
    const image = (one(run, T.run).inputs.template as { containers: Array<{ image: string }> }).containers[0]!
      .image;

    if (ofType(run, T.image).length === 1) {
      expectOrder(run, one(run, T.run), [one(run, T.image)]);
      expect(image).toBe(one(run, T.image).outputs.ref);
    }
    expect(image).toMatch(/@sha256:[0-9a-f]{64}$/);
  });
});
