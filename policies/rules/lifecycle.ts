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

/**
 * What a resource says about keeping its data, from its own inputs: a bucket that `destroy` may not
 * empty (`forceDestroy: false`), a dataset whose tables it may not delete (`deleteContentsOnDestroy:
 * false`), a table BigQuery refuses to delete (`deletionProtection: true`). Only explicit values
 * count (docline always states them); undefined: the resource does not say.
 */
function keepsData(type: string, props: Record<string, unknown>): string | undefined {
  if (type === TYPES.bucket) {
    const labels = props.labels as Record<string, unknown> | undefined;
    // The label `only-documents-bucket-notifies` tells the documents bucket by (its default).
    return labels?.['docline-role'] === 'documents' && props.forceDestroy === false
      ? 'keeps the documents (forceDestroy: false)'
      : undefined;
  }
  if (type === TYPES.dataset) {
    return props.deleteContentsOnDestroy === false
      ? 'keeps its tables (deleteContentsOnDestroy: false)'
      : undefined;
  }
  if (type === TYPES.table) {
    return props.view === undefined && props.deletionProtection === true
      ? 'keeps its rows (deletionProtection: true)'
      : undefined;
  }
  return undefined;
}

/**
 * Data that is kept must also be protected from replacement. Retaining alone is not enough: a
 * replaced documents bucket is a new, empty, auto-named one that the notification, the grants and
 * reconcile move to while uploaders keep writing to the old one; a replaced table (pulumi-gcp replaces
 * tables delete-first) leaves the state and fails every later `up` with 409. With `protect`, a change
 * that would replace it stops the preview instead. The pack cannot read `retainOnDelete`
 * (@pulumi/policy does not pass it), so "kept" is read from the resource's own inputs.
 */
export const keptDataProtected: ResourceValidationPolicy = {
  name: 'kept-data-protected',
  description:
    'The documents bucket, the dataset and the table, when they keep their data, are protected (protect), so that no change replaces them silently.',
  enforcementLevel: 'mandatory',
  validateResource: (args, reportViolation) => {
    const kept = keepsData(args.type, args.props as Record<string, unknown>);
    if (kept === undefined || args.opts.protect) return;
    reportViolation(
      `'${args.name}' ${kept} but is not protected: a change that forces its replacement would swap in a new, empty resource (a bucket the uploaders do not write to, or a table dropped from the state that fails every later up with 409). Give it the resource option protect: true (docline: deletionProtection), and migrate on purpose (docs/deploy.md, "Lifecycle").`,
    );
  },
};
