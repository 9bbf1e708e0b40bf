import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';

/** The one event type docline turns into work. */
export const NOTIFIED_EVENT_TYPE = 'OBJECT_FINALIZE';

/** Arguments of {@link DocumentBucket}. */
export interface DocumentBucketArgs {
  project: pulumi.Input<string>;
  /** Bucket location: a multi-region such as EU, or a region. */
  location: pulumi.Input<string>;
  /** Let `pulumi destroy` delete the bucket with its objects (development stacks only). Default false. */
  forceDestroy?: pulumi.Input<boolean>;
}

/**
 * The upload bucket and the topic it announces new objects on, through exactly one notification
 * (OBJECT_FINALIZE only, JSON_API_V1). A second notification would publish every upload twice,
 * each copy with its own messageId, so this component is the only place that creates one.
 */
export class DocumentBucket extends pulumi.ComponentResource {
  readonly bucket: gcp.storage.Bucket;
  readonly topic: gcp.pubsub.Topic;
  readonly notification: gcp.storage.Notification;
  /** Publisher grant of the Cloud Storage service agent on the topic. */
  readonly publisherGrant: gcp.pubsub.TopicIAMMember;

  constructor(name: string, args: DocumentBucketArgs, opts?: pulumi.ComponentResourceOptions) {
    super('docline:index:DocumentBucket', name, {}, opts);
    // Children inherit the component's dependsOn (the APIs): Pulumi does not pass it down by itself.
    const child: pulumi.CustomResourceOptions = { parent: this, dependsOn: opts?.dependsOn };
    this.bucket = new gcp.storage.Bucket(
      `${name}-bucket`,
      {
        project: args.project,
        location: args.location,
        uniformBucketLevelAccess: true,
        publicAccessPrevention: 'enforced',
        forceDestroy: args.forceDestroy ?? false,
      },
      child,
    );
    this.topic = new gcp.pubsub.Topic(`${name}-uploads`, { project: args.project }, child);

    // The Cloud Storage service agent publishes the notifications; without this grant the
    // notification cannot be created.
    const storageAgent = gcp.storage.getProjectServiceAccountOutput(
      { project: args.project },
      { parent: this },
    );
    this.publisherGrant = new gcp.pubsub.TopicIAMMember(
      `${name}-storage-publisher`,
      {
        project: args.project,
        topic: this.topic.name,
        role: 'roles/pubsub.publisher',
        member: pulumi.interpolate`serviceAccount:${storageAgent.emailAddress}`,
      },
      child,
    );
    this.notification = new gcp.storage.Notification(
      `${name}-notification`,
      {
        // The bucket's name output (not a string) keeps the dependency on the bucket resource, which
        // the policy pack uses to count notifications per bucket even while the name is unknown.
        bucket: this.bucket.name,
        topic: this.topic.id,
        payloadFormat: 'JSON_API_V1',
        eventTypes: [NOTIFIED_EVENT_TYPE],
      },
      { parent: this, dependsOn: [this.publisherGrant] },
    );
    this.registerOutputs({
      bucketName: this.bucket.name,
      topicName: this.topic.name,
      notificationId: this.notification.notificationId,
    });
  }
}
