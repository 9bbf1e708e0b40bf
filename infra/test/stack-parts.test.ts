/**
 * Parts of the stack under mocks: the image the stack builds, the
 * repository's cleanup, the buckets' soft delete and the memo bucket, the reconcile job and its
 * IAM in each mode, and the dashboard.
 */

import { join } from 'node:path';
import { DELIVERY_DEFAULTS } from '../../worker/src/contract/settings';
import { CLOUD_VARIABLES } from '../../worker/src/reconcile/config';
import { BUILT_IN_METRICS, promqlMetricName } from '../components/dashboard';
import { reconcileArgs } from '../components/reconcile';
import { TABLE_ID } from '../components/warehouse';
import { contentTag } from '../components/worker-image';
import { type CapturedResource, ofType, one, type ProgramRun, runStack, stackConfig, T } from './harness';

/** Grants to one principal, as `role @ type`. */
function grantsTo(run: ProgramRun, accountFragment: string): string[] {
  return run.resources
    .filter((r) => /IAMMember|IamMember/.test(r.type) && String(r.inputs.member).includes(accountFragment))
    .map((r) => `${r.inputs.role} @ ${r.type.split(':')[1]}`)
    .sort();
}

describe('the stack parts of the dev stack', () => {
  let run: ProgramRun;
  const dev = stackConfig('dev');
  const project = dev['gcp:project']!;

  beforeAll(async () => {
    run = await runStack('dev');
  });

  describe('the worker image', () => {
    it('is built from worker/Dockerfile and pushed to the stack\u2019s repository, tagged by the content of its sources', () => {
      const image = one(run, T.image);
      const repository = one(run, T.repository);

      expect(image.inputs).toMatchObject({
        push: true,
        buildOnPreview: false,
        platforms: ['linux/amd64'],
        dockerfile: { location: expect.stringMatching(/worker\/Dockerfile$/) },
        tags: [
          `europe-west1-docker.pkg.dev/${project}/docline-dev/worker:${contentTag(join(__dirname, '..', '..'))}`,
        ],
      });
      expect(image.propertyDependencies.tags).toContain(repository.urn);
      expect((image.inputs.registries as Array<{ address: string; username: string }>)[0]).toMatchObject({
        address: 'europe-west1-docker.pkg.dev',
        username: 'oauth2accesstoken',
      });
    });

    it('keeps the repository from growing: the newest N images kept, older ones deleted', () => {
      expect(one(run, T.repository).inputs).toMatchObject({
        cleanupPolicyDryRun: false,
        cleanupPolicies: [
          { id: 'keep-most-recent', action: 'KEEP', mostRecentVersions: { keepCount: 10 } },
          { id: 'delete-old', action: 'DELETE', condition: { tagState: 'ANY' } },
        ],
      });
    });
  });

  describe('the buckets', () => {
    it('states soft delete on both: 7 days on the documents, none on the memo', () => {
      expect(one(run, T.bucket, '-documents-bucket').inputs.softDeletePolicy).toEqual({
        retentionDurationSeconds: 604800,
      });
      expect(one(run, T.bucket, '-memo-bucket').inputs.softDeletePolicy).toEqual({
        retentionDurationSeconds: 0,
      });
    });

    it('makes the memo a private bucket next to the data whose entries expire after the redelivery window', () => {
      expect(one(run, T.bucket, '-memo-bucket').inputs).toMatchObject({
        name: `docline-dev-memo-${project}`,
        location: 'EU',
        uniformBucketLevelAccess: true,
        publicAccessPrevention: 'enforced',
        lifecycleRules: [
          { action: { type: 'Delete' }, condition: { age: DELIVERY_DEFAULTS.redeliveryWindowDays } },
        ],
        labels: { 'docline-role': 'memo' },
      });
    });
  });

  describe('the reconcile job (report mode, the default)', () => {
    it('runs the reconcile entry point of the worker image in report mode with the cloud environment', () => {
      const job = one(run, T.job);
      const template = (job.inputs.template as { template: Record<string, unknown> }).template;
      const container = (template.containers as Array<Record<string, unknown>>)[0]!;
      const envs = Object.fromEntries(
        (container.envs as Array<{ name: string; value: string }>).map((e) => [e.name, e.value]),
      );

      expect(container.commands).toEqual(['node']);
      expect(container.args).toEqual(['worker/dist/reconcile/main.js']);
      expect(container.image).toBe(one(run, T.image).outputs.ref);
      expect(template.serviceAccount).toBe(`docline-dev-reconcile@${project}.iam.gserviceaccount.com`);
      expect(envs).toEqual({
        DOCLINE_PROJECT: project,
        DOCLINE_BUCKET: one(run, T.bucket, '-documents-bucket').outputs.name,
        DOCLINE_TOPIC: one(run, T.topic, '-uploads').outputs.name,
        DOCLINE_TABLE: `${project}.docline_dev.${TABLE_ID}`,
        BIGQUERY_LOCATION: 'EU',
        DEDUP_KEY: 'object',
        RECONCILE_MODE: 'report',
        MAXIMUM_BYTES_BILLED: '100000000',
      });
    });

    it('starts daily from Cloud Scheduler, which calls the job\u2019s run method as its own account', () => {
      const scheduler = one(run, T.scheduler);

      expect(scheduler.inputs).toMatchObject({
        schedule: '0 3 * * *',
        timeZone: 'Etc/UTC',
        httpTarget: {
          httpMethod: 'POST',
          uri: `https://run.googleapis.com/v2/projects/${project}/locations/europe-west1/jobs/${one(run, T.job).outputs.name}:run`,
          oauthToken: { serviceAccountEmail: `docline-dev-scheduler@${project}.iam.gserviceaccount.com` },
        },
      });
    });

    it('gives the job\u2019s account read access only, and the scheduler\u2019s account the run of that one job only', () => {
      expect(grantsTo(run, 'docline-dev-reconcile@')).toEqual([
        'roles/bigquery.dataViewer @ bigquery/datasetIamMember',
        'roles/bigquery.jobUser @ projects/iAMMember',
        'roles/storage.objectViewer @ storage/bucketIAMMember',
      ]);
      expect(grantsTo(run, 'docline-dev-scheduler@')).toEqual([
        'roles/run.invoker @ cloudrunv2/jobIamMember',
      ]);
      expect(one(run, T.jobIam).inputs.name).toBe(one(run, T.job).outputs.name);
    });

    it('alerts when a run finds missing documents (its summary line) or fails (built-in execution metric)', () => {
      const metric = one(run, T.metric, '-reconcile-missing');
      const missing = one(run, T.alert, '-reconcile-missing');
      const failed = one(run, T.alert, '-reconcile-failed');
      const filterOf = (p: CapturedResource) =>
        (p.inputs.conditions as Array<{ conditionThreshold: { filter: string } }>)[0]!.conditionThreshold
          .filter;

      expect(metric.inputs.filter).toContain(
        'jsonPayload.component = "reconcile" AND jsonPayload.missing > 0',
      );
      expect(filterOf(missing)).toContain(`logging.googleapis.com/user/${metric.outputs.name}`);
      expect(filterOf(failed)).toContain('metric.type = "run.googleapis.com/job/completed_execution_count"');
      expect(filterOf(failed)).toContain('metric.labels.result = "failed"');
    });
  });

  describe('the dashboard', () => {
    const metricsIn = (json: string): string[] => {
      const found = new Set<string>();
      for (const match of json.matchAll(/metric\.type = \\"([^\\"]+)\\"/g)) found.add(match[1]!);
      // PromQL names the metric in its own spelling; map it back to the Cloud Monitoring name.
      for (const match of json.matchAll(/(logging_googleapis_com:user_\w+?)_sum\{/g)) found.add(match[1]!);
      return [...found];
    };

    it('charts what the issue lists, each chart titled', () => {
      const json = JSON.parse(String(one(run, T.dashboard).inputs.dashboardJson)) as {
        mosaicLayout: { tiles: Array<{ widget: { title: string } }> };
      };

      expect(json.mosaicLayout.tiles.map((t) => t.widget.title)).toEqual([
        'Answers per minute by status',
        'Duplicate share of answers',
        'Dead letters waiting',
        'Oldest unacked message (s)',
        'Worker latency p50 / p99 (ms)',
        'Gemini tokens per hour',
        'BigQuery bytes billed by the worker (app=docline) per hour',
      ]);
    });

    it('charts only metrics the stack creates or documented built-ins, and every one of them', () => {
      const json = String(one(run, T.dashboard).inputs.dashboardJson);
      const stackMetrics = ofType(run, T.metric).map((m) => `logging.googleapis.com/user/${m.outputs.name}`);
      const fromPromql = new Map(stackMetrics.map((m) => [promqlMetricName(m), m]));
      const charted = metricsIn(JSON.stringify(JSON.parse(json))).map((m) => fromPromql.get(m) ?? m);

      const known = [...stackMetrics, ...BUILT_IN_METRICS];
      expect(charted.filter((metric) => !known.includes(metric))).toEqual([]);
      expect(charted).toEqual(expect.arrayContaining([...BUILT_IN_METRICS]));
      const chartedUser = charted.filter((m) => m.startsWith('logging.googleapis.com/user/'));
      // The reconcile and operations metrics feed alerts only.
      expect(chartedUser.sort()).toEqual(
        stackMetrics.filter((m) => !m.includes('reconcile') && !m.includes('-operations-')).sort(),
      );
    });

    it('is exported as a console URL', () => {
      expect(run.outputs.dashboardUrl).toMatch(
        /^https:\/\/console\.cloud\.google\.com\/monitoring\/dashboards\/builder\/.+\?project=/,
      );
    });

    it('charts the worker\u2019s billed bytes from the BigQuery audit log of jobs labelled app=docline', () => {
      const bytes = one(run, T.metric, '-bytes-billed');
      expect(bytes.inputs.filter).toContain(
        'protoPayload.metadata.jobChange.job.jobConfig.labels.app = "docline"',
      );
      expect(bytes.inputs.valueExtractor).toBe(
        'EXTRACT(protoPayload.metadata.jobChange.job.jobStats.queryStats.totalBilledBytes)',
      );
    });
  });
});

describe('the reconcile modes', () => {
  it('grants publish on the uploads topic, and tells the entry point to apply, in apply mode only', async () => {
    const containerOf = (run: ProgramRun) =>
      (
        one(run, T.job).inputs.template as {
          template: { containers: Array<{ args: string[]; envs: Array<{ name: string; value: string }> }> };
        }
      ).template.containers[0]!;
    const envOf = (run: ProgramRun) =>
      Object.fromEntries(containerOf(run).envs.map((e) => [e.name, e.value]));
    const run = await runStack('dev', { 'docline:reconcileMode': 'apply' });

    // The entry point (worker/src/reconcile/main.ts) reads these names; a mismatch would apply nothing.
    expect(containerOf(run).args).toEqual(reconcileArgs());
    expect(envOf(run)).toMatchObject({ RECONCILE_MODE: 'apply', MAXIMUM_BYTES_BILLED: '100000000' });
    expect(Object.keys(envOf(run))).toEqual(
      expect.arrayContaining([...CLOUD_VARIABLES, 'BIGQUERY_LOCATION', 'DEDUP_KEY']),
    );
    const report = await runStack('dev');
    expect(envOf(report).RECONCILE_MODE).toBe('report');
    expect(one(run, T.topicIam, '-reconcile-publisher').inputs).toMatchObject({
      topic: one(run, T.topic, '-uploads').outputs.name,
      role: 'roles/pubsub.publisher',
      member: expect.stringContaining('docline-dev-reconcile@'),
    });
  });

  it('declares no job, no scheduler, no account and no alert when off', async () => {
    const run = await runStack('dev', { 'docline:reconcileMode': 'off' });

    expect(run.resources.filter((r) => r.name.includes('-reconcile'))).toEqual([]);
    expect(ofType(run, T.scheduler)).toEqual([]);
    expect(run.outputs.reconcileJobName).toBeUndefined();
  });

  it('refuses apply mode with message keys before declaring anything', async () => {
    await expect(
      runStack('dev', { 'docline:reconcileMode': 'apply', 'docline:dedupKeyMode': 'message' }),
    ).rejects.toThrow(/reconcileMode apply needs dedupKeyMode object/);
  });
});
