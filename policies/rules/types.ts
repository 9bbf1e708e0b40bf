/**
 * Pulumi type tokens of the resources the rules look at. Plain strings keep the pack free of the
 * provider SDK at run time; a test checks each one against the `@pulumi/gcp` class it names.
 */
export const TYPES = {
  bucket: 'gcp:storage/bucket:Bucket',
  notification: 'gcp:storage/notification:Notification',
  topic: 'gcp:pubsub/topic:Topic',
  subscription: 'gcp:pubsub/subscription:Subscription',
  table: 'gcp:bigquery/table:Table',
  dataset: 'gcp:bigquery/dataset:Dataset',
  runService: 'gcp:cloudrunv2/service:Service',
  runServiceIamMember: 'gcp:cloudrunv2/serviceIamMember:ServiceIamMember',
  runServiceIamBinding: 'gcp:cloudrunv2/serviceIamBinding:ServiceIamBinding',
  runServiceIamPolicy: 'gcp:cloudrunv2/serviceIamPolicy:ServiceIamPolicy',
  runV1Service: 'gcp:cloudrun/service:Service',
  runV1IamMember: 'gcp:cloudrun/iamMember:IamMember',
  runV1IamBinding: 'gcp:cloudrun/iamBinding:IamBinding',
  runV1IamPolicy: 'gcp:cloudrun/iamPolicy:IamPolicy',
  projectIamMember: 'gcp:projects/iAMMember:IAMMember',
  projectIamBinding: 'gcp:projects/iAMBinding:IAMBinding',
  projectIamPolicy: 'gcp:projects/iAMPolicy:IAMPolicy',
} as const;

/** The Cloud Run service types a push subscription can target. */
export const RUN_SERVICE_TYPES: readonly string[] = [TYPES.runService, TYPES.runV1Service];
