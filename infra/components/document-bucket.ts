import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';
import { durationString } from '../../worker/src/contract/settings';
import { DoclineComponent, renamedChildAliases } from './component';
import { guarded, keptData } from './lifecycle';
import { type PrivateBucketArgs, privateBucket } from './private-bucket';

/**
 * Soft delete, stated rather than left to the project default: a deleted or overwritten invoice can
 * be restored for 7 days (the minimum when it is on), billed as storage meanwhile.
 */
export const DOCUMENTS_SOFT_DELETE_SECONDS = 7 * 24 * 60 * 60;

/** Arguments of {@link DocumentBucket}. */
export interface DocumentBucketArgs extends PrivateBucketArgs {
  /** The stack's region: the only region Pub/Sub may store the topic's messages in (they name documents). */
  region: string;
  /**
   * The stack's deletionProtection: `destroy` leaves the bucket and its documents in the project,
   * and the engine refuses to replace or delete the topic (its subscriptions would lose their feed).
   */
  keepData: boolean;
  /**
   * Years no document can be deleted or overwritten (a bucket retention policy, unlocked); 0 or
   * unset: none. docs/deploy.md, "Keeping documents for years", says which rules ask for it.
   */
  retentionYears?: number;
  /** Lock that retention policy (docline:documentRetentionLocked); see {@link documentRetention}. */
  retentionLocked?: boolean;
  /**
   * How long the uploads topic itself keeps every message it received, acknowledged or not: the
   * push subscription's retention (`messageRetentionSeconds`), so that a subscription created to
   * replace it can be seeked back over the swap (`gcloud pubsub subscriptions seek NEW --time=T`).
   */
  messageRetentionSeconds: number;
  /**
   * The component's name when the stack first created the bucket ({@link renamedChildAliases}):
   * the bucket keeps its URN, and so its state and its auto-name, if the component is renamed.
   */
  stableName?: string;
}

/** The type token of {@link DocumentBucket}; part of the bucket's URN, so never changed. */
export const DOCUMENT_BUCKET_TYPE = 'docline:index:DocumentBucket';

/**
 * The retention policy of `years` calendar years (leap days counted up), or none for 0, locked when
 * `locked`. The lock is part of the program, never an operator's hand-run command: the provider
 * forces a new bucket when the deployed policy is locked and the program's is not
 * (`customdiff.ForceNewIfChange("retention_policy.0.is_locked", isPolicyLocked)`, old locked and new
 * unlocked, terraform-provider-google google/services/storage/resource_storage_bucket.go), so a lock
 * made by hand turns the next refresh or update into a replacement, which `protect` then stops on
 * every `up`. With `isLocked` the provider locks it itself on the update that sets it.
 */
export function documentRetention(
  years: number,
  locked = false,
): { retentionPeriod: string; isLocked: boolean } | undefined {
  if (years <= 0) return undefined;
  return { retentionPeriod: String(Math.ceil(years * 365.25) * 24 * 60 * 60), isLocked: locked };
}

/**
 * The message storage policy of a docline topic: its messages are stored at rest in the stack's
 * region only. In-transit enforcement stays off, deliberately. With `enforceInTransit`, Pub/Sub
 * rejects with FAILED_PRECONDITION a publish received in a region the policy does not allow, and
 * handles push delivery only inside the allowed regions (Pub/Sub, "Restrict Pub/Sub resource
 * locations"). The publishers of these topics are Google's own: Cloud Storage publishes a bucket's
 * notifications, Pub/Sub forwards dead letters, and neither documents the region it publishes from
 * (for a bucket in the EU multi-region, any of its regions). A refused notification publish leaves
 * no error anywhere the stack can see: every upload would be lost in silence. So no publish or
 * delivery is made to depend on an undocumented region; the canary after each deploy
 * (`npm run canary`) is what shows a notification reaching the worker.
 */
export function regionalStorage(region: string): {
  allowedPersistenceRegions: string[];
  enforceInTransit: boolean;
} {
  return { allowedPersistenceRegions: [region], enforceInTransit: false };
}

/**
 * The upload bucket and the topic it announces new objects on. The one notification that links them
 * (OBJECT_FINALIZE only, JSON_API_V1) is created by {@link Delivery}, after the push subscription:
 * a topic with no subscription drops what it receives, so uploads made during the first deploy
 * would be lost.
 */
export class DocumentBucket extends DoclineComponent {
  readonly bucket: gcp.storage.Bucket;
  readonly topic: gcp.pubsub.Topic;
  /** Publisher grant of the Cloud Storage service agent on the topic; the notification needs it. */
  readonly publisherGrant: gcp.pubsub.TopicIAMMember;

  constructor(name: string, args: DocumentBucketArgs, opts?: pulumi.ComponentResourceOptions) {
    super(DOCUMENT_BUCKET_TYPE, name, opts);
    this.bucket = privateBucket(
      `${name}-bucket`,
      args,
      {
        role: 'documents',
        softDeleteSeconds: DOCUMENTS_SOFT_DELETE_SECONDS,
        retentionPolicy: documentRetention(args.retentionYears ?? 0, args.retentionLocked ?? false),
      },
      {
        ...this.child,
        ...keptData(args.keepData),
        aliases: renamedChildAliases(name, args.stableName, DOCUMENT_BUCKET_TYPE, (c) => `${c}-bucket`),
      },
    );
    this.topic = new gcp.pubsub.Topic(
      `${name}-uploads`,
      {
        project: args.project,
        messageStoragePolicy: regionalStorage(args.region),
        messageRetentionDuration: durationString(args.messageRetentionSeconds),
      },
      { ...this.child, ...guarded(args.keepData) },
    );

    // The Cloud Storage service agent publishes the notifications; without this grant the
    // notification cannot be created.
    // A data lookup waits for the APIs like a resource does (the storage API answers it).
    const storageAgent = gcp.storage.getProjectServiceAccountOutput({ project: args.project }, this.child);
    this.publisherGrant = new gcp.pubsub.TopicIAMMember(
      `${name}-storage-publisher`,
      {
        project: args.project,
        topic: this.topic.name,
        role: 'roles/pubsub.publisher',
        member: pulumi.interpolate`serviceAccount:${storageAgent.emailAddress}`,
      },
      this.child,
    );
    this.registerOutputs({
      bucketName: this.bucket.name,
      topicName: this.topic.name,
    });
  }
}
