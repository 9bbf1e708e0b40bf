import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';
import { IMAGE_KEEP_COUNT } from '../fixed';
import { DoclineComponent, type ProjectArgs } from './component';

/**
 * Every Google API the stack's own calls and the worker need. Enabling them is idempotent; they are
 * never disabled on destroy. Cloud Resource Manager serves project-level IAM members and the
 * `getProject` lookup; IAM Credentials mints the tokens the scheduled check and the scheduler use.
 * (Service Usage itself must already be on to enable anything: see docs/deploy.md.)
 */
export const REQUIRED_APIS = [
  'artifactregistry.googleapis.com',
  'aiplatform.googleapis.com',
  'bigquery.googleapis.com',
  // The optional monthly budget (docline:budgetBillingAccount); enabled either way, it costs nothing.
  'billingbudgets.googleapis.com',
  'bigquerydatatransfer.googleapis.com',
  'bigquerystorage.googleapis.com',
  'cloudresourcemanager.googleapis.com',
  'cloudscheduler.googleapis.com',
  'iam.googleapis.com',
  'iamcredentials.googleapis.com',
  'logging.googleapis.com',
  'monitoring.googleapis.com',
  'pubsub.googleapis.com',
  'run.googleapis.com',
  'storage.googleapis.com',
] as const;

/** Images older than this are deleted by the cleanup policy, unless among the most recent kept. */
const IMAGE_MAX_AGE_SECONDS = 30 * 24 * 60 * 60;

/** Arguments of {@link Foundation}. */
export interface FoundationArgs extends ProjectArgs {
  /** Region of the Artifact Registry repository (the worker's region, so pulls stay local). */
  region: pulumi.Input<string>;
  /**
   * Whether the stack builds the worker image itself (`docline:image` unset). Only then does it
   * create a repository: an image built elsewhere lives in a repository outside the stack, which
   * CI can push to before the first `up` and which `destroy` does not delete.
   */
  buildsImage: boolean;
}

/**
 * What must exist before anything else: the enabled APIs and, when the stack builds the worker
 * image, the Artifact Registry repository the image goes to. Every other component depends on it.
 */
export class Foundation extends DoclineComponent {
  /** The enabled APIs, for `dependsOn` (resources and data lookups alike). */
  readonly apis: gcp.projects.Service[];
  /** The stack's own image repository; undefined when the image is built elsewhere. */
  readonly repository: gcp.artifactregistry.Repository | undefined;
  /** Docker path of that repository: `REGION-docker.pkg.dev/PROJECT/REPOSITORY`. */
  readonly repositoryUrl: pulumi.Output<string> | undefined;

  constructor(name: string, args: FoundationArgs, opts?: pulumi.ComponentResourceOptions) {
    super('docline:index:Foundation', name, opts);
    this.apis = REQUIRED_APIS.map(
      (service) =>
        new gcp.projects.Service(
          `${name}-${service.split('.')[0]}`,
          // Disabling an API on destroy would break everything else in the project that uses it.
          { project: args.project, service, disableOnDestroy: false, disableDependentServices: false },
          this.child,
        ),
    );
    if (!args.buildsImage) {
      this.repository = undefined;
      this.repositoryUrl = undefined;
      this.registerOutputs({});
      return;
    }
    this.repository = new gcp.artifactregistry.Repository(
      `${name}-images`,
      {
        project: args.project,
        location: args.region,
        repositoryId: name,
        format: 'DOCKER',
        description: 'docline worker images',
        // Every code change pushes a new image; without a cleanup policy the repository only grows.
        // KEEP wins over DELETE: the newest N stay, older ones go once they are a month old. Only
        // this stack pushes here and the service runs the newest push, so the image it runs is kept.
        cleanupPolicyDryRun: false,
        cleanupPolicies: [
          {
            id: 'keep-most-recent',
            action: 'KEEP',
            mostRecentVersions: { keepCount: IMAGE_KEEP_COUNT },
          },
          {
            id: 'delete-old',
            action: 'DELETE',
            condition: { tagState: 'ANY', olderThan: `${IMAGE_MAX_AGE_SECONDS}s` },
          },
        ],
      },
      this.childAfter(...this.apis),
    );
    this.repositoryUrl = pulumi.interpolate`${this.repository.location}-docker.pkg.dev/${this.repository.project}/${this.repository.repositoryId}`;
    this.registerOutputs({ repositoryUrl: this.repositoryUrl });
  }
}
