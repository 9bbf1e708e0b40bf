import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';
import { DoclineComponent, type ProjectArgs, renamedChildAliases } from './component';
import { keptData } from './lifecycle';

/** Days the regional log bucket keeps entries: Cloud Logging's default retention, stated. */
export const LOG_RETENTION_DAYS = 30;

/** Arguments of {@link RegionalLogs}. */
export interface RegionalLogsArgs extends ProjectArgs {
  /** The stack's prefix: the log bucket's, sink's and exclusion's ids. */
  prefix: string;
  /** The stack's region: where the log entries are stored. */
  region: string;
  /**
   * Log filters of the stack's processes whose lines name documents (the worker service, the
   * reconcile job), each scoped to this stack's resource; they are joined with OR.
   */
  sources: pulumi.Input<string>[];
  /** The stack's deletionProtection: `destroy` then leaves the log bucket and its entries in the project. */
  keepData: boolean;
  /**
   * The component's name when the stack first created the log bucket ({@link renamedChildAliases}):
   * it keeps its URN if the component is renamed.
   */
  stableName?: string;
}

/** The type token of {@link RegionalLogs}; part of the log bucket's URN, so never changed. */
export const REGIONAL_LOGS_TYPE = 'docline:index:RegionalLogs';

/**
 * Residency of the logs that name documents. Cloud Logging stores everything in the `_Default`
 * bucket, which is global; the project-wide `_Default` sink is shared by every stack of the project,
 * so this stack does not take it over. Instead it routes its own processes' lines to a log bucket of
 * its own in the stack's region (a sink), and excludes the same lines from the `_Default` sink (a
 * project exclusion, which applies to `_Default`). User-defined log-based metrics are computed from
 * every entry the project receives, before exclusions, so the stack's metrics and alerts still see
 * them. Log buckets are deleted with a 7-day grace period, during which their id cannot be reused.
 */
export class RegionalLogs extends DoclineComponent {
  readonly bucket: gcp.logging.ProjectBucketConfig;

  constructor(name: string, args: RegionalLogsArgs, opts?: pulumi.ComponentResourceOptions) {
    super(REGIONAL_LOGS_TYPE, name, opts);
    const bucketId = `${args.prefix}-logs`;
    this.bucket = new gcp.logging.ProjectBucketConfig(
      `${name}-bucket`,
      {
        project: args.project,
        location: args.region,
        bucketId,
        retentionDays: LOG_RETENTION_DAYS,
        description: `${args.prefix}: log lines that name documents, kept in ${args.region}`,
      },
      {
        ...this.child,
        ...keptData(args.keepData),
        aliases: renamedChildAliases(name, args.stableName, REGIONAL_LOGS_TYPE, (c) => `${c}-bucket`),
      },
    );
    // Any of the sources.
    const filter = pulumi.all(args.sources).apply((all) => all.map((source) => `(${source})`).join(' OR '));
    const sink = new gcp.logging.ProjectSink(
      `${name}-sink`,
      {
        project: args.project,
        name: `${args.prefix}-documents`,
        // A log bucket of the same project needs no grant for the sink's writer.
        destination: pulumi.interpolate`logging.googleapis.com/projects/${args.project}/locations/${args.region}/buckets/${bucketId}`,
        filter,
        description: `${args.prefix}: the worker's and reconcile's lines, to the regional log bucket`,
      },
      this.childAfter(this.bucket),
    );
    // Excluded from `_Default` only once the sink routes them: no line is stored nowhere.
    new gcp.logging.ProjectExclusion(
      `${name}-default-exclusion`,
      {
        project: args.project,
        name: `${args.prefix}-documents`,
        description: `${args.prefix}: stored in the regional bucket ${bucketId} instead of the global _Default bucket`,
        filter,
      },
      this.childAfter(sink),
    );
    this.registerOutputs({ logBucket: this.bucket.name });
  }
}
