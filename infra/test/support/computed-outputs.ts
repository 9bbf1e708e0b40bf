/**
 * What the providers compute, one table for both places that stand in for them: the mocks of
 * harness.ts (`pulumi.runtime.setMocks`) and the provider stand-ins the real engine runs
 * (engine/provider.ts). A value the program reads must be present, or the inputs built
 * from it silently vanish.
 */

/** Project number the mocked `gcp.organizations.getProject` answers. */
export const MOCK_PROJECT_NUMBER = '123456789012';
/** Email of the mocked Cloud Storage service agent. */
export const MOCK_STORAGE_AGENT = `service-${MOCK_PROJECT_NUMBER}@gs-project-accounts.iam.gserviceaccount.com`;

/**
 * Plausible computed outputs per resource type: the ones the program reads must be present, or the
 * inputs built from them silently vanish. Names are derived from the logical name.
 */
export function computedOutputs(
  type: string,
  name: string,
  inputs: Record<string, unknown>,
  project: string,
): Record<string, unknown> {
  const str = (key: string) => (typeof inputs[key] === 'string' ? (inputs[key] as string) : undefined);
  const proj = str('project') ?? project;
  // The name a resource is given, or the one the provider makes up from its logical name.
  const named = str('name') ?? `${name}-0123abc`;
  switch (type) {
    case 'gcp:storage/bucket:Bucket':
      return {
        name: named,
        url: `gs://${named}`,
        selfLink: `https://www.googleapis.com/storage/v1/b/${named}`,
      };
    case 'gcp:pubsub/topic:Topic':
      return { name: named, id: `projects/${proj}/topics/${named}` };
    case 'gcp:pubsub/subscription:Subscription':
      return { name: named, id: `projects/${proj}/subscriptions/${named}` };
    case 'gcp:storage/notification:Notification':
      return {
        notificationId: '1',
        selfLink: `https://www.googleapis.com/storage/v1/b/${str('bucket')}/notificationConfigs/1`,
      };
    case 'gcp:serviceaccount/account:Account': {
      const email = `${str('accountId')}@${proj}.iam.gserviceaccount.com`;
      return {
        email,
        member: `serviceAccount:${email}`,
        name: `projects/${proj}/serviceAccounts/${email}`,
        uniqueId: '100000000000000000001',
      };
    }
    case 'gcp:cloudrunv2/service:Service':
      return { name: named, uri: `https://${named}-abcdefghij-ew.a.run.app` };
    case 'gcp:bigquery/dataset:Dataset':
      return { datasetId: str('datasetId'), project: proj };
    case 'gcp:bigquery/table:Table':
      return { tableId: str('tableId'), datasetId: str('datasetId'), project: proj };
    case 'gcp:artifactregistry/repository:Repository':
      return { repositoryId: str('repositoryId'), location: str('location'), project: proj };
    case 'gcp:logging/metric:Metric':
    case 'gcp:cloudrunv2/job:Job':
    case 'gcp:cloudscheduler/job:Job':
      return { name: named };
    case 'gcp:monitoring/alertPolicy:AlertPolicy':
      return { name: `projects/${proj}/alertPolicies/${name}` };
    case 'gcp:bigquery/dataTransferConfig:DataTransferConfig':
      return { name: `projects/${proj}/locations/${str('location')}/transferConfigs/${name}-0123abc` };
    case 'docker-build:index:Image': {
      const digest = `sha256:${'ab'.repeat(32)}`;
      const tag = (inputs.tags as string[] | undefined)?.[0] ?? `${name}:latest`;
      return { digest, ref: `${tag}@${digest}` };
    }
    case 'gcp:projects/serviceIdentity:ServiceIdentity': {
      // Google's fixed naming of service agents: service-NUMBER@gcp-sa-SERVICE.iam.gserviceaccount.com.
      const agent = `service-${MOCK_PROJECT_NUMBER}@gcp-sa-${String(str('service')).split('.')[0]}.iam.gserviceaccount.com`;
      return { email: agent, member: `serviceAccount:${agent}` };
    }
    case 'gcp:logging/projectBucketConfig:ProjectBucketConfig':
      return { name: `projects/${proj}/locations/${str('location')}/buckets/${str('bucketId')}` };
    case 'gcp:monitoring/dashboard:Dashboard':
      return { id: `projects/${MOCK_PROJECT_NUMBER}/dashboards/${name}-0123abc` };
    default:
      return {};
  }
}

/** Answers of the provider functions the program calls. */
export function invokeResult(
  token: string,
  inputs: Record<string, unknown>,
  project: string,
): Record<string, unknown> {
  switch (token) {
    case 'gcp:storage/getProjectServiceAccount:getProjectServiceAccount':
      return { emailAddress: MOCK_STORAGE_AGENT, id: MOCK_STORAGE_AGENT, project: inputs.project ?? project };
    case 'gcp:organizations/getClientConfig:getClientConfig':
      return { accessToken: 'mock-access-token', project, id: project };
    case 'gcp:organizations/getProject:getProject':
      return {
        number: MOCK_PROJECT_NUMBER,
        projectId: inputs.projectId ?? project,
        name: inputs.projectId ?? project,
        id: `projects/${inputs.projectId ?? project}`,
      };
    default:
      throw new Error(`the harness has no mock for invoke ${token}; add one to infra/test/harness.ts`);
  }
}
