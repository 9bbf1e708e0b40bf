/**
 * `npm run reconcile [-- --target cloud] [--prefix P] [--older-than 1h] [--json] [--apply [--yes]]`:
 * compares the bucket's live objects with the table's rows, reports every document without a line,
 * and with `--apply` announces each one again exactly as Cloud Storage would have. Backfill is
 * `--apply` over a bucket that predates the pipeline.
 *
 * Targets: the running local pipeline (default: its bucket folder, SQLite, the emulator topic), or
 * `--target cloud` (DOCLINE_PROJECT, DOCLINE_BUCKET, DOCLINE_TOPIC, DOCLINE_TABLE, BIGQUERY_LOCATION,
 * DEDUP_KEY; Application Default Credentials). Exit codes: 0 nothing missing (or all announced),
 * 1 something missing (report mode), 2 usage or API error.
 */
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import type { DedupKeyMode } from '../../worker/src/contract/settings';
import { DELIVERY_DEFAULTS, MIN_MAXIMUM_BYTES_BILLED } from '../../worker/src/contract/settings';
import { systemClock } from '../../worker/src/core/ports';
import { cloudSources } from '../../worker/src/reconcile/cloud';
import { cloudConfig } from '../../worker/src/reconcile/config';
import { LocalBucketLister, SqliteLineIndex } from '../../worker/src/reconcile/local-sources';
import {
  DEFAULT_OLDER_THAN_MS,
  type LineIndex,
  type NotificationPublisher,
  type ObjectLister,
  oneLine,
  parseDuration,
  RECONCILE_EXIT,
} from '../../worker/src/reconcile/reconcile';
import { progressBar, type RunResult, runReconcile } from '../../worker/src/reconcile/run';
import { parseCommandArgs } from '../lib/args';
import { PubSubClient } from '../lib/pubsub';
import { readState } from '../lib/state';

/** The command's options; docs/operations.md lists each one (checked by a test). */
export const RECONCILE_OPTIONS = {
  target: { type: 'string' },
  prefix: { type: 'string' },
  'older-than': { type: 'string' },
  json: { type: 'boolean' },
  apply: { type: 'boolean' },
  yes: { type: 'boolean' },
  'maximum-bytes-billed': { type: 'string' },
  'data-dir': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const USAGE =
  'usage: npm run reconcile -- [--target local|cloud] [--prefix P] [--older-than 1h] [--json] [--apply [--yes]] ' +
  '[--maximum-bytes-billed N] [--data-dir DIR]';

/** Where reconcile looks and publishes, with what it must close. */
export interface ReconcileTarget {
  lister: ObjectLister;
  index: LineIndex;
  publisher: NotificationPublisher;
  dedupKeyMode: DedupKeyMode;
  close(): Promise<void>;
}

/** The running local pipeline (pipeline.json in the data folder). */
export async function localTarget(dataDir: string | undefined): Promise<ReconcileTarget> {
  const state = await readState(dataDir);
  const layout = dataDirLayout(state.dataDir);
  const pubsub = new PubSubClient(state.emulatorBaseUrl, state.projectId);
  return {
    lister: new LocalBucketLister(layout.bucket, state.bucket),
    index: new SqliteLineIndex(layout.sqlite),
    publisher: { publish: (messages) => pubsub.publish(state.topic, messages) },
    // A pipeline started before this field existed ran the default mode.
    dedupKeyMode: state.dedupKeyMode ?? 'object',
    close: () => pubsub.close(),
  };
}

export interface MainDeps {
  env: NodeJS.ProcessEnv;
  print: (line: string) => void;
  /** Progress for people; the bar is drawn only when this is a terminal. */
  stderr: { isTTY?: boolean; write(text: string): unknown };
  /** Builds the target (tests give their own). */
  target?: (
    kind: 'local' | 'cloud',
    options: { dataDir?: string; maximumBytesBilled: number },
  ) => Promise<ReconcileTarget>;
}

/** Runs the command with its arguments (without `node script`); resolves with the exit code. */
export async function main(argv: string[], deps: MainDeps): Promise<RunResult> {
  let values: {
    target?: string;
    prefix?: string;
    'older-than'?: string;
    json?: boolean;
    apply?: boolean;
    yes?: boolean;
    'maximum-bytes-billed'?: string;
    'data-dir'?: string;
    help?: boolean;
  };
  const usageError = (message: string): RunResult => {
    deps.print(`ERROR: ${message}. ${USAGE}`);
    return { code: RECONCILE_EXIT.error };
  };
  try {
    ({ values } = parseCommandArgs(argv, RECONCILE_OPTIONS, USAGE));
  } catch (error) {
    deps.print(`ERROR: ${oneLine(error)}`);
    return { code: RECONCILE_EXIT.error };
  }
  if (values.help) {
    deps.print(USAGE);
    return { code: RECONCILE_EXIT.ok };
  }
  const kind = values.target ?? 'local';
  if (kind !== 'local' && kind !== 'cloud')
    return usageError(`--target must be local or cloud (got ${kind})`);
  let olderThanMs = DEFAULT_OLDER_THAN_MS;
  try {
    if (values['older-than'] !== undefined) olderThanMs = parseDuration(values['older-than']);
  } catch (error) {
    return usageError(oneLine(error));
  }
  const cap = Number(
    values['maximum-bytes-billed'] ?? deps.env.MAXIMUM_BYTES_BILLED ?? DELIVERY_DEFAULTS.maximumBytesBilled,
  );
  if (!Number.isInteger(cap) || cap < MIN_MAXIMUM_BYTES_BILLED)
    return usageError(`--maximum-bytes-billed must be a whole number ≥ ${MIN_MAXIMUM_BYTES_BILLED}`);
  if (values.yes && !values.apply) return usageError('--yes only confirms --apply');

  let target: ReconcileTarget;
  try {
    target = deps.target
      ? await deps.target(kind, {
          ...(values['data-dir'] ? { dataDir: values['data-dir'] } : {}),
          maximumBytesBilled: cap,
        })
      : kind === 'local'
        ? await localTarget(values['data-dir'] ?? deps.env.DOCLINE_DATA_DIR)
        : cloudTarget(deps.env, cap);
  } catch (error) {
    deps.print(`ERROR: ${oneLine(error)}`);
    return { code: RECONCILE_EXIT.error };
  }
  const drawBar = Boolean(deps.stderr.isTTY) && !values.json;
  try {
    const result = await runReconcile(
      {
        prefix: values.prefix ?? '',
        olderThanMs,
        apply: Boolean(values.apply),
        yes: Boolean(values.yes),
        json: Boolean(values.json),
        dedupKeyMode: target.dedupKeyMode,
        // Only BigQuery caps the comparison's bytes; the local table has no such limit.
        ...(kind === 'cloud' ? { maximumBytesBilled: cap } : {}),
      },
      {
        ...target,
        clock: systemClock,
        print: deps.print,
        progress: (done, total) => {
          // A bar on long runs, in a terminal only; redrawn in place.
          if (!drawBar || total < 1000) return;
          deps.stderr.write(`\r\x1b[2K${progressBar(done, total)}${done === total ? '\n' : ''}`);
        },
      },
    );
    return result;
  } finally {
    await target.close();
  }
}

function cloudTarget(env: NodeJS.ProcessEnv, maximumBytesBilled: number): ReconcileTarget {
  const config = { ...cloudConfig(env), maximumBytesBilled };
  const sources = cloudSources(config, { raiseCapHint: '--maximum-bytes-billed N' });
  return { ...sources, dedupKeyMode: config.dedupKeyMode };
}

if (require.main === module) {
  main(process.argv.slice(2), {
    env: process.env,
    print: (line) => console.log(line),
    stderr: process.stderr,
  }).then(
    (result) => process.exit(result.code),
    (error: unknown) => {
      console.error(`ERROR: ${oneLine(error)}`);
      process.exit(RECONCILE_EXIT.error);
    },
  );
}
