import { bigQuerySchema, CLUSTER_COLUMNS, PARTITION_COLUMN } from '../../worker/src/contract/row';
import { DELIVERY_DEFAULTS, SETTINGS, type SettingDeclaration } from '../../worker/src/contract/settings';
import { VIEW_NAMES, viewSql } from '../../worker/src/contract/views';
import { REQUIRED_APIS } from '../components/foundation';
import { TABLE_ID } from '../components/warehouse';
import { DUPLICATE_RATE_PER_MILLE } from '../fixed';
import {
  type CapturedResource,
  MOCK_PROJECT_NUMBER,
  MOCK_STORAGE_AGENT,
  ofType,
  one,
  type ProgramRun,
  runStack,
  stackConfig,
  T,
  UNKNOWN,
} from './harness';

const PUBSUB_AGENT = `serviceAccount:service-${MOCK_PROJECT_NUMBER}@gcp-sa-pubsub.iam.gserviceaccount.com`;
const TRANSFER_AGENT = `serviceAccount:service-${MOCK_PROJECT_NUMBER}@gcp-sa-bigquerydatatransfer.iam.gserviceaccount.com`;

/** Every IAM grant of the run as `role → member @ resource type`, for whole-set assertions. */
function grants(run: ProgramRun): string[] {
  const iamTypes = [
    T.topicIam,
    T.subscriptionIam,
    T.accountIam,
    T.projectIam,
    T.bucketIam,
    T.datasetIam,
    T.runIam,
    T.jobIam,
  ];
  return run.resources
    .filter((r) => iamTypes.includes(r.type))
    .map((r) => `${r.inputs.role} → ${r.inputs.member} @ ${r.type.replace(/^gcp:/, '')}`)
    .sort();
}

function env(service: CapturedResource): Record<string, string> {
  const template = service.inputs.template as {
    containers: Array<{ envs: Array<{ name: string; value: string }> }>;
  };
  return Object.fromEntries(template.containers[0]!.envs.map((e) => [e.name, e.value]));
}

interface ThresholdCondition {
  filter: string;
  comparison: string;
  thresholdValue: number;
  denominatorFilter?: string;
}

/** The threshold condition of a one-condition alert policy. */
function thresholdOf(policy: CapturedResource): ThresholdCondition {
  return (policy.inputs.conditions as Array<{ conditionThreshold: ThresholdCondition }>)[0]!
    .conditionThreshold;
}

function isView(table: CapturedResource): boolean {
  return table.inputs.view !== undefined;
}

describe('the docline program with the dev stack file', () => {
  let run: ProgramRun;
  const dev = stackConfig('dev');
  const project = dev['gcp:project']!;

  beforeAll(async () => {
    run = await runStack('dev');
  });

  describe('document bucket', () => {
    it('declares one bucket with uniform access and public access prevention enforced', () => {
      const bucket = one(run, T.bucket, '-documents-bucket');

      expect(bucket.inputs).toMatchObject({
        uniformBucketLevelAccess: true,
        publicAccessPrevention: 'enforced',
        location: 'EU',
        forceDestroy: true, // dev: deletionProtection false
      });
      // The label the policy pack tells the one bucket that may feed the pipeline by.
      expect(bucket.inputs.labels).toEqual({ 'docline-role': 'documents' });
    });

    it('declares exactly one notification: OBJECT_FINALIZE only, JSON_API_V1, to the uploads topic', () => {
      const notification = one(run, T.notification);
      const bucket = one(run, T.bucket, '-documents-bucket');
      const topic = one(run, T.topic, '-uploads');

      expect(ofType(run, T.notification)).toHaveLength(1);
      expect(notification.inputs).toEqual({
        bucket: bucket.outputs.name,
        topic: topic.outputs.id,
        payloadFormat: 'JSON_API_V1',
        eventTypes: ['OBJECT_FINALIZE'],
      });
      expect(notification.propertyDependencies.bucket).toEqual([bucket.urn]);
    });

    it('grants the Cloud Storage service agent publisher on that topic, and the notification waits for the grant', () => {
      const grant = one(run, T.topicIam, '-storage-publisher');
      const topic = one(run, T.topic, '-uploads');

      expect(grant.inputs).toMatchObject({
        topic: topic.outputs.name,
        role: 'roles/pubsub.publisher',
        member: `serviceAccount:${MOCK_STORAGE_AGENT}`,
      });
      expect(one(run, T.notification).dependencies).toContain(grant.urn);
    });
  });

  describe('delivery', () => {
    it('pushes to the worker with an OIDC token for the push account and the service audience', () => {
      const push = one(run, T.subscription, '-push');
      const service = one(run, T.run);
      const pushAccount = one(run, T.account, '-push');

      expect(push.inputs.pushConfig).toEqual({
        pushEndpoint: `${service.outputs.uri}/push`,
        oidcToken: {
          serviceAccountEmail: pushAccount.outputs.email,
          audience: (service.inputs.customAudiences as string[])[0],
        },
      });
      expect(env(service).PUSH_AUTH_AUDIENCE).toBe((service.inputs.customAudiences as string[])[0]);
      expect(env(service).PUSH_AUTH_SERVICE_ACCOUNT).toBe(pushAccount.outputs.email);
    });

    it('sets the ack deadline, retry policy, dead-letter policy, retention and the FINALIZE filter from the settings', () => {
      const push = one(run, T.subscription, '-push');
      const deadLetterTopic = one(run, T.topic, '-dead-letters');

      expect(push.inputs).toMatchObject({
        topic: one(run, T.topic, '-uploads').outputs.id,
        ackDeadlineSeconds: DELIVERY_DEFAULTS.ackDeadlineSeconds,
        retryPolicy: { minimumBackoff: '10s', maximumBackoff: '600s' },
        deadLetterPolicy: { deadLetterTopic: deadLetterTopic.outputs.id, maxDeliveryAttempts: 100 },
        messageRetentionDuration: '604800s',
        filter: 'attributes.eventType = "OBJECT_FINALIZE"',
        expirationPolicy: { ttl: '' },
      });
    });

    it('keeps dead letters in a pull subscription that never expires, for no longer than the redelivery window covers', () => {
      const deadLetters = one(run, T.subscription, '-dead-letters');

      expect(deadLetters.inputs).toMatchObject({
        topic: one(run, T.topic, '-dead-letters').outputs.id,
        expirationPolicy: { ttl: '' },
        retainAckedMessages: true,
        messageRetentionDuration: '604800s',
      });
      expect(one(run, T.topic, '-dead-letters').inputs.messageRetentionDuration).toBe('604800s');
      expect(DELIVERY_DEFAULTS.redeliveryWindowDays * 86400).toBeGreaterThan(
        DELIVERY_DEFAULTS.messageRetentionSeconds + DELIVERY_DEFAULTS.deadLetterRetentionSeconds,
      );
      expect(deadLetters.inputs.pushConfig).toBeUndefined();
    });

    it('gives every topic a subscription', () => {
      const subscribed = ofType(run, T.subscription).map((s) => s.inputs.topic);

      for (const topic of ofType(run, T.topic)) expect(subscribed).toContain(topic.outputs.id);
    });
  });

  describe('warehouse', () => {
    it('generates the table schema from the row contract, partitioned by day and clustered on the lookup key first', () => {
      const table = ofType(run, T.table).filter((t) => !isView(t) && t.inputs.tableId !== 'corrections');

      expect(table).toHaveLength(1);
      expect(JSON.parse(table[0]!.inputs.schema as string)).toEqual(bigQuerySchema());
      expect(table[0]!.inputs).toMatchObject({
        tableId: TABLE_ID,
        datasetId: 'docline_dev',
        timePartitioning: { type: 'DAY', field: PARTITION_COLUMN },
        clusterings: [...CLUSTER_COLUMNS],
        deletionProtection: false,
      });
      expect(CLUSTER_COLUMNS.slice(0, 2)).toEqual(['dedup_key', 'message_id']);
    });

    it('declares the four views with the SQL the worker ships, after the table exists', () => {
      const table = ofType(run, T.table).find((t) => !isView(t))!;
      const views = ofType(run, T.table).filter(isView);

      expect(views.map((v) => v.inputs.tableId).sort()).toEqual([...VIEW_NAMES].sort());
      for (const view of views) {
        expect(view.inputs.view).toEqual({
          query: viewSql(
            'googlesql',
            view.inputs.tableId as (typeof VIEW_NAMES)[number],
            `${project}.docline_dev.${TABLE_ID}`,
          ),
          useLegacySql: false,
        });
        expect(view.dependencies).toContain(table.urn);
      }
    });
  });

  describe('worker service', () => {
    it('runs the configured image as its own service account, with the timeout below the ack deadline', () => {
      const service = one(run, T.run);
      const template = service.inputs.template as Record<string, unknown>;

      expect(template).toMatchObject({
        serviceAccount: one(run, T.account, '-worker-runtime').outputs.email,
        timeout: `${DELIVERY_DEFAULTS.workerTimeoutSeconds}s`,
        maxInstanceRequestConcurrency: SETTINGS.concurrency.default,
        scaling: { minInstanceCount: 0, maxInstanceCount: 3 },
      });
      // No docline:image in the dev stack: the image the stack built and pushed, by digest.
      expect((template.containers as Array<{ image: string }>)[0]!.image).toBe(one(run, T.image).outputs.ref);
      expect(
        DELIVERY_DEFAULTS.workerTimeoutSeconds + DELIVERY_DEFAULTS.ackDeadlineMarginSeconds,
      ).toBeLessThanOrEqual(one(run, T.subscription, '-push').inputs.ackDeadlineSeconds as number);
    });

    it('gives its startup probe time for a cold BigQuery read: never Cloud Run’s 1 s default', () => {
      const probe = (
        one(run, T.run).inputs.template as { containers: Array<{ startupProbe: Record<string, number> }> }
      ).containers[0]!.startupProbe;
      expect(probe).toMatchObject({ httpGet: { path: '/healthz' } });
      // Unset, Cloud Run times an attempt out after 1 s (the provider's default).
      expect(probe.timeoutSeconds).toBeGreaterThanOrEqual(5);
      expect(probe.timeoutSeconds).toBeLessThanOrEqual(probe.periodSeconds!);
      // Cloud Run allows a startup probe failureThreshold × periodSeconds of 240 s at most.
      expect(probe.failureThreshold! * probe.periodSeconds!).toBeLessThanOrEqual(240);
      expect(probe.failureThreshold! * probe.periodSeconds!).toBeGreaterThanOrEqual(120);
    });

    it('derives the worker environment from the stack', () => {
      // Every setting the stack has a value for, in its variable (at its default unless said below).
      const settings = Object.fromEntries(
        Object.values(SETTINGS as Record<string, SettingDeclaration>).flatMap((s) =>
          s.env !== undefined && s.stack !== undefined ? [[s.env, [s.default].flat().join(',')]] : [],
        ),
      );
      expect(env(one(run, T.run))).toEqual({
        ...settings,
        DOCLINE_READER: 'gcs',
        DOCLINE_ANALYZER: 'gemini',
        GOOGLE_CLOUD_PROJECT: project,
        // Next to the data (EU), not `global`.
        GOOGLE_CLOUD_LOCATION: 'europe-west1',
        BIGQUERY_TABLE: `${project}.docline_dev.${TABLE_ID}`,
        BIGQUERY_LOCATION: 'EU',
        MEMO_BUCKET: `docline-dev-memo-${project}`,
        // Derived from Pulumi.dev.yaml's 3 instances: 3 × 10 s / 20 statements.
        MERGE_MIN_INTERVAL_MS: '1500',
        LOG_LEVEL: 'DEBUG',
        PUSH_AUTH_AUDIENCE: 'https://docline-dev.docline.invalid/push',
        PUSH_AUTH_SERVICE_ACCOUNT: `docline-dev-push@${project}.iam.gserviceaccount.com`,
      });
      // As the worker reads them: the contract's values, the window derived from the two retentions.
      expect(env(one(run, T.run))).toMatchObject({
        GEMINI_MODEL: 'gemini-3.5-flash-lite',
        DEDUP_KEY: 'object',
        REDELIVERY_WINDOW_DAYS: '15',
        MAXIMUM_BYTES_BILLED: '100000000',
        REQUEST_TIMEOUT_SECONDS: String(DELIVERY_DEFAULTS.workerTimeoutSeconds),
        MAX_OBJECT_BYTES: String(20 * 1024 * 1024),
        ALLOWED_CONTENT_TYPES:
          'application/pdf,image/png,image/jpeg,image/webp,text/plain,application/xml,text/xml',
      });
      // The worker's own settings (read and analysis timeouts, push body limit, batch size and
      // wait) have no stack key: the worker's defaults rule, the stack passes nothing.
      expect(env(one(run, T.run)).BATCH_MAX_ROWS).toBeUndefined();
    });

    it('is not publicly invokable: the push account is its only invoker, on this service only', () => {
      const invokers = ofType(run, T.runIam);

      expect(invokers).toHaveLength(1);
      expect(invokers[0]!.inputs).toMatchObject({
        name: one(run, T.run).outputs.name,
        role: 'roles/run.invoker',
        member: one(run, T.account, '-push').outputs.member,
      });
      expect(one(run, T.run).inputs.invokerIamDisabled).toBe(false);
    });
  });

  describe('IAM', () => {
    it('grants exactly these roles, each on the narrowest resource', () => {
      const worker = `serviceAccount:docline-dev-worker@${project}.iam.gserviceaccount.com`;
      const push = `serviceAccount:docline-dev-push@${project}.iam.gserviceaccount.com`;
      const checker = `serviceAccount:docline-dev-dupcheck@${project}.iam.gserviceaccount.com`;
      const reconciler = `serviceAccount:docline-dev-reconcile@${project}.iam.gserviceaccount.com`;
      const scheduler = `serviceAccount:docline-dev-scheduler@${project}.iam.gserviceaccount.com`;

      expect(grants(run)).toEqual(
        [
          `roles/aiplatform.user → ${worker} @ projects/iAMMember:IAMMember`,
          `roles/bigquery.dataEditor → ${worker} @ bigquery/datasetIamMember:DatasetIamMember`,
          `roles/bigquery.dataViewer → ${checker} @ bigquery/datasetIamMember:DatasetIamMember`,
          `roles/bigquery.jobUser → ${checker} @ projects/iAMMember:IAMMember`,
          `roles/bigquery.jobUser → ${worker} @ projects/iAMMember:IAMMember`,
          `roles/iam.serviceAccountTokenCreator → ${PUBSUB_AGENT} @ serviceaccount/iAMMember:IAMMember`,
          // The BigQuery Data Transfer agent mints the duplicate check's token: on that account only.
          `roles/iam.serviceAccountTokenCreator → ${TRANSFER_AGENT} @ serviceaccount/iAMMember:IAMMember`,
          `roles/pubsub.publisher → ${PUBSUB_AGENT} @ pubsub/topicIAMMember:TopicIAMMember`,
          `roles/pubsub.publisher → serviceAccount:${MOCK_STORAGE_AGENT} @ pubsub/topicIAMMember:TopicIAMMember`,
          `roles/pubsub.subscriber → ${PUBSUB_AGENT} @ pubsub/subscriptionIAMMember:SubscriptionIAMMember`,
          `roles/run.invoker → ${push} @ cloudrunv2/serviceIamMember:ServiceIamMember`,
          `roles/storage.objectViewer → ${worker} @ storage/bucketIAMMember:BucketIAMMember`,
          // The memo: create and read; overwrite (delete) its lease objects only (see below).
          `roles/storage.objectCreator → ${worker} @ storage/bucketIAMMember:BucketIAMMember`,
          `roles/storage.objectViewer → ${worker} @ storage/bucketIAMMember:BucketIAMMember`,
          `roles/storage.objectUser → ${worker} @ storage/bucketIAMMember:BucketIAMMember`,
          // Reconcile (report mode: no publisher grant) and the scheduler that may only run its job.
          `roles/storage.objectViewer → ${reconciler} @ storage/bucketIAMMember:BucketIAMMember`,
          `roles/bigquery.dataViewer → ${reconciler} @ bigquery/datasetIamMember:DatasetIamMember`,
          `roles/bigquery.jobUser → ${reconciler} @ projects/iAMMember:IAMMember`,
          `roles/run.invoker → ${scheduler} @ cloudrunv2/jobIamMember:JobIamMember`,
        ].sort(),
      );
    });

    it('puts each grant on its resource: the bucket, the dataset, the dead-letter topic, the push subscription and account', () => {
      for (const [grantType, grant, key, type, name] of [
        [T.bucketIam, '-worker-object-viewer', 'bucket', T.bucket, '-documents-bucket'],
        [T.bucketIam, '-memo-creator', 'bucket', T.bucket, '-memo-bucket'],
        [T.bucketIam, '-memo-viewer', 'bucket', T.bucket, '-memo-bucket'],
        [T.topicIam, '-dead-letter-publisher', 'topic', T.topic, '-dead-letters'],
        [T.subscriptionIam, '', 'subscription', T.subscription, '-push'],
        [T.accountIam, '-push-token-creator', 'serviceAccountId', T.account, '-push'],
        [T.accountIam, '-dupcheck-token-creator', 'serviceAccountId', T.account, '-dupcheck'],
      ] as const) {
        expect([grant, one(run, grantType, grant).inputs[key]]).toEqual([
          grant,
          one(run, type, name).outputs.name,
        ]);
      }
      // Overwriting (a lease's compare-and-swap) is granted on the lease objects alone: an IAM
      // condition on the `leases/` prefix, so no kept analysis can be overwritten or deleted.
      const leases = one(run, T.bucketIam, '-memo-leases');
      const memoBucket = one(run, T.bucket, '-memo-bucket').outputs.name;
      expect(leases.inputs.bucket).toBe(memoBucket);
      expect(leases.inputs.condition).toMatchObject({
        expression: `resource.name.startsWith("projects/_/buckets/${memoBucket}/objects/leases/")`,
      });
      expect(one(run, T.datasetIam, '-data-editor').inputs.datasetId).toBe('docline_dev');
      expect(one(run, T.datasetIam, '-dupcheck-data-viewer').inputs.datasetId).toBe('docline_dev');
    });
  });

  describe('alerts', () => {
    it('alerts when dead letters accumulate and when the oldest unacked message gets old', () => {
      const deadLetters = one(run, T.alert, '-dead-letters');
      const age = one(run, T.alert, '-backlog-age');

      expect(thresholdOf(deadLetters)).toMatchObject({
        comparison: 'COMPARISON_GT',
        thresholdValue: 0,
        filter: expect.stringContaining(
          `subscription_id = "${one(run, T.subscription, '-dead-letters').outputs.name}" AND metric.type = "pubsub.googleapis.com/subscription/num_undelivered_messages"`,
        ),
      });
      expect(thresholdOf(age)).toMatchObject({
        comparison: 'COMPARISON_GT',
        thresholdValue: 1800,
        filter: expect.stringContaining(
          `subscription_id = "${one(run, T.subscription, '-push').outputs.name}" AND metric.type = "pubsub.googleapis.com/subscription/oldest_unacked_message_age"`,
        ),
      });
    });

    it('counts duplicate answers and all answers from the worker logs and alerts on their ratio', () => {
      const service = one(run, T.run).outputs.name;
      const duplicates = one(run, T.metric, '-duplicate-answers');
      const all = one(run, T.metric, '-all-answers');
      const condition = thresholdOf(one(run, T.alert, '-duplicate-rate'));

      expect(duplicates.inputs.filter).toBe(
        // The deploy canary (docline-canary/) is left out of the duplicate share, never out of the answers.
        `resource.type = "cloud_run_revision" AND resource.labels.service_name = "${service}" AND jsonPayload.status = "duplicate" AND NOT jsonPayload.objectUri =~ "^gs://[^/]+/docline-canary/"`,
      );
      expect(all.inputs.filter).not.toContain('docline-canary');
      expect(all.inputs.filter).toContain('jsonPayload.status = ("ok" OR "rejected" OR "duplicate")');
      expect(condition.filter).toContain(`logging.googleapis.com/user/${duplicates.outputs.name}`);
      expect(condition.denominatorFilter).toContain(`logging.googleapis.com/user/${all.outputs.name}`);
      expect(condition.thresholdValue).toBe(DUPLICATE_RATE_PER_MILLE / 1000);
    });

    it("checks for duplicate objects hourly, on the redelivery window's partitions only, with a scheduled query whose failures raise an alert", () => {
      const check = one(run, T.transfer);
      const params = check.inputs.params as { query: string };

      expect(check.inputs).toMatchObject({
        dataSourceId: 'scheduled_query',
        schedule: 'every 1 hours',
        serviceAccountName: `docline-dev-dupcheck@${project}.iam.gserviceaccount.com`,
      });
      expect(params.query).toContain(`FROM \`${project}.docline_dev.${TABLE_ID}\``);
      expect(params.query).toContain(
        `WHERE key_day >= DATE_SUB(CURRENT_DATE(), INTERVAL ${DELIVERY_DEFAULTS.redeliveryWindowDays} DAY)`,
      );
      expect(params.query).toContain('ERROR(');
      const alert = one(run, T.alert, '-duplicate-objects');
      const conditions = alert.inputs.conditions as Array<{ conditionMatchedLog: { filter: string } }>;
      const configId = String(check.outputs.name).split('/').pop();
      expect(conditions[0]!.conditionMatchedLog.filter).toBe(
        `resource.type = "bigquery_dts_config" AND resource.labels.config_id = "${configId}" AND severity >= ERROR`,
      );
    });

    it("alerts while a dependency is out or refuses the worker, on the worker's own ERROR lines", () => {
      const alert = one(run, T.alert, '-dependency-outage');
      const conditions = alert.inputs.conditions as Array<{ conditionMatchedLog: { filter: string } }>;
      const filter = conditions[0]!.conditionMatchedLog.filter;
      expect(filter).toContain('resource.type = "cloud_run_revision"');
      expect(filter).toContain(
        'severity >= ERROR AND (jsonPayload.outage:* OR jsonPayload.error = ("dependency_refused" OR "configuration"))',
      );
      expect(alert.inputs.alertStrategy).toMatchObject({ notificationRateLimit: { period: '300s' } });
    });
  });

  describe('project', () => {
    it('enables the required APIs and never disables them on destroy', () => {
      const services = ofType(run, T.api);

      expect(services.map((s) => s.inputs.service).sort()).toEqual([...REQUIRED_APIS].sort());
      for (const s of services) expect(s.inputs.disableOnDestroy).toBe(false);
    });

    it('makes every Google resource wait for the APIs', () => {
      const apis = ofType(run, T.api).map((s) => s.urn);
      const others = run.resources.filter((r) => r.custom && r.type !== T.api);
      const waitsForApis = (r: CapturedResource, seen: Set<string>): boolean =>
        r.dependencies.some((d) => apis.includes(d)) ||
        r.dependencies.some((d) => {
          const dep = run.resources.find((x) => x.urn === d);
          return dep !== undefined && !seen.has(d) && waitsForApis(dep, seen.add(d));
        });

      expect(others.filter((r) => !waitsForApis(r, new Set())).map((r) => r.name)).toEqual([]);
    });

    it('builds every component with a docline type token and parents every resource under one', () => {
      const components = run.resources.filter((r) => !r.custom);
      const componentUrns = components.map((c) => c.urn);

      expect(components.map((c) => c.type).sort()).toEqual([
        'docline:index:Alerts',
        'docline:index:Dashboard',
        'docline:index:Delivery',
        'docline:index:DocumentBucket',
        'docline:index:Foundation',
        'docline:index:MemoBucket',
        'docline:index:OperationsAlerts',
        'docline:index:Reconcile',
        'docline:index:RegionalLogs',
        'docline:index:Warehouse',
        'docline:index:WorkerImage',
        'docline:index:WorkerService',
      ]);
      for (const resource of run.resources.filter((r) => r.custom)) {
        expect(componentUrns).toContain(resource.parent);
        const parentName = components.find((c) => c.urn === resource.parent)!.name;
        expect(resource.name.startsWith(parentName)).toBe(true);
      }
    });

    it('exports the bucket, topics, subscriptions, table and views, worker URL, service accounts, image and dashboard', () => {
      expect(run.outputs).toEqual({
        imageRepository: `europe-west1-docker.pkg.dev/${project}/docline-dev`,
        image: one(run, T.image).outputs.ref,
        bucketName: one(run, T.bucket, '-documents-bucket').outputs.name,
        memoBucketName: `docline-dev-memo-${project}`,
        topicName: one(run, T.topic, '-uploads').outputs.name,
        subscriptionName: one(run, T.subscription, '-push').outputs.name,
        deadLetterTopicName: one(run, T.topic, '-dead-letters').outputs.name,
        deadLetterSubscriptionName: one(run, T.subscription, '-dead-letters').outputs.name,
        tableId: `${project}.docline_dev.${TABLE_ID}`,
        viewIds: {
          documents: `${project}.docline_dev.documents`,
          duplicate_objects: `${project}.docline_dev.duplicate_objects`,
          delivery_stats: `${project}.docline_dev.delivery_stats`,
          duplicate_invoices: `${project}.docline_dev.duplicate_invoices`,
        },
        workerUrl: one(run, T.run).outputs.uri,
        workerServiceName: one(run, T.run).outputs.name,
        logBucket: one(run, T.logBucket).outputs.name,
        workerServiceAccount: `docline-dev-worker@${project}.iam.gserviceaccount.com`,
        pushServiceAccount: `docline-dev-push@${project}.iam.gserviceaccount.com`,
        dashboardUrl: `https://console.cloud.google.com/monitoring/dashboards/builder/docline-dev-dashboard-dashboard-0123abc?project=${project}`,
        reconcileJobName: one(run, T.job).outputs.name,
        deployedSettings: { dedupKeyMode: 'object', region: 'europe-west1', dataLocation: 'EU' },
        deployedRetention: { messageRetentionSeconds: 604800, deadLetterRetentionSeconds: 604800 },
        documentRetention: { years: 0, locked: false },
        tableVersion: 1,
      });
    });
  });
});

describe('the docline program with the prod stack file', () => {
  let run: ProgramRun;

  beforeAll(async () => {
    run = await runStack('prod');
  });

  it('has BigQuery refuse to delete the table (lifecycle.test proves the rest of what destroy keeps)', () => {
    expect(ofType(run, T.table).find((t) => !isView(t))!.inputs.deletionProtection).toBe(true);
  });

  it('takes delivery and scaling settings from the stack file', () => {
    const push = one(run, T.subscription, '-push');
    const template = one(run, T.run).inputs.template as Record<string, unknown>;

    expect(push.inputs).toMatchObject({
      // Derived: workerTimeoutSeconds 560 + the 10 s margin.
      ackDeadlineSeconds: 570,
      deadLetterPolicy: { maxDeliveryAttempts: 100 },
    });
    expect(template).toMatchObject({
      timeout: '560s',
      maxInstanceRequestConcurrency: 500,
      scaling: { minInstanceCount: 1, maxInstanceCount: 20 },
    });
  });

  it('names everything after the stack and notifies the configured channel', () => {
    expect(one(run, T.dataset).inputs.datasetId).toBe('docline_prod');
    expect(one(run, T.account, '-worker-runtime').inputs.accountId).toBe('docline-prod-worker');
    for (const policy of ofType(run, T.alert)) {
      expect(policy.inputs.notificationChannels).toEqual([
        'projects/docline-prod-example/notificationChannels/1234567890',
      ]);
    }
  });
});

describe('the docline program with other settings', () => {
  it('passes message mode on, and always has the push token verified in the app too', async () => {
    const run = await runStack('dev', { 'docline:dedupKeyMode': 'message' });
    const variables = env(one(run, T.run));

    expect(variables.PUSH_AUTH_AUDIENCE).toBe('https://docline-dev.docline.invalid/push');
    expect(variables.DEDUP_KEY).toBe('message');
    expect(one(run, T.subscription, '-push').inputs.pushConfig).toMatchObject({
      oidcToken: expect.any(Object),
    });
  });

  it('runs a configured image as it is, and builds nothing', async () => {
    const image = `europe-west1-docker.pkg.dev/elsewhere/ci/worker@sha256:${'1'.repeat(64)}`;
    const run = await runStack('dev', { 'docline:image': image });
    const template = one(run, T.run).inputs.template as { containers: Array<{ image: string }> };
    const job = one(run, T.job).inputs.template as { template: { containers: Array<{ image: string }> } };

    expect(ofType(run, T.image)).toEqual([]);
    expect(template.containers[0]!.image).toBe(image);
    expect(job.template.containers[0]!.image).toBe(image);
  });

  it('fails before declaring anything when the config is invalid, listing every problem', async () => {
    const attempt = runStack('dev', {
      'docline:workerTimeoutSeconds': '600',
      'docline:maxDeliveryAttempts': '3',
      'docline:maximumBytesBilled': '1000',
      'docline:dedupKeyMode': 'hash',
    });

    await expect(attempt).rejects.toThrow(/docline configuration is invalid \(4 problems\)/);
    await expect(attempt).rejects.toThrow(/workerTimeoutSeconds \(600\) must be at most 590: .*derived/);
    await expect(attempt).rejects.toThrow(
      /maxDeliveryAttempts is not a setting: .* Remove docline:maxDeliveryAttempts from the stack file\./,
    );
    await expect(attempt).rejects.toThrow(/maximumBytesBilled must be a whole number from 10485760/);
    await expect(attempt).rejects.toThrow(/dedupKeyMode must be one of object, message \(got hash\)/);
  });
});

describe('the docline program in preview', () => {
  let run: ProgramRun;

  beforeAll(async () => {
    run = await runStack('dev', {}, { preview: true });
  });

  it('completes with every resource registered, as in an update', async () => {
    const update = await runStack('dev');

    expect(run.preview).toBe(true);
    expect(run.resources.map((r) => `${r.type}::${r.name}`).sort()).toEqual(
      update.resources.map((r) => `${r.type}::${r.name}`).sort(),
    );
  });

  it('leaves computed outputs unknown, but keeps the notification tied to its bucket resource', () => {
    const notification = one(run, T.notification);

    expect(notification.inputs.bucket).toBeUndefined();
    expect(notification.rawInputs.bucket).toBe(UNKNOWN);
    expect(notification.propertyDependencies.bucket).toEqual([one(run, T.bucket, '-documents-bucket').urn]);
  });

  it('knows the values the policies check: timeouts, retry, dead-lettering, partitioning, view SQL and the environment', () => {
    const push = one(run, T.subscription, '-push');
    const template = one(run, T.run).inputs.template as Record<string, unknown>;

    expect(push.inputs).toMatchObject({
      ackDeadlineSeconds: DELIVERY_DEFAULTS.ackDeadlineSeconds,
      retryPolicy: { minimumBackoff: '10s', maximumBackoff: '600s' },
      deadLetterPolicy: { maxDeliveryAttempts: 100 },
    });
    expect(template.timeout).toBe(`${DELIVERY_DEFAULTS.workerTimeoutSeconds}s`);
    expect(env(one(run, T.run)).BIGQUERY_TABLE).toBe(`docline-dev-example.docline_dev.${TABLE_ID}`);
    for (const view of ofType(run, T.table).filter(isView)) {
      expect((view.inputs.view as { query: string }).query).toContain(
        `\`docline-dev-example.docline_dev.${TABLE_ID}\``,
      );
    }
  });
});
