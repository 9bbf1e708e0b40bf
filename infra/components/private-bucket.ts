import * as gcp from '@pulumi/gcp';
import type * as pulumi from '@pulumi/pulumi';
import type { DataArgs } from './component';

/**
 * The label that tells the stack's buckets apart; the policy pack lets only the `documents` bucket
 * carry a notification (only it may feed the pipeline).
 */
export const BUCKET_ROLE_LABEL = 'docline-role';

/** Arguments of a component that holds a {@link privateBucket}. */
export interface PrivateBucketArgs extends DataArgs {
  /** Let `pulumi destroy` delete the bucket with its objects (development stacks only). Default false. */
  forceDestroy?: pulumi.Input<boolean>;
}

/** What tells one private bucket from another. */
export interface PrivateBucketSettings {
  /** Its {@link BUCKET_ROLE_LABEL}. */
  role: 'documents' | 'memo';
  /** Its name; unset, Pulumi derives one from the resource name. */
  name?: pulumi.Input<string>;
  /** How long a deleted or overwritten object can be restored (0: not at all). */
  softDeleteSeconds: number;
  lifecycleRules?: pulumi.Input<pulumi.Input<gcp.types.input.storage.BucketLifecycleRule>[]>;
  /** Labels beside {@link BUCKET_ROLE_LABEL}. */
  labels?: Record<string, string>;
  /** A retention policy, locked only when the stack's configuration says so. Unset: none. */
  retentionPolicy?: gcp.types.input.storage.BucketRetentionPolicy;
}

/**
 * A bucket reachable through IAM only, whatever the project's defaults: uniform bucket-level access
 * (no object ACLs) and public access prevention enforced. Soft delete is always stated, never left
 * to the project default, so that what can be restored (and is billed) is decided here.
 */
export function privateBucket(
  name: string,
  args: PrivateBucketArgs,
  bucket: PrivateBucketSettings,
  opts: pulumi.CustomResourceOptions,
): gcp.storage.Bucket {
  return new gcp.storage.Bucket(
    name,
    {
      project: args.project,
      name: bucket.name,
      location: args.location,
      uniformBucketLevelAccess: true,
      publicAccessPrevention: 'enforced',
      forceDestroy: args.forceDestroy ?? false,
      softDeletePolicy: { retentionDurationSeconds: bucket.softDeleteSeconds },
      lifecycleRules: bucket.lifecycleRules,
      retentionPolicy: bucket.retentionPolicy,
      labels: { ...bucket.labels, [BUCKET_ROLE_LABEL]: bucket.role },
    },
    opts,
  );
}
