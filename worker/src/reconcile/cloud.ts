import { BigQuery } from '@google-cloud/bigquery';
import { PubSub } from '@google-cloud/pubsub';
import { Storage } from '@google-cloud/storage';
import { BigQueryLineIndex, GcsObjectLister, PubSubPublisher } from './cloud-sources';
import type { CloudReconcileConfig } from './config';
import type { LineIndex, NotificationPublisher, ObjectLister } from './reconcile';

/** The cloud target's ports, each on its client library with Application Default Credentials. */
export interface CloudSources {
  lister: ObjectLister;
  index: LineIndex;
  publisher: NotificationPublisher;
  close(): Promise<void>;
}

export function cloudSources(config: CloudReconcileConfig, options: { raiseCapHint: string }): CloudSources {
  const storage = new Storage({ projectId: config.project });
  const bigquery = new BigQuery({ projectId: config.project });
  const pubsub = new PubSub({ projectId: config.project });
  return {
    lister: new GcsObjectLister(storage.bucket(config.bucket)),
    index: new BigQueryLineIndex({
      bigquery,
      table: config.table,
      location: config.location,
      maximumBytesBilled: config.maximumBytesBilled,
      raiseCapHint: options.raiseCapHint,
    }),
    publisher: new PubSubPublisher(pubsub.topic(config.topic)),
    close: () => pubsub.close(),
  };
}
