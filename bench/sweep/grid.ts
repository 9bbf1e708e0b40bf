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
 * The tuning point is the burst's: tiers, 1,000 per minute, the fast latency, everyAck, 10,000
 * uploads (the defaults were fitted to it). Every other cell is off the tuned point.
 */
export interface GridCell extends CellSpec {
  name: string;
  tuning: boolean;
}

const QUOTAS = [60, 1_000, 4_000] as const;

function cell(spec: Omit<CellSpec, 'seed'>, seed: number): GridCell {
  const tuning =
    spec.analyzer === 'tiers' &&
    spec.quota === 1_000 &&
    spec.latency === 'fast' &&
    spec.window === 'everyAck' &&
    spec.documents === 10_000 &&
    spec.backlog === 'upload';
  return { ...spec, seed, name: cellName(spec), tuning };
}

/** The cells of the sweep (`quick`: 100 and 300 documents, a handful of cells, for tests). */
export function sweepGrid(quick: boolean): GridCell[] {
  const cells: GridCell[] = [];
  let seed = 1;
  const analyzers = ['tiers', 'shared'] as const;
  const latencies = ['fast', 'slow'] as const;
  const windows = ['everyAck', 'fastAcksOnly'] as const;
  if (quick) {
    for (const window of windows)
      for (const analyzer of analyzers)
        cells.push(
          cell(
            { analyzer, quota: 1_000, latency: 'fast', window, documents: 100, backlog: 'upload' },
            seed++,
          ),
        );
    cells.push(
      cell(
        {
          analyzer: 'tiers',
          quota: 4_000,
          latency: 'fast',
          window: 'everyAck',
          documents: 300,
          backlog: 'backfill',
        },
        seed++,
      ),
    );
    return cells;
  }
  for (const analyzer of analyzers)
    for (const quota of QUOTAS)
      for (const latency of latencies)
        for (const window of windows)
          cells.push(cell({ analyzer, quota, latency, window, documents: 1_000, backlog: 'upload' }, seed++));
  // 10,000 uploads: the tuning point and its neighbours (the fast latency only: CPU time).
  for (const quota of [1_000, 4_000])
    for (const window of windows)
      cells.push(
        cell(
          { analyzer: 'tiers', quota, latency: 'fast', window, documents: 10_000, backlog: 'upload' },
          seed++,
        ),
      );
  for (const quota of [1_000, 4_000])
    cells.push(
      cell(
        {
          analyzer: 'shared',
          quota,
          latency: 'fast',
          window: 'everyAck',
          documents: 10_000,
          backlog: 'upload',
        },
        seed++,
      ),
    );
  // Backfills published by reconcile --apply.
  cells.push(
    cell(
      {
        analyzer: 'tiers',
        quota: 4_000,
        latency: 'fast',
        window: 'everyAck',
        documents: 10_000,
        backlog: 'backfill',
      },
      seed++,
    ),
    cell(
      {
        analyzer: 'tiers',
        quota: 4_000,
        latency: 'fast',
        window: 'fastAcksOnly',
        documents: 100_000,
        backlog: 'backfill',
      },
      seed++,
    ),
  );
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
