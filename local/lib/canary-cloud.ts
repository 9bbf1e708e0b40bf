/**
 * The canary's probes on a deployed stack, from its outputs (`pulumi stack output --json`): the
 * bucket, the uploads topic, the worker's service and regional log bucket, the table and the
 * `documents` view. Credentials are Application Default Credentials (the deploy identity in CI).
 * The notification is observed through a pull subscription of its own, created before the upload,
 * filtered to this run's object and expiring after a day if a killed job leaves it behind.
 */

import { contentTypeFor } from './announcer';
import type { CanaryProbes, WorkerAnswer } from './canary';
import { CANARY_PREFIX } from './canary';
import { PubSubClient } from './pubsub';

/** The stack outputs the canary reads; every one is named when missing. */
export interface CanaryOutputs {
  bucketName: string;
  topicName: string;
  tableId: string;
  documentsView: string;
  workerServiceName: string | undefined;
  logBucketName: string | undefined;
}

/** Reads the canary's outputs from `pulumi stack output --json`, naming every one that is missing. */
export function canaryOutputs(outputs: Record<string, unknown>): CanaryOutputs {
  const text = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);
  const views = (outputs.viewIds ?? {}) as Record<string, unknown>;
  const found = {
    bucketName: text(outputs.bucketName),
    topicName: text(outputs.topicName),
    tableId: text(outputs.tableId),
    documentsView: text(views.documents),
  };
  const missing = Object.entries(found)
    .filter(([, v]) => v === undefined)
    .map(([k]) => (k === 'documentsView' ? 'viewIds.documents' : k));
  if (missing.length > 0)
    throw new Error(`the stack outputs lack ${missing.join(', ')}: was the stack deployed by this program?`);
  return {
    ...(found as Record<keyof typeof found, string>),
    workerServiceName: text(outputs.workerServiceName),
    logBucketName: text(outputs.logBucket),
  };
}

/** One BigQuery location-free parameterised query, as the probes need it. */
type Query = (sql: string, params: Record<string, string>) => Promise<Array<Record<string, unknown>>>;

export async function cloudCanaryProbes(
  outputs: CanaryOutputs,
  runId: string,
  print: (line: string) => void,
): Promise<CanaryProbes> {
  const project = outputs.tableId.split('.')[0]!;
  const { Storage } = require('@google-cloud/storage') as typeof import('@google-cloud/storage');
  const { BigQuery } = require('@google-cloud/bigquery') as typeof import('@google-cloud/bigquery');
  const { GoogleAuth } = require('google-auth-library') as typeof import('google-auth-library');
  const storage = new Storage({ projectId: project });
  const bigquery = new BigQuery({ projectId: project });
  const auth = new GoogleAuth({ scopes: ['https://www.googleapis.com/auth/cloud-platform'] });
  const query: Query = async (sql, params) => (await bigquery.query({ query: sql, params }))[0];

  const pubsub = new PubSubClient(undefined, project);
  const tap = `${CANARY_PREFIX.replace(/\W+$/, '')}-${runId}`;
  await pubsub.ensureSubscription(tap, {
    topic: outputs.topicName,
    ackDeadlineSeconds: 60,
    filter: `hasPrefix(attributes.objectId, "${CANARY_PREFIX}${runId}/")`,
    expirationPolicy: { ttl: '86400s' },
  });
  const announced = new Map<string, string>();

  // The worker's lines are in the stack's regional log bucket (infra/components/regional-logs.ts).
  let logsReadable = outputs.logBucketName !== undefined && outputs.workerServiceName !== undefined;
  if (!logsReadable)
    print('canary: the outputs name no log bucket or service: push and worker are not observed');
  const workerLines = async (messageId: string): Promise<Array<Record<string, unknown>> | undefined> => {
    if (!logsReadable) return undefined;
    const client = await auth.getClient();
    try {
      const res = await client.request<{ entries?: Array<{ jsonPayload?: Record<string, unknown> }> }>({
        url: 'https://logging.googleapis.com/v2/entries:list',
        method: 'POST',
        data: {
          resourceNames: [`${outputs.logBucketName}/views/_AllLogs`],
          filter: `resource.type = "cloud_run_revision" AND resource.labels.service_name = "${outputs.workerServiceName}" AND jsonPayload.messageId = "${messageId}" AND timestamp >= "${new Date(Date.now() - 3_600_000).toISOString()}"`,
          orderBy: 'timestamp asc',
          pageSize: 50,
        },
      });
      return (res.data.entries ?? []).map((e) => e.jsonPayload ?? {});
    } catch (error) {
      // No roles/logging.viewAccessor: say so once and follow the document to its row only.
      logsReadable = false;
      print(
        `canary: cannot read the worker's lines (${(error as Error).message}): push and worker are not observed`,
      );
      return undefined;
    }
  };

  const probes: CanaryProbes = {
    description: `the deployed stack (bucket ${outputs.bucketName}, view ${outputs.documentsView})`,
    async upload(name, bytes) {
      const file = storage.bucket(outputs.bucketName).file(name);
      await file.save(bytes, { contentType: contentTypeFor(name), resumable: false });
      const [metadata] = await file.getMetadata();
      return `gs://${outputs.bucketName}/${name}#${metadata.generation}`;
    },
    async notification(objectUri) {
      const messages = await pubsub.pull(tap, 10);
      await pubsub.acknowledge(
        tap,
        messages.map((m) => m.ackId),
      );
      for (const m of messages) {
        const a = m.message.attributes ?? {};
        announced.set(`gs://${a.bucketId}/${a.objectId}#${a.objectGeneration}`, m.message.messageId);
      }
      return announced.get(objectUri);
    },
    observes: () => logsReadable,
    close: () => pubsub.deleteSubscription(tap).finally(() => pubsub.close()),
    async row(objectUri) {
      // The table first, on its recent partitions (cheap); the view once the row is there.
      const recent = await query(
        `SELECT status FROM \`${outputs.tableId}\` WHERE object_uri = @uri AND processed_at > TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 1 DAY)`,
        { uri: objectUri },
      );
      if (recent.length === 0) return undefined;
      const [row] = await query(
        `SELECT status, reason FROM \`${outputs.documentsView}\` WHERE object_uri = @uri`,
        {
          uri: objectUri,
        },
      );
      return row === undefined
        ? undefined
        : { status: String(row.status), reason: (row.reason as string | null) ?? null };
    },
  };
  if (logsReadable) {
    Object.assign(probes, {
      push: async (messageId: string) => ((await workerLines(messageId)) ?? []).length > 0,
      worker: async (messageId: string): Promise<WorkerAnswer | undefined> => {
        const answer = ((await workerLines(messageId)) ?? []).findLast((l) => l.status !== undefined);
        return answer === undefined
          ? undefined
          : {
              status: String(answer.status),
              detail: String(answer.reason ?? answer.error ?? answer.message ?? ''),
            };
      },
    });
  }
  return probes;
}
