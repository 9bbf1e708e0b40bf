import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';

/** The Google APIs docline uses. Enabling them is idempotent; they are never disabled on destroy. */
export const REQUIRED_APIS = [
  'artifactregistry.googleapis.com',
  'aiplatform.googleapis.com',
  'bigquery.googleapis.com',
  'bigquerydatatransfer.googleapis.com',
  'bigquerystorage.googleapis.com',
  'iam.googleapis.com',
  'logging.googleapis.com',
  'monitoring.googleapis.com',
  'pubsub.googleapis.com',
  'run.googleapis.com',
  'storage.googleapis.com',
] as const;

/** Arguments of {@link Foundation}. */
export interface FoundationArgs {
  /** Project the APIs are enabled in. */
  project: pulumi.Input<string>;
  /** Region of the Artifact Registry repository (the worker's region, so pulls stay local). */
  region: pulumi.Input<string>;
}

/**
 * What must exist before the first worker image can be pushed: the enabled APIs and the Artifact
 * Registry repository the image goes to. Every other component depends on it.
 */
export class Foundation extends pulumi.ComponentResource {
  /** The enabled APIs, for `dependsOn`. */
  readonly apis: gcp.projects.Service[];
  readonly repository: gcp.artifactregistry.Repository;
  /** Docker path of the repository: `REGION-docker.pkg.dev/PROJECT/REPOSITORY`. */
  readonly repositoryUrl: pulumi.Output<string>;

  constructor(name: string, args: FoundationArgs, opts?: pulumi.ComponentResourceOptions) {
    super('docline:index:Foundation', name, {}, opts);
    this.apis = REQUIRED_APIS.map(
      (service) =>
        new gcp.projects.Service(
          `${name}-${service.split('.')[0]}`,
          // Disabling an API on destroy would break everything else in the project that uses it.
          { project: args.project, service, disableOnDestroy: false, disableDependentServices: false },
          { parent: this },
        ),
    );
    this.repository = new gcp.artifactregistry.Repository(
      `${name}-images`,
      {
        project: args.project,
        location: args.region,
        repositoryId: name,
        format: 'DOCKER',
        description: 'docline worker images',
      },
      { parent: this, dependsOn: this.apis },
    );
    this.repositoryUrl = pulumi.interpolate`${this.repository.location}-docker.pkg.dev/${this.repository.project}/${this.repository.repositoryId}`;
    this.registerOutputs({ repositoryUrl: this.repositoryUrl });
  }
}
