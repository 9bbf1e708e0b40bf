/**
 * A hand-built docline stack in the shape the engine describes it to a policy pack, for update mode
 * (every output known) and preview mode (outputs of resources not created yet are unknown, the
 * dependencies are not). Tests apply one mutation to it and expect exactly one violation.
 */
import { bigQuerySchema, CLUSTER_COLUMNS, PARTITION_COLUMN } from '../../worker/src/contract/row';
import { TYPES } from '../rules/types';
import { type StackResource, UNKNOWN, urnOf } from './harness';

export type Mode = 'update' | 'preview';

/** The pack's own type tokens (checked against @pulumi/gcp), and the two accounts' it does not need. */
const T = {
  ...TYPES,
  service: TYPES.runService,
  runIam: TYPES.runServiceIamMember,
  projectIam: TYPES.projectIamMember,
  account: 'gcp:serviceaccount/account:Account',
  accountIam: 'gcp:serviceaccount/iAMMember:IAMMember',
} as const;

export { T as FIXTURE_TYPES };

/** The stack: every rule holds. */
export function validStack(mode: Mode): StackResource[] {
  const known = <V>(value: V): V | string => (mode === 'preview' ? UNKNOWN : value);
  const urn = (type: string, name: string) => urnOf({ type, name });
  const bucket = urn(T.bucket, 'documents');
  const topic = urn(T.topic, 'documents-events');
  const deadLetters = urn(T.topic, 'documents-dead-letters');
  const service = urn(T.service, 'worker');
  const worker = urn(T.account, 'worker');
  const pusher = urn(T.account, 'push');
  const dataset = urn(T.dataset, 'docline');
  const p = 'docline-dev';
  return [
    {
      type: T.bucket,
      name: 'documents',
      props: { name: known('documents-4f2a1c'), location: 'EU', labels: { 'docline-role': 'documents' } },
    },
    {
      type: T.topic,
      name: 'documents-events',
      props: {
        name: known('documents-events-91b2'),
        id: known(`projects/${p}/topics/documents-events-91b2`),
      },
    },
    {
      type: T.topic,
      name: 'documents-dead-letters',
      props: {
        name: known('documents-dead-letters-7c1d'),
        id: known(`projects/${p}/topics/documents-dead-letters-7c1d`),
      },
    },
    {
      type: T.notification,
      name: 'documents',
      props: {
        bucket: known('documents-4f2a1c'),
        topic: known(`projects/${p}/topics/documents-events-91b2`),
        eventTypes: ['OBJECT_FINALIZE'],
        payloadFormat: 'JSON_API_V1',
        ...(mode === 'update' ? { notificationId: '7' } : {}),
      },
      propertyDependencies: { bucket: [bucket], topic: [topic] },
      options: { deleteBeforeReplace: true },
    },
    {
      type: T.account,
      name: 'worker',
      props: { accountId: 'docline-worker', email: known(`docline-worker@${p}.iam.gserviceaccount.com`) },
    },
    {
      type: T.account,
      name: 'push',
      props: { accountId: 'docline-push', email: known(`docline-push@${p}.iam.gserviceaccount.com`) },
    },
    {
      type: T.service,
      name: 'worker',
      props: {
        location: 'europe-west1',
        ingress: 'INGRESS_TRAFFIC_ALL',
        uri: known('https://worker-abc-ew.a.run.app'),
        template: {
          serviceAccount: known(`docline-worker@${p}.iam.gserviceaccount.com`),
          timeout: '90s',
          containers: [{ image: 'europe-docker.pkg.dev/p/docline/worker:1' }],
        },
      },
      propertyDependencies: { template: [worker] },
    },
    {
      type: T.runIam,
      name: 'worker-invoker',
      props: {
        name: known('worker'),
        location: 'europe-west1',
        role: 'roles/run.invoker',
        member: known(`serviceAccount:docline-push@${p}.iam.gserviceaccount.com`),
      },
      propertyDependencies: { name: [service], member: [pusher] },
    },
    {
      type: T.subscription,
      name: 'documents-push',
      props: {
        topic: known(`projects/${p}/topics/documents-events-91b2`),
        ackDeadlineSeconds: 120,
        messageRetentionDuration: '604800s',
        pushConfig: {
          pushEndpoint: known('https://worker-abc-ew.a.run.app/push'),
          oidcToken: { serviceAccountEmail: known(`docline-push@${p}.iam.gserviceaccount.com`) },
        },
        deadLetterPolicy: {
          deadLetterTopic: known(`projects/${p}/topics/documents-dead-letters-7c1d`),
          maxDeliveryAttempts: 10,
        },
        retryPolicy: { minimumBackoff: '10s', maximumBackoff: '600s' },
      },
      propertyDependencies: {
        topic: [topic],
        pushConfig: [service, pusher],
        deadLetterPolicy: [deadLetters],
      },
    },
    {
      type: T.subscription,
      name: 'documents-dead-letters',
      props: {
        topic: known(`projects/${p}/topics/documents-dead-letters-7c1d`),
        messageRetentionDuration: '604800s',
        expirationPolicy: { ttl: '' },
      },
      propertyDependencies: { topic: [deadLetters] },
    },
    {
      type: T.accountIam,
      name: 'push-token-creator',
      props: {
        serviceAccountId: known(`projects/${p}/serviceAccounts/docline-push@x`),
        role: 'roles/iam.serviceAccountTokenCreator',
        member: 'serviceAccount:service-123@gcp-sa-pubsub.iam.gserviceaccount.com',
      },
      propertyDependencies: { serviceAccountId: [pusher] },
    },
    {
      type: T.projectIam,
      name: 'worker-job-user',
      props: {
        project: p,
        role: 'roles/bigquery.jobUser',
        member: known(`serviceAccount:docline-worker@${p}.iam.gserviceaccount.com`),
      },
      propertyDependencies: { member: [worker] },
    },
    { type: T.dataset, name: 'docline', props: { datasetId: 'docline', location: 'EU' } },
    {
      type: T.table,
      name: 'deliveries',
      props: {
        datasetId: 'docline',
        tableId: 'deliveries',
        schema: JSON.stringify(bigQuerySchema()),
        timePartitioning: { type: 'DAY', field: PARTITION_COLUMN },
        clusterings: [...CLUSTER_COLUMNS],
      },
      propertyDependencies: { datasetId: [dataset] },
    },
    {
      type: T.table,
      name: 'documents-view',
      props: { datasetId: 'docline', tableId: 'documents', view: { query: 'SELECT 1', useLegacySql: false } },
      propertyDependencies: { datasetId: [dataset] },
    },
  ];
}

/** A change to one resource: a function of a copy of it, or props to set on it and fields to replace. */
type Change =
  | ((resource: StackResource) => StackResource)
  | (Partial<Omit<StackResource, 'props'>> & { props?: StackResource['props'] });

/** A copy of the stack with one resource changed (by logical name and type). */
export function mutate(
  stack: readonly StackResource[],
  name: string,
  type: string,
  change: Change,
): StackResource[] {
  let found = false;
  const next = stack.map((r) => {
    if (r.name !== name || r.type !== type) return r;
    found = true;
    const copy = structuredClone(r);
    return typeof change === 'function'
      ? change(copy)
      : { ...copy, ...change, props: { ...copy.props, ...change.props } };
  });
  if (!found) throw new Error(`no ${type} named ${name} in the stack`);
  return next;
}

/** A copy of the stack with resources added. */
export function add(stack: readonly StackResource[], ...resources: StackResource[]): StackResource[] {
  return [...stack, ...resources];
}

/** A copy of the stack without one resource. */
export function remove(stack: readonly StackResource[], name: string, type: string): StackResource[] {
  return stack.filter((r) => r.name !== name || r.type !== type);
}
