import type * as gcp from '@pulumi/gcp';
import type * as pulumi from '@pulumi/pulumi';
import { DoclineComponent } from './component';
import { type PrivateBucketArgs, privateBucket } from './private-bucket';

/** Arguments of {@link MemoBucket}. */
export interface MemoBucketArgs extends PrivateBucketArgs {
  /**
   * The bucket's name. Given rather than generated so that it is known at preview: the worker's
   * environment (MEMO_BUCKET) is then known too, and the policy pack can check it.
   */
  name: pulumi.Input<string>;
  /** Entries are deleted this many days after they were written (the redelivery window: past it, a delivery is new work anyway). */
  expiryDays: pulumi.Input<number>;
  /** Labels beside its role: the deployed fixed settings (infra/stack-guards.ts, FIXED_SETTING_LABELS). */
  labels?: Record<string, string>;
}

/**
 * The memo of paid analyses, so that a redelivery never pays for the same analysis twice: a
 * private bucket of create-only entries keyed by a hash of the dedup key. It is a cache,
 * never a claim, so it has no notification (only the documents bucket feeds the pipeline; the
 * policy pack enforces it) and no soft delete (an expired entry is worth nothing).
 */
export class MemoBucket extends DoclineComponent {
  readonly bucket: gcp.storage.Bucket;

  constructor(name: string, args: MemoBucketArgs, opts?: pulumi.ComponentResourceOptions) {
    super('docline:index:MemoBucket', name, opts);
    this.bucket = privateBucket(
      `${name}-bucket`,
      args,
      {
        role: 'memo',
        name: args.name,
        softDeleteSeconds: 0,
        lifecycleRules: [{ action: { type: 'Delete' }, condition: { age: args.expiryDays } }],
        ...(args.labels === undefined ? {} : { labels: args.labels }),
      },
      this.child,
    );
    this.registerOutputs({ bucketName: this.bucket.name });
  }
}
