import {
  DEDUP_KEY_MODES,
  DELIVERY_DEFAULTS,
  type DedupKeyMode,
  MIN_MAXIMUM_BYTES_BILLED,
} from '../contract/settings';
import { DEFAULT_OLDER_THAN_MS, parseDuration, ReconcileError } from './reconcile';

/**
 * The cloud target's configuration, read from the environment (the same variables as
 * `npm run e2e -- --target cloud`, plus the worker's DEDUP_KEY and MAXIMUM_BYTES_BILLED). Every
 * problem is listed in one error. The job also reads what to do from RECONCILE_* variables.
 */
export interface CloudReconcileConfig {
  project: string;
  bucket: string;
  /** Topic id or `projects/P/topics/T`. */
  topic: string;
  /** `project.dataset.table`. */
  table: string;
  location: string | undefined;
  maximumBytesBilled: number;
  dedupKeyMode: DedupKeyMode;
}

export const CLOUD_VARIABLES = [
  'DOCLINE_PROJECT',
  'DOCLINE_BUCKET',
  'DOCLINE_TOPIC',
  'DOCLINE_TABLE',
] as const;

export function cloudConfig(env: NodeJS.ProcessEnv): CloudReconcileConfig {
  const problems: string[] = [];
  const missing = CLOUD_VARIABLES.filter((n) => !env[n]);
  if (missing.length > 0)
    problems.push(
      `${missing.join(', ')} must be set (from \`pulumi stack output\`), with Application Default Credentials`,
    );
  const cap =
    env.MAXIMUM_BYTES_BILLED === undefined
      ? DELIVERY_DEFAULTS.maximumBytesBilled
      : Number(env.MAXIMUM_BYTES_BILLED);
  if (!Number.isInteger(cap) || cap < MIN_MAXIMUM_BYTES_BILLED)
    problems.push(
      `MAXIMUM_BYTES_BILLED must be a whole number ≥ ${MIN_MAXIMUM_BYTES_BILLED} (got ${env.MAXIMUM_BYTES_BILLED})`,
    );
  const dedupKeyMode = (env.DEDUP_KEY ?? 'object') as DedupKeyMode;
  if (!DEDUP_KEY_MODES.includes(dedupKeyMode))
    problems.push(`DEDUP_KEY must be one of ${DEDUP_KEY_MODES.join(', ')} (got ${env.DEDUP_KEY})`);
  if (problems.length > 0)
    throw new ReconcileError('usage', `reconcile --target cloud: ${problems.join('; ')}`);
  return {
    project: env.DOCLINE_PROJECT!,
    bucket: env.DOCLINE_BUCKET!,
    topic: env.DOCLINE_TOPIC!,
    table: env.DOCLINE_TABLE!,
    location: env.BIGQUERY_LOCATION || undefined,
    maximumBytesBilled: cap,
    dedupKeyMode,
  };
}

/** What the Cloud Run job does: `RECONCILE_MODE` report (default) or apply, `RECONCILE_PREFIX`, `RECONCILE_OLDER_THAN`. */
export interface JobConfig {
  cloud: CloudReconcileConfig;
  apply: boolean;
  prefix: string;
  olderThanMs: number;
}

export function jobConfig(env: NodeJS.ProcessEnv): JobConfig {
  const mode = env.RECONCILE_MODE ?? 'report';
  if (mode !== 'report' && mode !== 'apply')
    throw new ReconcileError('usage', `RECONCILE_MODE must be report or apply (got ${mode})`);
  return {
    cloud: cloudConfig(env),
    apply: mode === 'apply',
    prefix: env.RECONCILE_PREFIX ?? '',
    olderThanMs: env.RECONCILE_OLDER_THAN ? parseDuration(env.RECONCILE_OLDER_THAN) : DEFAULT_OLDER_THAN_MS,
  };
}

/** Whether the process runs as a Cloud Run job (Cloud Run sets CLOUD_RUN_JOB). */
export const runsAsJob = (env: NodeJS.ProcessEnv) => Boolean(env.CLOUD_RUN_JOB);
