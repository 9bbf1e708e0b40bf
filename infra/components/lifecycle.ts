import type * as pulumi from '@pulumi/pulumi';
import * as time from '@pulumiverse/time';

/**
 * How long alert policies wait after the log-based metrics they read are created. Cloud Monitoring
 * learns a new `logging.googleapis.com/user/…` metric only after Cloud Logging created it, and an
 * alert policy on it is refused until then; the API's own error says a new log metric can take up
 * to 10 minutes to become available (hashicorp/terraform-provider-google#11102, in the provider
 * pulumi-gcp wraps). A Sleep is a resource the engine tracks, so the wait happens once, on create,
 * and again only when a metric is replaced; it runs beside the rest of the first `up`.
 */
export const LOG_METRIC_SETTLE_DURATION = '600s';

/**
 * How long a first use of a new IAM grant waits. Google documents that a grant usually takes effect
 * within two minutes and sometimes seven or more; the provider does not retry a permission error.
 * Three first uses cannot afford it: the worker's first revision (its startup probe reads the table;
 * a failed probe fails the create), the scheduled duplicate check (a failed first run opens an
 * incident that stays a day) and the bucket notification (Cloud Storage refuses to create it unless
 * its agent may publish to the topic). Early pushes need no wait: Pub/Sub retries a refused push.
 */
export const IAM_PROPAGATION_DURATION = '420s';

/**
 * A declared wait after `grants`: the Sleep is created after them, and replaced (so waits again)
 * only when one of them is replaced, never on an update that changes nothing.
 */
export function grantsSettled(
  name: string,
  grants: readonly pulumi.CustomResource[],
  opts: pulumi.CustomResourceOptions,
): time.Sleep {
  const triggers = Object.fromEntries(grants.map((grant, i) => [`grant${i}`, grant.id]));
  const dependsOn = [...((opts.dependsOn as pulumi.Input<pulumi.Resource>[] | undefined) ?? []), ...grants];
  return new time.Sleep(name, { createDuration: IAM_PROPAGATION_DURATION, triggers }, { ...opts, dependsOn });
}

/**
 * Options of a resource whose replacement would drop messages that are documents not yet recorded
 * (the topics and subscriptions of the delivery path): with `protect` (the stack's
 * deletionProtection) the engine refuses to replace or delete it, so a change that would replace it
 * stops the `up` before anything happens (docs/deploy.md, "Lifecycle", says what to do then).
 */
export function guarded(protect: boolean): Pick<pulumi.CustomResourceOptions, 'protect'> {
  return { protect };
}

/**
 * Options of a resource that holds documents or what was derived from them (the documents bucket,
 * the dataset, the table, the regional log bucket), in a stack that keeps its data: `destroy` and a
 * removal leave it in the project instead of deleting it (`retainOnDelete`), and the engine refuses
 * to replace or delete it (`protect`). Without `protect`, a change that forces a replacement of a
 * retained resource drops it from the state and creates a new one: an empty bucket that the pipeline
 * then watches while uploaders keep writing to the old one, or a table whose creation fails on
 * "already exists" on every later `up` (pulumi-gcp replaces BigQuery tables delete-first).
 * docs/deploy.md, "Lifecycle", says what to do when the `up` stops on it.
 */
export function keptData(keep: boolean): Pick<pulumi.CustomResourceOptions, 'retainOnDelete' | 'protect'> {
  return { retainOnDelete: keep, ...guarded(keep) };
}
