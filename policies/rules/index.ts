/**
 * The docline policy list. `policies/index.ts` hands it to `new PolicyPack(...)`; tests import it
 * from here, because constructing the pack starts a gRPC server that takes the process.
 */
import type { Policies } from '@pulumi/policy';
import {
  ackDeadlineCoversWorkerTimeout,
  deadLetterTopicSubscribed,
  pushSubscriptionDelivery,
} from './delivery';
import { noPrimitiveRoles, noProjectWideTokenCreator } from './iam';
import { keptDataProtected, notificationDeleteBeforeReplace } from './lifecycle';
import { liveBucketNotifications, liveBucketNotificationsUnchecked } from './live';
import {
  notificationFormat,
  notifiedTopicTakesPublishes,
  oneNotificationPerBucket,
  onlyDocumentsBucketNotifies,
} from './notifications';
import { workerNotPublic } from './service';
import { dedupTableLayout } from './warehouse';

/** Every policy of the pack, from the notification that feeds the pipeline to the grants it runs with. */
export const policies: Policies = [
  oneNotificationPerBucket,
  notificationFormat,
  onlyDocumentsBucketNotifies,
  notifiedTopicTakesPublishes,
  notificationDeleteBeforeReplace,
  keptDataProtected,
  pushSubscriptionDelivery,
  ackDeadlineCoversWorkerTimeout,
  deadLetterTopicSubscribed,
  dedupTableLayout,
  workerNotPublic,
  noPrimitiveRoles,
  noProjectWideTokenCreator,
  liveBucketNotifications,
  liveBucketNotificationsUnchecked,
];
