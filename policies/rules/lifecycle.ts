/**
 * Rules about what happens after the first `up`: a replacement must never double what the pipeline
 * receives. These read the resource options the engine will act on (`args.opts`), which are known
 * in a first preview like in an update.
 */
import type { ResourceValidationPolicy } from '@pulumi/policy';
import { TYPES } from './types';

/**
 * A Cloud Storage notification has no update: every change to it is a replacement, and Pulumi's
 * default replacement creates the new one before it deletes the old. For the length of the update
 * the bucket then has two notifications, and every upload is published twice, each copy with its
 * own messageId: the very doubling `one-notification-per-bucket` exists to stop. `deleteBeforeReplace`
 * deletes first; the few seconds without a notification are closed by reconcile.
 */
export const notificationDeleteBeforeReplace: ResourceValidationPolicy = {
  name: 'notification-delete-before-replace',
  description:
    'Cloud Storage notifications are replaced delete-first (deleteBeforeReplace): a create-before-delete replacement leaves two notifications on the bucket while the update runs.',
  enforcementLevel: 'mandatory',
  validateResource: (args, reportViolation) => {
    if (args.type !== TYPES.notification) return;
    if (args.opts.deleteBeforeReplace === true) return;
    reportViolation(
      `Notification '${args.name}' would be replaced create-before-delete: every field of a notification forces a replacement, and while the update runs the bucket would have two notifications, publishing every upload twice. Give it the resource option deleteBeforeReplace: true (the seconds without a notification are found by reconcile).`,
    );
  },
};
