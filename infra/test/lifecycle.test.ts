/**
 * Every `pulumi up`, not only the first: what the program guarantees for a first `up`, a second
 * `up` with no change, a replacement, a `destroy`, and two stacks in one project, read from what the
 * engine receives (inputs, dependencies and resource options), on both stack files. No real deploy
 * can run here; docs/deploy.md's lifecycle table names, row by row, the cases below that prove it,
 * or says that it holds by construction, and the first test keeps the two in step.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RECONCILE_EXIT } from '../../worker/src/reconcile/reconcile';
import { STACK_LABEL } from '../components/alerts';
import { promqlMetricName } from '../components/dashboard';
import { IAM_PROPAGATION_DURATION, LOG_METRIC_SETTLE_DURATION } from '../components/lifecycle';
import { FAILED_EXECUTION_DOCUMENTATION } from '../components/reconcile';
import { TABLE_ID } from '../components/warehouse';
import { BUILD_CONTEXT, DOCKERFILE } from '../components/worker-image';
import {
  type CapturedResource,
  ofType,
  one,
  type ProgramRun,
  runStack,
  stackConfig,
  T,
  waitsFor,
} from './harness';
import { docTable } from './support/doc-table';

const REPO_ROOT = join(__dirname, '..', '..');

/** The cases below, by name: each row of the lifecycle table in docs/deploy.md names those that prove it. */
const CASE = {
  identities: 'grants to a Google service agent take the agent from a ServiceIdentity that creates it',
  waits:
    'declares every wait on propagation: 600 s after the log metrics, 420 s after the grants of the worker, the duplicate check and the notification',
  serviceAfterTable: 'starts the worker service after the table, with a preset image too',
  residency:
    'keeps what names documents in the stack\u2019s region: topics by storage policy, log lines by a regional log bucket',
  identical: 'gives the same inputs, dependencies and options on two runs of the program',
  noMachinePath: 'passes no path of this machine: the build context is relative',
  dashboardNormal:
    'emits the dashboard in the form the API returns it: no zero, no empty list, PromQL and no MQL',
  atRisk:
    'lists, for every resource whose replacement could double or drop a document, the option that prevents it',
  image: 'keeps the built image out of destroy, and has a repository of its own only when it builds',
  destroyKeeps:
    'keeps on destroy exactly the data (documents, dataset, table, log lines) when deletionProtection is on, nothing when off',
  destroyBlocksNothing:
    'lets destroy delete everything else: no deletionProtection on the service or the job, the memo emptied',
  twoStacks:
    'keeps two stacks in one project apart: no shared name, id or display name, each filter on its own resources, each alert labelled',
  reconcileExit:
    'documents the reconcile job\u2019s failed execution as the entry point exits: missing documents do not fail it',
} as const;
type Case = (typeof CASE)[keyof typeof CASE];

/** The "phase" cell of each row of docs/deploy.md's lifecycle table, and the cases that prove the row. */
const DOCUMENTED: Record<string, readonly Case[]> = {
  'first `up`': [CASE.identities, CASE.waits, CASE.serviceAfterTable, CASE.residency],
  'second `up`, no change': [CASE.identical, CASE.noMachinePath, CASE.dashboardNormal],
  'code change (new image)': [CASE.noMachinePath, CASE.image],
  'replacement of the notification': [CASE.atRisk, CASE.reconcileExit],
  'replacement of a topic or subscription': [CASE.atRisk],
  'replacement of the bucket, dataset or table': [CASE.atRisk, CASE.destroyKeeps],
  '`destroy`': [CASE.image, CASE.destroyKeeps, CASE.destroyBlocksNothing],
  'two stacks in one project': [CASE.twoStacks],
};

describe('the lifecycle table of docs/deploy.md', () => {
  const rows = docTable('deploy.md', 'lifecycle');

  it('has one row per phase proven below, each naming the cases that prove it, and no other', () => {
    expect(rows.map((cells) => cells[1])).toEqual(Object.keys(DOCUMENTED));
    for (const cells of rows) {
      const proof = cells[3] ?? '';
      // Every case the row quotes is one of its own, so a renamed case cannot linger in the docs.
      const quoted = [...proof.matchAll(/“([^”]+)”/g)].map((m) => m[1]);
      expect({ phase: cells[1], quoted }).toEqual({ phase: cells[1], quoted: DOCUMENTED[cells[1]!] });
      const unnamed = (DOCUMENTED[cells[1]!] ?? []).filter((name) => !proof.includes(`“${name}”`));
      expect({ phase: cells[1], unnamed }).toEqual({ phase: cells[1], unnamed: [] });
    }
    expect(new Set(Object.values(DOCUMENTED).flat())).toEqual(new Set(Object.values(CASE)));
  });

  it('says what holds by construction only, where no case can prove it', () => {
    const constructionOnly = rows.filter((cells) => (cells[3] ?? '').includes('by construction'));
    expect(constructionOnly.length).toBeGreaterThan(0);
  });
});

/** The options a resource registered with, as the lifecycle test compares them. */
const guard = ({ options: { protect, deleteBeforeReplace, retainOnDelete } }: CapturedResource) => ({
  protect,
  deleteBeforeReplace,
  retainOnDelete,
});

/** Every resource whose replacement or deletion could double or drop a document, and what prevents it. */
interface AtRisk {
  what: string;
  type: string;
  suffix: string;
  /** What a replacement without the option would do. */
  risk: string;
  /** The options that prevent it, given the stack's deletionProtection (`keep`). */
  expected: (keep: boolean) => ReturnType<typeof guard>;
}
const none = { protect: false, deleteBeforeReplace: false, retainOnDelete: false };
const AT_RISK: readonly AtRisk[] = [
  {
    what: 'the bucket notification',
    type: T.notification,
    suffix: '-delivery-notification',
    risk: 'two notifications while the update runs: every upload published twice',
    expected: () => ({ ...none, deleteBeforeReplace: true }),
  },
  {
    what: 'the uploads topic',
    type: T.topic,
    suffix: '-documents-uploads',
    risk: 'the push subscription detached from what the bucket publishes',
    expected: (keep) => ({ ...none, protect: keep }),
  },
  {
    what: 'the push subscription',
    type: T.subscription,
    suffix: '-delivery-push',
    risk: 'its backlog dropped with it, every message pushed twice while both exist',
    expected: (keep) => ({ ...none, protect: keep }),
  },
  {
    what: 'the dead-letter topic',
    type: T.topic,
    suffix: '-delivery-dead-letters',
    risk: 'dead letters published nowhere',
    expected: (keep) => ({ ...none, protect: keep }),
  },
  {
    what: 'the dead-letter subscription',
    type: T.subscription,
    suffix: '-delivery-dead-letters',
    risk: 'the dead letters it keeps dropped with it',
    expected: (keep) => ({ ...none, protect: keep }),
  },
  {
    what: 'the documents bucket',
    type: T.bucket,
    suffix: '-documents-bucket',
    risk: 'the documents deleted, or a new empty bucket watched while uploads go to the old one',
    expected: (keep) => ({ ...none, retainOnDelete: keep, protect: keep }),
  },
  {
    what: 'the dataset',
    type: T.dataset,
    suffix: '-warehouse-dataset',
    risk: 'the rows deleted',
    expected: (keep) => ({ ...none, retainOnDelete: keep, protect: keep }),
  },
  {
    what: 'the table',
    type: T.table,
    suffix: '-warehouse-table',
    risk: 'the rows deleted, or dropped from the state then refused with 409 on every later up',
    expected: (keep) => ({ ...none, retainOnDelete: keep, protect: keep }),
  },
  {
    what: 'the corrections table',
    type: T.table,
    suffix: '-warehouse-corrections',
    risk: "the accountants' corrections deleted (the documents view shows the rows as analysed)",
    expected: (keep) => ({ ...none, retainOnDelete: keep, protect: keep }),
  },
];

/** Cloud Monitoring's normal form of a dashboard, as the API returns it: no 0, '', false or []. */
function apiNormalForm(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(apiNormalForm);
  if (value !== null && typeof value === 'object') {
    const kept = Object.entries(value).filter(
      ([, v]) => v !== 0 && v !== '' && v !== false && !(Array.isArray(v) && v.length === 0),
    );
    return Object.fromEntries(kept.map(([k, v]) => [k, apiNormalForm(v)]));
  }
  return value;
}

/** Every string anywhere inside a value. */
function stringsIn(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(stringsIn);
  if (value !== null && typeof value === 'object') return Object.values(value).flatMap(stringsIn);
  return [];
}

describe('the API\u2019s normal form, as this file models it', () => {
  it('drops what the Monitoring API drops, and keeps everything else', () => {
    expect(
      apiNormalForm({
        xPos: 0,
        yPos: 4,
        groupByFields: [],
        title: 'a',
        legendTemplate: '',
        tiles: [{ x: 0 }],
      }),
    ).toEqual({ yPos: 4, title: 'a', tiles: [{}] });
  });

  it.each([
    ['kubernetes.io/container/cpu/limit_cores', 'kubernetes_io:container_cpu_limit_cores'],
    ['logging.googleapis.com/log_entry_count', 'logging_googleapis_com:log_entry_count'],
    [
      'logging.googleapis.com/user/docline-dev-dashboard-tokens',
      'logging_googleapis_com:user_docline_dev_dashboard_tokens',
    ],
  ])('names %s in PromQL as %s (Google\u2019s mapping)', (metric, promql) => {
    expect(promqlMetricName(metric)).toBe(promql);
  });
});

describe.each(['dev', 'prod'] as const)('the lifecycle of the %s stack', (stack) => {
  let run: ProgramRun;
  const config = stackConfig(stack);
  const keep = stack === 'prod';

  beforeAll(async () => {
    run = await runStack(stack);
  });

  it(CASE.identities, () => {
    const agentGrants = run.resources.filter(
      (r) => /IAMMember|IamMember/.test(r.type) && /@gcp-sa-/.test(String(r.inputs.member)),
    );
    const identities = ofType(run, T.identity);

    expect(identities.map((i) => i.inputs.service).sort()).toEqual([
      'bigquerydatatransfer.googleapis.com',
      'pubsub.googleapis.com',
    ]);
    expect(agentGrants.length).toBe(4);
    for (const grant of agentGrants) {
      const from = identities.find((i) => i.outputs.member === grant.inputs.member)!;
      expect({ grant: grant.name, memberFrom: grant.propertyDependencies.member }).toEqual({
        grant: grant.name,
        memberFrom: [from.urn],
      });
    }
    // The Cloud Storage agent comes from getProjectServiceAccount, which creates it on first call.
    expect(run.invokes.map((i) => i.token)).toContain(
      'gcp:storage/getProjectServiceAccount:getProjectServiceAccount',
    );
    // The Cloud Run agent (it pulls an image of another project) is named from the project number:
    // the Run API creates it when enabled, and the grant waits for the APIs.
    const imageReaders = ofType(run, T.repositoryIam);
    expect(run.invokes.some((i) => i.token === 'gcp:organizations/getProject:getProject')).toBe(
      imageReaders.length > 0,
    );
    for (const reader of imageReaders) {
      expect(reader.inputs.member).toMatch(
        /^serviceAccount:service-\d+@serverless-robot-prod\.iam\.gserviceaccount\.com$/,
      );
    }
  });

  it(CASE.waits, () => {
    const sleeps = ofType(run, T.sleep);
    const service = one(run, T.run);
    const check = one(run, T.transfer);

    expect(LOG_METRIC_SETTLE_DURATION).toBe('600s');
    expect(IAM_PROPAGATION_DURATION).toBe('420s');
    const metricWaits = sleeps.filter((s) => /-metrics?-settle$/.test(s.name));
    // The per-message alerts', the reconcile alert's and the operations alerts' metrics.
    expect(metricWaits).toHaveLength(3);
    for (const sleep of metricWaits) expect(sleep.inputs.createDuration).toBe(LOG_METRIC_SETTLE_DURATION);
    const serviceWait = one(run, T.sleep, '-worker-grants-settle');
    const checkWait = one(run, T.sleep, '-dupcheck-grants-settle');
    const publisherWait = one(run, T.sleep, '-publisher-grant-settle');
    for (const wait of [serviceWait, checkWait, publisherWait]) {
      expect(wait.inputs.createDuration).toBe(IAM_PROPAGATION_DURATION);
    }
    expect(waitsFor(run, service).has(serviceWait.urn)).toBe(true);
    expect(waitsFor(run, check).has(checkWait.urn)).toBe(true);
    expect(waitsFor(run, one(run, T.notification)).has(publisherWait.urn)).toBe(true);
    expect(waitsFor(run, publisherWait).has(one(run, T.topicIam, '-storage-publisher').urn)).toBe(true);
    // Nothing else sleeps: every wait is one of these.
    expect(sleeps).toHaveLength(6);
    // Each wait follows the grants it waits for, and is re-run only when one of them is replaced.
    const imageReaders = ofType(run, T.repositoryIam);
    // The worker's seven grants: bucket viewer, memo creator, viewer and lease writer, dataset
    // editor, job user, Vertex user.
    expect(Object.keys(serviceWait.inputs.triggers as object)).toHaveLength(7 + imageReaders.length);
    expect(Object.keys(checkWait.inputs.triggers as object)).toHaveLength(3);
    const workerGrants = run.resources.filter(
      (r) => /IAMMember|IamMember/.test(r.type) && String(r.inputs.member).includes('-worker@'),
    );
    expect(workerGrants).toHaveLength(7);
    for (const grant of workerGrants) expect(waitsFor(run, serviceWait).has(grant.urn)).toBe(true);
  });

  it(CASE.serviceAfterTable, async () => {
    const table = ofType(run, T.table).find((t) => t.inputs.tableId === TABLE_ID)!;
    expect(waitsFor(run, one(run, T.run)).has(table.urn)).toBe(true);
    // With a preset image nothing else orders the two: the dependency must be the service's own.
    expect(one(run, T.run).dependencies).toContain(table.urn);
  });

  it(CASE.residency, () => {
    const region = config['docline:region']!;
    for (const topic of ofType(run, T.topic)) {
      expect({ topic: topic.name, policy: topic.inputs.messageStoragePolicy }).toEqual({
        topic: topic.name,
        // At rest in the region; never a publish refused for the region it came from (document-bucket.ts).
        policy: { allowedPersistenceRegions: [region], enforceInTransit: false },
      });
    }
    const bucket = one(run, T.logBucket);
    const sink = one(run, T.sink);
    const exclusion = one(run, T.exclusion);
    expect(bucket.inputs).toMatchObject({ location: region, bucketId: `docline-${stack}-logs` });
    expect(sink.inputs.destination).toBe(
      `logging.googleapis.com/projects/${config['gcp:project']}/locations/${region}/buckets/docline-${stack}-logs`,
    );
    expect(exclusion.inputs.filter).toBe(sink.inputs.filter);
    expect(sink.inputs.filter).toContain(`resource.labels.service_name = "${one(run, T.run).outputs.name}"`);
    expect(sink.inputs.filter).toContain(`resource.labels.job_name = "${one(run, T.job).outputs.name}"`);
    expect(waitsFor(run, exclusion).has(sink.urn)).toBe(true);
  });

  it(CASE.identical, async () => {
    const again = await runStack(stack);
    const shape = (r: ProgramRun) =>
      r.resources.map((x) => ({
        type: x.type,
        name: x.name,
        inputs: x.inputs,
        options: x.options,
        dependencies: [...x.dependencies].sort(),
        propertyDependencies: x.propertyDependencies,
      }));

    expect(shape(again)).toEqual(shape(run));
    expect(again.outputs).toEqual(run.outputs);
  });

  it(CASE.noMachinePath, () => {
    const machinePaths = [REPO_ROOT, process.cwd(), require('node:os').homedir()];
    const leaking = run.resources.filter((r) =>
      stringsIn(r.inputs).some((text) => machinePaths.some((p) => text.includes(p))),
    );
    expect(leaking.map((r) => r.name)).toEqual([]);
    for (const image of ofType(run, T.image)) {
      expect(image.inputs).toMatchObject({
        context: { location: BUILD_CONTEXT },
        dockerfile: { location: DOCKERFILE },
      });
    }
    // Relative to the directory Pulumi runs the program in: the one that holds Pulumi.yaml.
    expect(readFileSync(join(REPO_ROOT, BUILD_CONTEXT, DOCKERFILE), 'utf8')).toMatch(/^FROM /m);
    expect(readFileSync(join(REPO_ROOT, BUILD_CONTEXT, 'Pulumi.yaml'), 'utf8')).toMatch(/^name: docline$/m);
  });

  it(CASE.dashboardNormal, () => {
    const text = String(one(run, T.dashboard).inputs.dashboardJson);
    const json = JSON.parse(text) as { mosaicLayout: { tiles: Array<Record<string, unknown>> } };

    expect(apiNormalForm(json)).toEqual(json);
    expect(text).not.toContain('timeSeriesQueryLanguage');
    const promql = stringsIn(json).filter((s) => s.startsWith('sum(increase('));
    expect(promql).toHaveLength(2);
    // The first tile sits at 0,0: its position is left out, as the API would leave it.
    expect(json.mosaicLayout.tiles[0]).not.toHaveProperty('xPos');
    expect(json.mosaicLayout.tiles[0]).not.toHaveProperty('yPos');
    expect(json.mosaicLayout.tiles[3]).toMatchObject({ xPos: 6, yPos: 4 });
  });

  it(CASE.atRisk, () => {
    const listed = AT_RISK.map((entry) => one(run, entry.type, entry.suffix));
    for (const [i, entry] of AT_RISK.entries()) {
      expect({ what: entry.what, risk: entry.risk, options: guard(listed[i]!) }).toEqual({
        what: entry.what,
        risk: entry.risk,
        options: entry.expected(keep),
      });
    }
    // Every resource of those kinds is listed: the memo bucket (a cache) and the views (no data) aside.
    const kinds = [T.notification, T.topic, T.subscription, T.dataset];
    const unlisted = run.resources.filter(
      (r) =>
        (kinds.includes(r.type) ||
          (r.type === T.bucket && !r.name.endsWith('-memo-bucket')) ||
          (r.type === T.table && r.inputs.view === undefined)) &&
        !listed.includes(r),
    );
    expect(unlisted.map((r) => r.name)).toEqual([]);
  });

  it(CASE.image, () => {
    if (config['docline:image'] === undefined && config['docline:promotedImage'] !== 'true') {
      expect(guard(one(run, T.image))).toEqual({ ...none, retainOnDelete: true });
      expect(ofType(run, T.repository)).toHaveLength(1);
      expect(run.outputs.imageRepository).toBeDefined();
    } else {
      // Built elsewhere and pushed to a repository outside the stack: no repository here to delete.
      expect(ofType(run, T.image)).toEqual([]);
      expect(ofType(run, T.repository)).toEqual([]);
      expect(run.outputs.imageRepository).toBeUndefined();
      expect(String(run.outputs.image)).not.toContain(`/docline-${stack}/`);
    }
  });

  it(CASE.destroyKeeps, () => {
    const retained = run.resources.filter((r) => r.options.retainOnDelete).map((r) => r.type);
    const data = [T.bucket, T.dataset, T.table, T.table, T.logBucket];

    expect(retained.filter((t) => t !== T.image).sort()).toEqual(keep ? [...data].sort() : []);
    if (keep) expect(one(run, T.bucket, '-documents-bucket').inputs.forceDestroy).toBe(false);
    else expect(one(run, T.bucket, '-documents-bucket').inputs.forceDestroy).toBe(true);
  });

  it(CASE.destroyBlocksNothing, () => {
    expect(one(run, T.run).inputs.deletionProtection).toBe(false);
    expect(one(run, T.job).inputs.deletionProtection).toBe(false);
    expect(one(run, T.bucket, '-memo-bucket').inputs.forceDestroy).toBe(true);
    expect(one(run, T.dataset).inputs.deleteContentsOnDestroy).toBe(!keep);
    for (const api of ofType(run, T.api)) expect(api.inputs.disableOnDestroy).toBe(false);
    // Only the delivery path and the data are protected, and only where the stack keeps its data.
    const protectedNames = run.resources.filter((r) => r.options.protect).map((r) => r.type);
    expect(protectedNames.sort()).toEqual(
      keep
        ? [
            T.dataset,
            T.table,
            T.table,
            T.logBucket,
            T.subscription,
            T.subscription,
            T.topic,
            T.topic,
            T.bucket,
          ].sort()
        : [],
    );
  });

  it(CASE.reconcileExit, () => {
    const failed = one(run, T.alert, '-reconcile-failed');
    const content = (failed.inputs.documentation as { content: string }).content;

    expect(content).toBe(FAILED_EXECUTION_DOCUMENTATION);
    expect(content).toContain(`exit ${RECONCILE_EXIT.error}`);
    expect(content).not.toContain(`exit ${RECONCILE_EXIT.missing}`);
    expect(content).toMatch(/Missing documents do not fail an execution/);
  });
});

describe('two stacks in one project', () => {
  const project = 'one-shared-project';
  const runs: Record<'dev' | 'prod', ProgramRun> = {} as never;
  /** Project-wide by nature and by design: enabling an API and creating a service agent are idempotent, never undone. */
  const SHARED = [T.api, T.identity];
  /** The inputs that name a resource in the project (two stacks must never give the same). */
  const NAMING = ['name', 'accountId', 'datasetId', 'bucketId', 'repositoryId', 'displayName'];

  beforeAll(async () => {
    for (const stack of ['dev', 'prod'] as const) {
      runs[stack] = await runStack(stack, { 'gcp:project': project });
    }
  });

  it(CASE.twoStacks, () => {
    const namesOf = (run: ProgramRun) =>
      run.resources
        .filter((r) => r.custom && !SHARED.includes(r.type))
        .flatMap((r) =>
          [
            ...NAMING.map((key) => r.inputs[key]),
            ...(r.type === T.dashboard ? [JSON.parse(String(r.inputs.dashboardJson)).displayName] : []),
          ]
            .filter((v): v is string => typeof v === 'string')
            .map((v) => `${r.type.split(':')[1]} ${v}`),
        );
    for (const stack of ['dev', 'prod'] as const) {
      // Auto-named resources take their name from the logical name, which starts with the stack's prefix.
      expect(
        runs[stack].resources
          .filter((r) => !new RegExp(`^docline-${stack}(-|$)`).test(r.name))
          .map((r) => r.name),
      ).toEqual([]);
    }
    const dev = new Set(namesOf(runs.dev));
    expect(namesOf(runs.prod).filter((n) => dev.has(n))).toEqual([]);

    for (const [stack, other] of [
      ['dev', 'prod'],
      ['prod', 'dev'],
    ] as const) {
      const run = runs[stack];
      // No input of one stack names a resource of the other: filters, queries, charts, grants.
      const leaks = run.resources.flatMap((r) =>
        stringsIn(r.inputs).filter((s) => s.includes(`docline-${other}`) || s.includes(`docline_${other}`)),
      );
      expect(leaks).toEqual([]);
      for (const alert of ofType(run, T.alert)) {
        expect(alert.inputs.userLabels).toEqual({ [STACK_LABEL]: `docline-${stack}` });
        expect(String(alert.inputs.displayName)).toMatch(new RegExp(`^docline-${stack}: `));
      }
      // The billed bytes are this stack's worker's, not every job labelled app=docline in the project.
      expect(String(one(run, T.metric, '-bytes-billed').inputs.filter)).toContain(
        `principalEmail = "docline-${stack}-worker@${project}.iam.gserviceaccount.com"`,
      );
    }
  });
});
