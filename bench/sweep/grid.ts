import { DELIVERY_DEFAULTS } from '../../worker/src/contract/settings';
import { type CellSpec, cellName } from './cell';

/**
 * The sweep's grid. Not the full product of the axes: it is sized so the whole sweep runs in a
 * bounded time on 2 cores (virtual time, so the bound is CPU: roughly the deliveries × the pushes
 * outstanding at once, since every delivery waiting in a line renews its lease and polls).
 *
 * - 1,000 uploads: every analyzer model × quota (60, 1,000, 4,000 per minute) × latency × window model.
 * - 10,000 uploads: tiers × quota 1,000 and 4,000 × fast × both window models, and the shared
 *   capacity at 1,000 and 4,000, fast, everyAck. Not at 60 per minute (10,000 documents need
 *   ~167 simulated minutes there, cheap in simulated time but not in CPU under everyAck) nor the
 *   slow latency: left out for the CPU budget, not for a reason of the platform.
 * - Backfills published by reconcile `--apply` (listing, one query, batches of 100): 10,000 objects
 *   under everyAck, and 100,000 objects under fastAcksOnly (tiers, 4,000 per minute, fast). A
 *   100,000-object backfill under everyAck keeps ~3,000 deliveries in flight for 25 simulated
 *   minutes: about 10 minutes of CPU and 1 GB here, past the sweep's budget.
 *
 * The tuning set ({@link TUNING_CELLS}): the cells the defaults were chosen on, one per regime the
 * sweep found; the goals are read on every other cell, which the defaults never saw.
 */
export interface GridCell extends CellSpec {
  name: string;
  tuning: boolean;
}

const QUOTAS = [60, 1_000, 4_000] as const;

/**
 * The cells the defaults were chosen on (`tuning: true`), one per regime:
 *
 * - the burst's point (tiers, 1,000 per minute, fast, everyAck, 10,000 uploads): a push window that
 *   grows to ~3,000 and a quota that binds; the defaults before the sweep were fitted to it;
 * - a window that holds few pushes (tiers, 1,000 per minute, fast, fastAcksOnly): every second a
 *   push lasts is drain time (chose `batchMaxWaitMs` 0);
 * - Vertex AI's shared capacity with its random 429 bursts and the slow latency (shared, 1,000 per
 *   minute, slow, everyAck): chose where the quota gate's limit starts (its ceiling);
 * - a quota far under the upload rate (tiers, 60 per minute, fast, everyAck): deliveries wait
 *   minutes in line; the bytes billed per document are at their worst there;
 * - a tier that counts refused calls against its window (tiers, 250 per minute, fast, everyAck,
 *   `-refusedCount`): retries into a full window keep it full, so the quota gate's answer to a 429
 *   is chosen here too. Its quota is none of the reported `-refusedCount` cells' (60, 1,000, 4,000).
 */
export const TUNING_CELLS: readonly string[] = Object.freeze([
  'tiers-1000rpm-fast-everyAck-10000',
  'tiers-1000rpm-fast-fastAcksOnly-1000',
  'shared-1000rpm-slow-everyAck-1000',
  'tiers-60rpm-fast-everyAck-1000',
  'tiers-250rpm-fast-everyAck-1000-refusedCount',
  'shared-250rpm-fast-fastAcksOnly-1000',
]);

function cell(spec: Omit<CellSpec, 'seed'>, seed: number): GridCell {
  const name = cellName(spec);
  return { ...spec, seed, name, tuning: TUNING_CELLS.includes(name) };
}

/**
 * The cells of the sweep. `quick`: the tuning set only (into results.quick.json), the run on which
 * defaults are chosen; the full grid then reports on the cells they never saw. `only`: just the
 * cells so named (`--cells`, for looking at a few); `skip`: all but these (`--skip-cells`, a sweep
 * that leaves out cells it has no time for, and says which). A name not in the grid is an error,
 * not an empty run.
 */
export function sweepGrid(
  quick: boolean,
  only?: readonly string[],
  skip: readonly string[] = [],
): GridCell[] {
  const grid = quick ? fullGrid().filter((c) => c.tuning) : fullGrid();
  const unknown = [...(only ?? []), ...skip].filter((name) => !grid.some((c) => c.name === name));
  if (unknown.length > 0)
    throw new Error(`no ${quick ? 'tuning ' : ''}cell of the sweep's grid is named ${unknown.join(', ')}`);
  return grid.filter((c) => (only === undefined || only.includes(c.name)) && !skip.includes(c.name));
}

function fullGrid(): GridCell[] {
  const cells: GridCell[] = [];
  let seed = 1;
  const analyzers = ['tiers', 'shared'] as const;
  const latencies = ['fast', 'slow'] as const;
  const windows = ['everyAck', 'fastAcksOnly'] as const;
  for (const analyzer of analyzers)
    for (const quota of QUOTAS)
      for (const latency of latencies)
        for (const window of windows)
          cells.push(cell({ analyzer, quota, latency, window, documents: 1_000, backlog: 'upload' }, seed++));
  /** A cell at 10,000 uploads, tiers at 4,000 per minute, fast, everyAck, unless `spec` says otherwise. */
  const at = (spec: Partial<Omit<CellSpec, 'seed'>>) =>
    cell(
      {
        analyzer: 'tiers',
        quota: 4_000,
        latency: 'fast',
        window: 'everyAck',
        documents: 10_000,
        backlog: 'upload',
        ...spec,
      },
      seed++,
    );
  // 10,000 uploads: the tuning point and its neighbours (the fast latency only: CPU time).
  for (const quota of [1_000, 4_000]) for (const window of windows) cells.push(at({ quota, window }));
  for (const quota of [1_000, 4_000]) cells.push(at({ analyzer: 'shared', quota }));
  // Backfills published by reconcile --apply.
  cells.push(
    at({ backlog: 'backfill' }),
    at({ window: 'fastAcksOnly', documents: 100_000, backlog: 'backfill' }),
  );
  // MERGE jobs as slow as the public reports say (2–4.5 s, the cost model's 1–3 s otherwise), on the
  // 1,000-upload cells of every quota and analyzer, and at 10,000 uploads.
  const slowMerges = { low: 2, high: 4.5 };
  for (const analyzer of analyzers)
    for (const quota of QUOTAS)
      cells.push(at({ analyzer, quota, documents: 1_000, mergeSeconds: slowMerges }));
  cells.push(at({ mergeSeconds: slowMerges }));
  // A tier that counts refused calls against its windows (Google does not say a 429 is free).
  for (const quota of QUOTAS) cells.push(at({ quota, documents: 1_000, refusedCount: true }));
  cells.push(at({ quota: 1_000, refusedCount: true }));
  // The Gemini API's Tier 1 spend limit ($10 over any rolling 10 minutes) in front of the tier's
  // windows, where a backlog spends past it: 10,000 uploads drained in ~5 minutes spend ~$15. A
  // thousand uploads spend ~$1.5 and the window-bound cells drain too slowly to reach it.
  cells.push(at({ spendTier: 'Tier 1' }));
  // A tuning cell whose tier counts refused calls, at a quota no reported cell has (250 per
  // minute binds on 1,000 uploads within 60 s): the quota gate's answer to a 429 is chosen on it, so
  // that the reported `-refusedCount` cells above stay cells the defaults never saw.
  cells.push(at({ quota: 250, documents: 1_000, refusedCount: true }));
  // A tuning cell of Vertex AI's shared capacity with the fast latency and a window that holds few
  // pushes, at 250 per minute (no reported cell's quota): the backoff after a 429 that names no
  // wait is chosen on it too, beside the slow shared cell, so the reported shared cells stay unseen.
  cells.push(at({ analyzer: 'shared', quota: 250, window: 'fastAcksOnly', documents: 1_000 }));
  return cells;
}

/** The goals every non-tuning cell is held to (issue: "Done when"). */
export const SWEEP_GOALS = Object.freeze({
  ratioToOracle: 1.25,
  analysesPerDocument: 1.01,
  /** Bytes billed per document within this factor of the cell's best. */
  bytesBilledOverBest: 2,
});

/**
 * The cell's best bytes billed per document: one lookup and one MERGE per batch, each batch as full
 * as the rate allows (the documents the oracle drains in one `mergeMinIntervalMs`, at most
 * `batchMaxRows`), each statement billed like docline's (10 MiB at least).
 */
export function bestBytesPerDocument(options: {
  documents: number;
  oracleDrainMs: number;
  statementBytes: number;
}): number {
  const perMs = options.documents / Math.max(1, options.oracleDrainMs);
  const batch = Math.max(
    1,
    Math.min(DELIVERY_DEFAULTS.batchMaxRows, perMs * DELIVERY_DEFAULTS.mergeMinIntervalMs, options.documents),
  );
  return (2 * options.statementBytes) / batch;
}
