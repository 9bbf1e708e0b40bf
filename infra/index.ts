import { join } from 'node:path';
import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';
import { Alerts, type ObservedPipelineArgs, workerLogs } from './components/alerts';
import { firstComponentNames } from './components/component';
import { Dashboard } from './components/dashboard';
import { Delivery } from './components/delivery';
import { DocumentBucket } from './components/document-bucket';
import { Foundation } from './components/foundation';
import { MemoBucket } from './components/memo-bucket';
import { OperationsAlerts } from './components/operations-alerts';
import { Reconcile } from './components/reconcile';
import { RegionalLogs } from './components/regional-logs';
import { Warehouse } from './components/warehouse';
import { WorkerImage } from './components/worker-image';
import { foreignImageRepository, WorkerService } from './components/worker-service';
import { readStackConfig, StackConfigError } from './config';
import {
  type FixedSettings,
  fixedSettingLabels,
  knobChangeProblems,
  promotedImageProblems,
  type RetentionSettings,
  readDeployed,
  readFixedSettingsFromCloud,
  retentionDecreaseProblems,
  retentionLockProblems,
  tableVersionProblems,
} from './stack-guards';

/** The repository root on this machine: read for the image's content tag, never an input. */
const REPO_ROOT = join(__dirname, '..');

/**
 * The docline stack: configuration → components → outputs, in one `pulumi up` from an empty
 * project. Pulumi calls the exported function and publishes what it returns as the stack outputs;
 * tests call it under mocks, once per config.
 *
 * Every order the cloud needs is a dependency the engine sees (docs/deploy.md lists them): the APIs
 * before everything, data lookups included; the worker's grants before the service; the push
 * account's grants before the push subscription; the push subscription before the notification;
 * grants and table before the scheduled check; a settling wait before alerts on new log metrics.
 * docs/deploy.md's lifecycle table says what each later `up`, replacement and `destroy` does.
 */
async function docline() {
  const config = readStackConfig();
  const { project, prefix } = config;
  // What the data-bearing children were first created under: they keep those URNs (aliases).
  const first = firstComponentNames(config.stack);

  // What the last `up` deployed, read before anything is declared: a knob fixed at deploy that
  // changed, or a promoted-image stack with no image, stops the run before the engine acts.
  const deployed = await readDeployed();
  const fixed: FixedSettings = {
    dedupKeyMode: config.delivery.dedupKeyMode,
    region: config.region,
    dataLocation: config.dataLocation,
  };
  const retention: RetentionSettings = {
    messageRetentionSeconds: config.delivery.messageRetentionSeconds,
    deadLetterRetentionSeconds: config.delivery.deadLetterRetentionSeconds,
  };
  const documentRetention = {
    years: config.keeping.documentRetentionYears,
    locked: config.keeping.documentRetentionLocked,
  };
  // No outputs yet (a first `up`, or one that failed before writing them): what the cloud says.
  const memoBucketName = `${prefix}-memo-${project}`;
  const deployedSettings = deployed.settings ?? (await readFixedSettingsFromCloud(memoBucketName));
  const guardProblems = [
    ...knobChangeProblems(deployedSettings, fixed, config.keeping.allowKnobChange),
    ...retentionDecreaseProblems(deployed.retention, retention, config.keeping.allowKnobChange),
    ...retentionLockProblems(deployed.documentRetention, documentRetention),
    ...tableVersionProblems(deployed.tableVersion, config.keeping.tableVersion),
    ...(config.keeping.promotedImage ? promotedImageProblems(config.worker.image, deployed.image) : []),
  ];
  if (guardProblems.length > 0) throw new StackConfigError(guardProblems);
  // A promoted-image stack never builds: the image CI promoted, else the one it runs now.
  const givenImage = config.worker.image ?? (config.keeping.promotedImage ? deployed.image : undefined);

  const projectNumber = () => gcp.organizations.getProjectOutput({ projectId: project }, after).number;
  const imageRepositoryOf = (ref: string | undefined) => {
    const repository = foreignImageRepository(ref, project);
    return repository === undefined
      ? {}
      : { imageRepository: { repository, projectNumber: projectNumber() } };
  };

  // deletionProtection: destroy keeps the data (documents, rows, logs), and the delivery path is
  // protected from replacement.
  const keepData = config.deletionProtection;
  const foundation = new Foundation(prefix, {
    project,
    region: config.region,
    buildsImage: givenImage === undefined,
  });
  const after = { dependsOn: foundation.apis };
  // docline:image set: that image as it is (CI built it and pushed it to a repository outside the
  // stack). Unset: built here, tagged by content, pushed to the stack's own repository.
  const image =
    givenImage ??
    new WorkerImage(
      `${prefix}-image`,
      { repositoryUrl: foundation.repositoryUrl!, region: config.region, root: REPO_ROOT },
      { dependsOn: [...foundation.apis, foundation.repository!] },
    ).ref;

  const documents = new DocumentBucket(
    `${prefix}-documents`,
    {
      project,
      location: config.dataLocation,
      region: config.region,
      forceDestroy: !config.deletionProtection,
      keepData,
      retentionYears: documentRetention.years,
      retentionLocked: documentRetention.locked,
      messageRetentionSeconds: config.delivery.messageRetentionSeconds,
      stableName: first.documents,
    },
    after,
  );
  const memo = new MemoBucket(
    `${prefix}-memo`,
    {
      project,
      name: memoBucketName,
      location: config.dataLocation,
      expiryDays: config.delivery.redeliveryWindowDays,
      labels: fixedSettingLabels(fixed),
      // A cache of paid analyses, never a document: destroy empties it rather than failing on it.
      forceDestroy: true,
    },
    after,
  );
  const warehouse = new Warehouse(
    `${prefix}-warehouse`,
    {
      project,
      location: config.dataLocation,
      datasetId: prefix.replaceAll('-', '_'),
      deletionProtection: config.deletionProtection,
      tableVersion: config.keeping.tableVersion,
      stableName: first.warehouse,
    },
    after,
  );
  const pushAudience = `https://${prefix}.docline.invalid/push`;
  const worker = new WorkerService(
    `${prefix}-worker`,
    {
      config,
      image,
      bucketName: documents.bucket.name,
      memoBucketName: memo.bucket.name,
      datasetId: warehouse.dataset.datasetId,
      tableRef: warehouse.tableRef,
      table: warehouse.table,
      pushAudience,
      ...imageRepositoryOf(givenImage),
    },
    after,
  );
  const delivery = new Delivery(
    `${prefix}-delivery`,
    {
      project,
      region: config.region,
      keepData,
      topic: documents.topic.id,
      bucketName: documents.bucket.name,
      notificationNeeds: [documents.publisherGrant],
      pushNeeds: [worker.invokerGrant],
      pushEndpoint: worker.pushEndpoint,
      audience: pushAudience,
      // The notification keeps the URN it has under this name if the component is ever renamed.
      stableName: first.delivery,
      pushServiceAccountEmail: worker.pushServiceAccount.email,
      pushServiceAccountName: worker.pushServiceAccount.name,
      settings: config.delivery,
    },
    after,
  );
  // The alerts watch and the dashboard charts the same subscriptions and service.
  const observed: ObservedPipelineArgs = {
    project,
    prefix,
    serviceName: worker.service.name,
    pushSubscriptionName: delivery.subscription.name,
    deadLetterSubscriptionName: delivery.deadLetterSubscription.name,
  };
  const alerts = new Alerts(
    `${prefix}-alerts`,
    {
      ...observed,
      notificationChannels: [...config.alerts.notificationChannels],
      tableRef: warehouse.tableRef,
      table: warehouse.table,
      duplicateObjectsView: warehouse.views.duplicate_objects,
      redeliveryWindowDays: config.delivery.redeliveryWindowDays,
      datasetId: warehouse.dataset.datasetId,
      dataLocation: config.dataLocation,
    },
    after,
  );
  const dashboard = new Dashboard(
    `${prefix}-dashboard`,
    {
      ...observed,
      allAnswersMetric: alerts.allAnswers.name,
      duplicateAnswersMetric: alerts.duplicateAnswers.name,
      workerServiceAccountEmail: worker.serviceAccount.email,
    },
    after,
  );
  const reconcileMode = config.reconcile.mode;
  const reconcile =
    reconcileMode === 'off'
      ? undefined
      : new Reconcile(
          `${prefix}-reconcile`,
          {
            project,
            region: config.region,
            image,
            mode: reconcileMode,
            maximumBytesBilled: config.delivery.maximumBytesBilled,
            bucketName: documents.bucket.name,
            topicName: documents.topic.name,
            tableRef: warehouse.tableRef,
            datasetId: warehouse.dataset.datasetId,
            dataLocation: config.dataLocation,
            dedupKeyMode: config.delivery.dedupKeyMode,
            notificationChannels: [...config.alerts.notificationChannels],
            accountIdPrefix: prefix,
          },
          after,
        );

  // The golden signals the per-message alerts cannot see, and the monthly budget.
  new OperationsAlerts(
    `${prefix}-operations`,
    {
      project,
      prefix,
      serviceName: worker.service.name,
      uploadsTopicName: documents.topic.name,
      allAnswersMetric: alerts.allAnswers.name,
      allAnswersSettled: alerts.metricsSettled,
      duplicateCheckConfigName: alerts.duplicateObjectsCheck.name,
      ...(reconcile === undefined ? {} : { reconcileJobName: reconcile.job.name }),
      notificationChannels: [...config.alerts.notificationChannels],
      ...(config.budget === undefined
        ? {}
        : {
            budget: {
              ...config.budget,
              projectNumber: projectNumber(),
            },
          }),
    },
    after,
  );

  const logs = new RegionalLogs(
    `${prefix}-logs`,
    {
      project,
      prefix,
      region: config.region,
      keepData,
      stableName: first.logs,
      sources: [
        workerLogs(worker.service.name),
        ...(reconcile === undefined
          ? []
          : [
              pulumi.interpolate`resource.type = "cloud_run_job" AND resource.labels.job_name = "${reconcile.job.name}"`,
            ]),
      ],
    },
    after,
  );

  return {
    ...(foundation.repositoryUrl === undefined ? {} : { imageRepository: foundation.repositoryUrl }),
    image: pulumi.output(image),
    bucketName: documents.bucket.name,
    memoBucketName: memo.bucket.name,
    topicName: documents.topic.name,
    subscriptionName: delivery.subscription.name,
    deadLetterTopicName: delivery.deadLetterTopic.name,
    deadLetterSubscriptionName: delivery.deadLetterSubscription.name,
    tableId: warehouse.tableRef,
    viewIds: warehouse.viewRefs,
    workerUrl: worker.url,
    // Read by the deploy canary (npm run canary): whose lines to look for, and where they are kept.
    workerServiceName: worker.service.name,
    logBucket: logs.bucket.name,
    workerServiceAccount: worker.serviceAccount.email,
    pushServiceAccount: worker.pushServiceAccount.email,
    dashboardUrl: dashboard.url,
    ...(reconcile === undefined ? {} : { reconcileJobName: reconcile.job.name }),
    // Read back by the next run (stack-guards.ts): the knobs that may not change in place.
    deployedSettings: fixed,
    deployedRetention: retention,
    documentRetention,
    tableVersion: config.keeping.tableVersion,
  };
}

export = docline;
