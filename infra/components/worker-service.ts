import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';
import type { DeliverySettings } from '../../worker/src/contract/settings';
import { childOf } from './options';

/** The container port; Cloud Run passes it to the worker as PORT. */
const CONTAINER_PORT = 8080;

/** Arguments of {@link WorkerService}. */
export interface WorkerServiceArgs {
  project: pulumi.Input<string>;
  /** Cloud Run region. */
  region: pulumi.Input<string>;
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
  /** BigQuery location (BIGQUERY_LOCATION). */
  dataLocation: pulumi.Input<string>;
  /** Vertex AI location for Gemini (GOOGLE_CLOUD_LOCATION). */
  geminiLocation: pulumi.Input<string>;
  /** The audience push tokens carry; added to the service's custom audiences. */
  pushAudience: pulumi.Input<string>;
  /** Delivery settings the worker must agree with (timeouts, dedup, byte caps, model). */
  settings: pulumi.Input<DeliverySettings>;
  allowedContentTypes: pulumi.Input<readonly string[]>;
  /** Requests per instance. */
  concurrency: pulumi.Input<number>;
  minInstances: pulumi.Input<number>;
  maxInstances: pulumi.Input<number>;
  /** Container CPU limit, e.g. "1". Default "1". */
  cpu?: pulumi.Input<string>;
  /** Container memory limit, e.g. "1Gi". Default "1Gi". */
  memory?: pulumi.Input<string>;
  /** LOG_LEVEL (DEBUG, INFO, WARNING, ERROR). Default "INFO". */
  logLevel?: pulumi.Input<string>;
  /** Verify the push token in the worker too (PUSH_AUTH_AUDIENCE/PUSH_AUTH_SERVICE_ACCOUNT). Default true. */
  verifyPushTokenInApp?: pulumi.Input<boolean>;
  /** Refuse to delete the service on `pulumi destroy`. Default true. */
  deletionProtection?: pulumi.Input<boolean>;
  /** Short prefix of the service account ids (at most 18 characters; ids are limited to 30). */
  accountIdPrefix: string;
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
    READ_TIMEOUT_MS: String(s.readTimeoutMs),
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
export class WorkerService extends pulumi.ComponentResource {
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
    super('docline:index:WorkerService', name, {}, opts);
    // Children inherit the component's dependsOn (the APIs): Pulumi does not pass it down by itself.
    const child: pulumi.CustomResourceOptions = { parent: this, dependsOn: opts?.dependsOn };
    this.serviceAccount = new gcp.serviceaccount.Account(
      `${name}-runtime`,
      {
        project: args.project,
        accountId: `${args.accountIdPrefix}-worker`,
        displayName: 'docline worker (Cloud Run runtime)',
      },
      child,
    );
    this.pushServiceAccount = new gcp.serviceaccount.Account(
      `${name}-push`,
      {
        project: args.project,
        accountId: `${args.accountIdPrefix}-push`,
        displayName: 'docline push subscription (OIDC token identity)',
      },
      child,
    );
    const worker = this.serviceAccount.member;

    // The worker's grants, each on the narrowest resource that works.
    const objectViewer = new gcp.storage.BucketIAMMember(
      `${name}-object-viewer`,
      { bucket: args.bucketName, role: 'roles/storage.objectViewer', member: worker },
      child,
    );
    // The memo is create-only: objectCreator can create but not overwrite or delete (an overwrite
    // needs storage.objects.delete), objectViewer reads. The lifecycle rule does the deleting.
    const memoCreator = new gcp.storage.BucketIAMMember(
      `${name}-memo-creator`,
      { bucket: args.memoBucketName, role: 'roles/storage.objectCreator', member: worker },
      child,
    );
    const memoViewer = new gcp.storage.BucketIAMMember(
      `${name}-memo-viewer`,
      { bucket: args.memoBucketName, role: 'roles/storage.objectViewer', member: worker },
      child,
    );
    const dataEditor = new gcp.bigquery.DatasetIamMember(
      `${name}-data-editor`,
      { project: args.project, datasetId: args.datasetId, role: 'roles/bigquery.dataEditor', member: worker },
      child,
    );
    // Running a query (the seen() lookup, the MERGE) is a project-level permission in BigQuery.
    const jobUser = new gcp.projects.IAMMember(
      `${name}-job-user`,
      { project: args.project, role: 'roles/bigquery.jobUser', member: worker },
      child,
    );
    const vertexUser = new gcp.projects.IAMMember(
      `${name}-vertex-user`,
      { project: args.project, role: 'roles/aiplatform.user', member: worker },
      child,
    );
    this.grants = [objectViewer, memoCreator, memoViewer, dataEditor, jobUser, vertexUser];

    // Derived from the account id rather than read from the account, so that the environment is
    // known at preview (an account's email is Google's fixed function of its id and project).
    const pushEmail = pulumi.interpolate`${args.accountIdPrefix}-push@${args.project}.iam.gserviceaccount.com`;
    const verify = pulumi.output(args.verifyPushTokenInApp ?? true);
    const envs = pulumi
      .output({
        project: args.project,
        tableRef: args.tableRef,
        memoBucket: args.memoBucketName,
        dataLocation: args.dataLocation,
        geminiLocation: args.geminiLocation,
        settings: args.settings,
        allowedContentTypes: args.allowedContentTypes,
        logLevel: args.logLevel ?? 'INFO',
        inApp: verify,
        audience: args.pushAudience,
        pushEmail,
      })
      .apply(({ inApp, audience, pushEmail: email, ...rest }) =>
        Object.entries(
          workerEnvironment({
            ...rest,
            pushAuth: inApp ? { audience, serviceAccountEmail: email } : undefined,
          }),
        ).map(([envName, value]) => ({ name: envName, value })),
      );

    const timeout = pulumi.output(args.settings).apply((s) => `${s.workerTimeoutSeconds}s`);
    this.service = new gcp.cloudrunv2.Service(
      `${name}-service`,
      {
        project: args.project,
        location: args.region,
        description: 'docline worker: Pub/Sub push endpoint that turns each upload into one BigQuery row.',
        // Reachable from the internet at the network level because Pub/Sub push is not "internal"
        // traffic; IAM (invoker = push account only) is what keeps it private.
        ingress: 'INGRESS_TRAFFIC_ALL',
        invokerIamDisabled: false,
        customAudiences: [args.pushAudience],
        deletionProtection: args.deletionProtection ?? true,
        template: {
          serviceAccount: this.serviceAccount.email,
          // Below the ack deadline (config checks the margin), so a slow request ends before Pub/Sub redelivers it.
          timeout,
          maxInstanceRequestConcurrency: args.concurrency,
          scaling: { minInstanceCount: args.minInstances, maxInstanceCount: args.maxInstances },
          containers: [
            {
              image: args.image,
              ports: { containerPort: CONTAINER_PORT },
              envs,
              resources: {
                limits: { cpu: args.cpu ?? '1', memory: args.memory ?? '1Gi' },
                startupCpuBoost: true,
              },
              startupProbe: { httpGet: { path: '/healthz' }, periodSeconds: 2, failureThreshold: 15 },
            },
          ],
        },
      },
      childOf(this, opts, ...this.grants),
    );
    this.url = this.service.uri;
    this.pushEndpoint = pulumi.interpolate`${this.service.uri}/push`;

    // The push account may invoke this service, and nothing else may: no allUsers, no project-wide invoker.
    this.invokerGrant = new gcp.cloudrunv2.ServiceIamMember(
      `${name}-push-invoker`,
      {
        project: args.project,
        location: args.region,
        name: this.service.name,
        role: 'roles/run.invoker',
        member: this.pushServiceAccount.member,
      },
      child,
    );

    this.registerOutputs({
      url: this.url,
      serviceName: this.service.name,
      serviceAccountEmail: this.serviceAccount.email,
      pushServiceAccountEmail: this.pushServiceAccount.email,
    });
  }
}
