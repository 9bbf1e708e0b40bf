import * as pulumi from '@pulumi/pulumi';
import { Alerts } from './components/alerts';
import { Delivery } from './components/delivery';
import { DocumentBucket } from './components/document-bucket';
import { Foundation } from './components/foundation';
import { Warehouse } from './components/warehouse';
import { WorkerService } from './components/worker-service';
import { readStackConfig } from './config';

/**
 * The docline stack: configuration → components → outputs. Pulumi calls the exported function and
 * publishes what it returns as the stack outputs; tests call it under mocks, once per config.
 *
 * Without `docline:image` the stack stops after the foundation (APIs and the image repository),
 * so the first image can be pushed before the worker service needs it.
 */
async function docline() {
  const config = readStackConfig();
  const { project, prefix } = config;

  const foundation = new Foundation(prefix, { project, region: config.region });
  const after = { dependsOn: foundation.apis };
  const image = config.worker.image;
  if (image === undefined) {
    await pulumi.log.warn(
      `docline:image is not set, so only the APIs and the image repository were declared. Push the worker image ` +
        'to the repository (see the README), run `pulumi config set docline:image IMAGE`, then `pulumi up` again.',
    );
    return { imageRepository: foundation.repositoryUrl };
  }

  const documents = new DocumentBucket(
    `${prefix}-documents`,
    { project, location: config.dataLocation, forceDestroy: !config.deletionProtection },
    after,
  );
  const warehouse = new Warehouse(
    `${prefix}-warehouse`,
    {
      project,
      location: config.dataLocation,
      datasetId: prefix.replaceAll('-', '_'),
      deletionProtection: config.deletionProtection,
    },
    after,
  );
  const pushAudience = `https://${prefix}.docline.invalid/push`;
  const worker = new WorkerService(
    `${prefix}-worker`,
    {
      project,
      region: config.region,
      image,
      bucketName: documents.bucket.name,
      datasetId: warehouse.dataset.datasetId,
      tableRef: warehouse.tableRef,
      dataLocation: config.dataLocation,
      geminiLocation: config.geminiLocation,
      pushAudience,
      settings: config.delivery,
      allowedContentTypes: config.worker.allowedContentTypes,
      concurrency: config.worker.concurrency,
      minInstances: config.worker.minInstances,
      maxInstances: config.worker.maxInstances,
      cpu: config.worker.cpu,
      memory: config.worker.memory,
      logLevel: config.worker.logLevel,
      verifyPushTokenInApp: config.worker.verifyPushTokenInApp,
      deletionProtection: config.deletionProtection,
      accountIdPrefix: prefix,
    },
    after,
  );
  const delivery = new Delivery(
    `${prefix}-delivery`,
    {
      project,
      topic: documents.topic.id,
      pushEndpoint: worker.pushEndpoint,
      audience: pushAudience,
      pushServiceAccountEmail: worker.pushServiceAccount.email,
      pushServiceAccountName: worker.pushServiceAccount.name,
      settings: config.delivery,
    },
    after,
  );
  new Alerts(
    `${prefix}-alerts`,
    {
      project,
      pushSubscriptionName: delivery.subscription.name,
      deadLetterSubscriptionName: delivery.deadLetterSubscription.name,
      serviceName: worker.service.name,
      deadLetterMessagesThreshold: config.alerts.deadLetterMessagesThreshold,
      oldestUnackedAgeSeconds: config.alerts.oldestUnackedAgeSeconds,
      duplicateRateThreshold: config.alerts.duplicateRatePerMille / 1000,
      notificationChannels: [...config.alerts.notificationChannels],
      duplicateObjectsView: warehouse.viewRefs.duplicate_objects,
      datasetId: warehouse.dataset.datasetId,
      dataLocation: config.dataLocation,
      accountIdPrefix: prefix,
    },
    after,
  );

  return {
    imageRepository: foundation.repositoryUrl,
    bucketName: documents.bucket.name,
    topicName: documents.topic.name,
    subscriptionName: delivery.subscription.name,
    deadLetterTopicName: delivery.deadLetterTopic.name,
    deadLetterSubscriptionName: delivery.deadLetterSubscription.name,
    tableId: warehouse.tableRef,
    viewIds: warehouse.viewRefs,
    workerUrl: worker.url,
    workerServiceAccount: worker.serviceAccount.email,
    pushServiceAccount: worker.pushServiceAccount.email,
  };
}

export = docline;
