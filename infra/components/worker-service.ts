import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';
import { SETTINGS, type SettingDeclaration, type SettingKey } from '../../worker/src/contract/settings';
import { MEMO_LEASE_PREFIX } from '../../worker/src/contract/storage';
import type { StackConfig } from '../config';
import { DoclineComponent } from './component';
import { grantsSettled } from './lifecycle';

/** The container port; Cloud Run passes it to the worker as PORT. */
const CONTAINER_PORT = 8080;

/**
 * The startup probe. `/healthz` reads the table's metadata from BigQuery, which on a cold instance
 * first fetches a token: Cloud Run's default probe timeout (1 s) would fail a slow but healthy
 * start, and with it the revision and the deploy. Each attempt gets 8 s (timeoutSeconds may not
 * exceed periodSeconds, terraform-provider-google resource_cloud_run_v2_service.go), and 24 attempts
 * 10 s apart give a start 240 s, the most Cloud Run allows a startup probe (failureThreshold ×
 * periodSeconds).
 */
export const STARTUP_PROBE = Object.freeze({
  httpGet: { path: '/healthz' },
  timeoutSeconds: 8,
  periodSeconds: 10,
  failureThreshold: 24,
});

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
    | 'settings'
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
  /**
   * The table resource: the startup probe reads it, so the service waits for it. The tableRef
   * string alone carries no dependency when the image is preset and nothing else orders the two.
   */
  table: pulumi.Resource;
  /** The audience push tokens carry; added to the service's custom audiences. */
  pushAudience: pulumi.Input<string>;
  /**
   * The Artifact Registry repository of an image built elsewhere, when it lies in another project
   * ({@link foreignImageRepository}), and the stack project's number: Cloud Run's service agent is
   * given read on it. Undefined for an image of the stack's own project or repository.
   */
  imageRepository?: { repository: ImageRepository; projectNumber: pulumi.Input<string> };
}

/** An Artifact Registry Docker repository, as an image reference names it. */
export interface ImageRepository {
  location: string;
  project: string;
  repository: string;
}

/**
 * The repository of `image` (`LOCATION-docker.pkg.dev/PROJECT/REPOSITORY/…`) when it is in another
 * project than `project`; undefined otherwise (or for an image not in Artifact Registry). Cloud Run
 * pulls with its service agent (`service-NUMBER@serverless-robot-prod.iam.gserviceaccount.com`),
 * which reads same-project repositories by its own role but needs `roles/artifactregistry.reader`
 * on a repository of another project, or the first revision cannot pull and the create fails.
 */
export function foreignImageRepository(
  image: string | undefined,
  project: string,
): ImageRepository | undefined {
  const match = /^([a-z0-9-]+)-docker\.pkg\.dev\/([^/]+)\/([^/]+)\//.exec(image ?? '');
  if (match === null || match[2] === project) return undefined;
  return { location: match[1]!, project: match[2]!, repository: match[3]! };
}

/**
 * The worker's environment, in the names worker/src/config.ts reads: every setting the stack has a
 * value for (its key, or what it derives), in the variable its row of the settings table names,
 * then the resources the worker uses. PORT and K_REVISION come from Cloud Run; WORKER_VERSION is
 * left unset so that rows carry the revision that wrote them.
 */
export function workerEnvironment(input: {
  project: string;
  tableRef: string;
  memoBucket: string;
  dataLocation: string;
  /** Each stack setting's value, derived ones included. */
  values: Readonly<Partial<Record<SettingKey, unknown>>>;
  pushAuth: { audience: string; serviceAccountEmail: string };
}): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const [key, s] of Object.entries(SETTINGS) as [SettingKey, SettingDeclaration][]) {
    const value = input.values[key];
    if (s.env === undefined || s.stack === undefined || value === undefined) continue;
    settings[s.env] = Array.isArray(value) ? value.join(',') : String(value);
  }
  return {
    DOCLINE_READER: 'gcs',
    DOCLINE_ANALYZER: 'gemini',
    GOOGLE_CLOUD_PROJECT: input.project,
    BIGQUERY_TABLE: input.tableRef,
    BIGQUERY_LOCATION: input.dataLocation,
    MEMO_BUCKET: input.memoBucket,
    ...settings,
    PUSH_AUTH_AUDIENCE: input.pushAuth.audience,
    PUSH_AUTH_SERVICE_ACCOUNT: input.pushAuth.serviceAccountEmail,
  };
}

/**
 * The worker on Cloud Run: its own service account with the grants it needs and nothing broader, a
 * push service account that is the only invoker, and a service that is not public. The service
 * waits for every grant of its account, for their propagation (a declared Sleep) and for the table:
 * its startup probe reads the store, and a first revision that cannot fails the probe and the
 * whole create. It holds no data, so nothing protects it from `destroy`.
 */
export class WorkerService extends DoclineComponent {
  readonly service: gcp.cloudrunv2.Service;
  /** Identity the worker runs as. */
  readonly serviceAccount: gcp.serviceaccount.Account;
  /** Identity Pub/Sub signs push tokens for; the only invoker of the service. */
  readonly pushServiceAccount: gcp.serviceaccount.Account;
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
    const account = (suffix: string, id: string, purpose: string) =>
      new gcp.serviceaccount.Account(
        `${name}-${suffix}`,
        { project, accountId: `${config.prefix}-${id}`, displayName: `${config.prefix}: ${purpose}` },
        this.child,
      );
    this.serviceAccount = account('runtime', 'worker', 'worker (Cloud Run runtime)');
    this.pushServiceAccount = account('push', 'push', 'push subscription (OIDC token identity)');
    const worker = this.serviceAccount.member;
    const bucketGrant = (suffix: string, bucket: pulumi.Input<string>, role: string) =>
      new gcp.storage.BucketIAMMember(`${name}-${suffix}`, { bucket, role, member: worker }, this.child);
    const projectGrant = (suffix: string, role: string) =>
      new gcp.projects.IAMMember(`${name}-${suffix}`, { project, role, member: worker }, this.child);

    // The worker's grants, each on the narrowest resource that works.
    const objectViewer = bucketGrant('object-viewer', args.bucketName, 'roles/storage.objectViewer');
    // Kept analyses are create-only: objectCreator can create but not overwrite or delete (an
    // overwrite needs storage.objects.delete), objectViewer reads. The lifecycle rule does the
    // deleting.
    const memoCreator = bucketGrant('memo-creator', args.memoBucketName, 'roles/storage.objectCreator');
    const memoViewer = bucketGrant('memo-viewer', args.memoBucketName, 'roles/storage.objectViewer');
    // A key's lease is one object, rewritten in place by compare-and-swap on its generation (taken
    // over once it ended, renewed, released): an overwrite needs storage.objects.delete, granted on
    // the `leases/` prefix alone, so no kept analysis can be overwritten or deleted by the worker.
    const memoLeases = new gcp.storage.BucketIAMMember(
      `${name}-memo-leases`,
      {
        bucket: args.memoBucketName,
        role: 'roles/storage.objectUser',
        member: worker,
        condition: {
          title: 'memo leases only',
          description: "The worker rewrites its keys' lease objects in place; nothing else in the memo.",
          expression: pulumi.interpolate`resource.name.startsWith("projects/_/buckets/${args.memoBucketName}/objects/${MEMO_LEASE_PREFIX}")`,
        },
      },
      this.child,
    );
    const dataEditor = new gcp.bigquery.DatasetIamMember(
      `${name}-data-editor`,
      { project, datasetId: args.datasetId, role: 'roles/bigquery.dataEditor', member: worker },
      this.child,
    );
    // Running a query (the seen() lookup, the MERGE) is a project-level permission in BigQuery.
    const jobUser = projectGrant('job-user', 'roles/bigquery.jobUser');
    const vertexUser = projectGrant('vertex-user', 'roles/aiplatform.user');
    // The image's repository in another project: the service agent that pulls may read it. The agent
    // exists once the Run API is on (the component waits for the APIs), so no bootstrap by hand.
    const imagePull =
      args.imageRepository === undefined
        ? []
        : [
            new gcp.artifactregistry.RepositoryIamMember(
              `${name}-image-reader`,
              {
                project: args.imageRepository.repository.project,
                location: args.imageRepository.repository.location,
                repository: args.imageRepository.repository.repository,
                role: 'roles/artifactregistry.reader',
                member: pulumi.interpolate`serviceAccount:service-${args.imageRepository.projectNumber}@serverless-robot-prod.iam.gserviceaccount.com`,
              },
              this.child,
            ),
          ];
    const grants = [
      objectViewer,
      memoCreator,
      memoViewer,
      memoLeases,
      dataEditor,
      jobUser,
      vertexUser,
      ...imagePull,
    ];
    const grantsPropagated = grantsSettled(`${name}-grants-settle`, grants, this.child);

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
            values: { ...config.settings, ...config.delivery, geminiLocation: config.geminiLocation },
            pushAuth: { audience, serviceAccountEmail: email },
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
        // Stateless: protecting it would only make `destroy` fail; the data it writes is kept elsewhere.
        deletionProtection: false,
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
              startupProbe: STARTUP_PROBE,
            },
          ],
        },
      },
      this.childAfter(...grants, grantsPropagated, args.table),
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
