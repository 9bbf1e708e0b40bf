import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';
import type { DeliverySettings } from '../../worker/src/contract/settings';
import type { StackConfig } from '../config';
import { DoclineComponent } from './component';

/** The container port; Cloud Run passes it to the worker as PORT. */
const CONTAINER_PORT = 8080;

/** Arguments of {@link WorkerService}. */
export interface WorkerServiceArgs {
  /**
   * The stack's validated configuration, whole: project, region (Cloud Run), data and Gemini
   * locations, deletion protection, the delivery settings the worker must agree with (timeouts,
   * dedup, byte caps, model) and the worker's own (scaling, CPU, memory, log level, content types,
   * in-app token check). `prefix` starts the service account ids (ids are limited to 30 characters).
   */
  config: Pick<
    StackConfig,
    | 'project'
    | 'prefix'
    | 'region'
    | 'dataLocation'
    | 'geminiLocation'
    | 'deletionProtection'
    | 'delivery'
    | 'worker'
  >;
  /** Container image reference (built from worker/Dockerfile). */
  image: pulumi.Input<string>;
  /** The upload bucket: the worker may read its objects, nothing else. */
  bucketName: pulumi.Input<string>;
  /** The memo bucket: the worker may create and read entries there, never delete or overwrite them. */
  memoBucketName: pulumi.Input<string>;
  /** The dataset the worker may write to. */
  datasetId: pulumi.Input<string>;
  /** `project.dataset.table` (BIGQUERY_TABLE). */
  tableRef: pulumi.Input<string>;
  /** The audience push tokens carry; added to the service's custom audiences. */
  pushAudience: pulumi.Input<string>;
}

/**
 * The worker's environment, in the names worker/src/config.ts reads. PORT and K_REVISION come from
 * Cloud Run; WORKER_VERSION is left unset so that rows carry the revision that wrote them.
 */
export function workerEnvironment(input: {
  project: string;
  tableRef: string;
  memoBucket: string;
  dataLocation: string;
  geminiLocation: string;
  settings: DeliverySettings;
  allowedContentTypes: readonly string[];
  logLevel: string;
  pushAuth?: { audience: string; serviceAccountEmail: string };
}): Record<string, string> {
  const s = input.settings;
  return {
    DOCLINE_READER: 'gcs',
    DOCLINE_ANALYZER: 'gemini',
    GOOGLE_CLOUD_PROJECT: input.project,
    GOOGLE_CLOUD_LOCATION: input.geminiLocation,
    GEMINI_MODEL: s.geminiModel,
    BIGQUERY_TABLE: input.tableRef,
    BIGQUERY_LOCATION: input.dataLocation,
    MEMO_BUCKET: input.memoBucket,
    DEDUP_KEY: s.dedupKeyMode,
    WRITE_MODE: s.writeMode,
    DEDUP_WINDOW_DAYS: String(s.dedupWindowDays),
    MAXIMUM_BYTES_BILLED: String(s.maximumBytesBilled),
    ANALYZER_TIMEOUT_MS: String(s.analyzerTimeoutMs),
    ANALYZER_QUOTA_WAIT_MS: String(s.analyzerQuotaWaitMs),
    ANALYZER_MAX_IN_FLIGHT: String(s.analyzerMaxInFlight),
    READ_TIMEOUT_MS: String(s.readTimeoutMs),
    REQUEST_TIMEOUT_SECONDS: String(s.workerTimeoutSeconds),
    MAX_OBJECT_BYTES: String(s.maxObjectBytes),
    PUSH_BODY_LIMIT_BYTES: String(s.pushBodyLimitBytes),
    BATCH_MAX_ROWS: String(s.batchMaxRows),
    BATCH_MAX_WAIT_MS: String(s.batchMaxWaitMs),
    MERGE_MIN_INTERVAL_MS: String(s.mergeMinIntervalMs),
    ALLOWED_CONTENT_TYPES: input.allowedContentTypes.join(','),
    LOG_LEVEL: input.logLevel,
    ...(input.pushAuth === undefined
      ? {}
      : {
          PUSH_AUTH_AUDIENCE: input.pushAuth.audience,
          PUSH_AUTH_SERVICE_ACCOUNT: input.pushAuth.serviceAccountEmail,
        }),
  };
}

/**
 * The worker on Cloud Run: its own service account with the grants it needs and nothing broader, a
 * push service account that is the only invoker, and a service that is not public. The service
 * waits for every grant of its account: its startup probe reads the store, and a first revision
 * without the grants fails the probe and the whole create.
 */
export class WorkerService extends DoclineComponent {
  readonly service: gcp.cloudrunv2.Service;
  /** Identity the worker runs as. */
  readonly serviceAccount: gcp.serviceaccount.Account;
  /** Identity Pub/Sub signs push tokens for; the only invoker of the service. */
  readonly pushServiceAccount: gcp.serviceaccount.Account;
  /** The worker account's grants, which the service waits for. */
  readonly grants: pulumi.Resource[];
  /** run.invoker of the push account on the service; the push subscription waits for it. */
  readonly invokerGrant: gcp.cloudrunv2.ServiceIamMember;
  /** The service URL. */
  readonly url: pulumi.Output<string>;
  /** `URL/push`. */
  readonly pushEndpoint: pulumi.Output<string>;

  constructor(name: string, args: WorkerServiceArgs, opts?: pulumi.ComponentResourceOptions) {
    super('docline:index:WorkerService', name, opts);
    const { config } = args;
    const { project, region } = config;
    this.serviceAccount = new gcp.serviceaccount.Account(
      `${name}-runtime`,
      {
        project,
        accountId: `${config.prefix}-worker`,
        displayName: 'docline worker (Cloud Run runtime)',
      },
      this.child,
    );
    this.pushServiceAccount = new gcp.serviceaccount.Account(
      `${name}-push`,
      {
        project,
        accountId: `${config.prefix}-push`,
        displayName: 'docline push subscription (OIDC token identity)',
      },
      this.child,
    );
    const worker = this.serviceAccount.member;

    // The worker's grants, each on the narrowest resource that works.
    const objectViewer = new gcp.storage.BucketIAMMember(
      `${name}-object-viewer`,
      { bucket: args.bucketName, role: 'roles/storage.objectViewer', member: worker },
      this.child,
    );
    // The memo is create-only: objectCreator can create but not overwrite or delete (an overwrite
    // needs storage.objects.delete), objectViewer reads. The lifecycle rule does the deleting.
    const memoCreator = new gcp.storage.BucketIAMMember(
      `${name}-memo-creator`,
      { bucket: args.memoBucketName, role: 'roles/storage.objectCreator', member: worker },
      this.child,
    );
    const memoViewer = new gcp.storage.BucketIAMMember(
      `${name}-memo-viewer`,
      { bucket: args.memoBucketName, role: 'roles/storage.objectViewer', member: worker },
      this.child,
    );
    const dataEditor = new gcp.bigquery.DatasetIamMember(
      `${name}-data-editor`,
      { project, datasetId: args.datasetId, role: 'roles/bigquery.dataEditor', member: worker },
      this.child,
    );
    // Running a query (the seen() lookup, the MERGE) is a project-level permission in BigQuery.
    const jobUser = new gcp.projects.IAMMember(
      `${name}-job-user`,
      { project, role: 'roles/bigquery.jobUser', member: worker },
      this.child,
    );
    const vertexUser = new gcp.projects.IAMMember(
      `${name}-vertex-user`,
      { project, role: 'roles/aiplatform.user', member: worker },
      this.child,
    );
    this.grants = [objectViewer, memoCreator, memoViewer, dataEditor, jobUser, vertexUser];

    // Derived from the account id rather than read from the account, so that the environment is
    // known at preview (an account's email is Google's fixed function of its id and project).
    const pushEmail = pulumi.interpolate`${config.prefix}-push@${project}.iam.gserviceaccount.com`;
    const envs = pulumi
      .output({
        tableRef: args.tableRef,
        memoBucket: args.memoBucketName,
        audience: args.pushAudience,
        pushEmail,
      })
      .apply(({ tableRef, memoBucket, audience, pushEmail: email }) =>
        Object.entries(
          workerEnvironment({
            project,
            tableRef,
            memoBucket,
            dataLocation: config.dataLocation,
            geminiLocation: config.geminiLocation,
            settings: config.delivery,
            allowedContentTypes: config.worker.allowedContentTypes,
            logLevel: config.worker.logLevel,
            pushAuth: config.worker.verifyPushTokenInApp
              ? { audience, serviceAccountEmail: email }
              : undefined,
          }),
        ).map(([envName, value]) => ({ name: envName, value })),
      );

    const timeout = `${config.delivery.workerTimeoutSeconds}s`;
    this.service = new gcp.cloudrunv2.Service(
      `${name}-service`,
      {
        project,
        location: region,
        description: 'docline worker: Pub/Sub push endpoint that turns each upload into one BigQuery row.',
        // Reachable from the internet at the network level because Pub/Sub push is not "internal"
        // traffic; IAM (invoker = push account only) is what keeps it private.
        ingress: 'INGRESS_TRAFFIC_ALL',
        invokerIamDisabled: false,
        customAudiences: [args.pushAudience],
        deletionProtection: config.deletionProtection,
        template: {
          serviceAccount: this.serviceAccount.email,
          // Below the ack deadline (config checks the margin), so a slow request ends before Pub/Sub redelivers it.
          timeout,
          maxInstanceRequestConcurrency: config.worker.concurrency,
          scaling: {
            minInstanceCount: config.worker.minInstances,
            maxInstanceCount: config.worker.maxInstances,
          },
          containers: [
            {
              image: args.image,
              ports: { containerPort: CONTAINER_PORT },
              envs,
              resources: {
                limits: { cpu: config.worker.cpu, memory: config.worker.memory },
                startupCpuBoost: true,
              },
              startupProbe: { httpGet: { path: '/healthz' }, periodSeconds: 2, failureThreshold: 15 },
            },
          ],
        },
      },
      this.childAfter(...this.grants),
    );
    this.url = this.service.uri;
    this.pushEndpoint = pulumi.interpolate`${this.service.uri}/push`;

    // The push account may invoke this service, and nothing else may: no allUsers, no project-wide invoker.
    this.invokerGrant = new gcp.cloudrunv2.ServiceIamMember(
      `${name}-push-invoker`,
      {
        project,
        location: region,
        name: this.service.name,
        role: 'roles/run.invoker',
        member: this.pushServiceAccount.member,
      },
      this.child,
    );

    this.registerOutputs({
      url: this.url,
      serviceName: this.service.name,
      serviceAccountEmail: this.serviceAccount.email,
      pushServiceAccountEmail: this.pushServiceAccount.email,
    });
  }
}
