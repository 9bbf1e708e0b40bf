import { LIMITS, onDemandUsd } from '../../worker/src/contract/cost-model';
import { type CellSpec, type ConsumerFigures, type ReconcileFigures, runConsumer } from './cell';
import { bestBytesPerDocument, type GridCell, SWEEP_GOALS, sweepGrid } from './grid';
import { inOrderPool, runCellInChild } from './pool';

/** One cell of bench/results.json → sweep.cells (these keys exactly). */
export interface SweepCell {
  name: string;
  tuning: boolean;
  ratioToOracle: number;
  analysesPerDocument: number;
  deadLetters: number;
  lost: number;
  viewRows: number;
  extraRawRows: number;
  bytesBilledPerDocument: number;
  dollarsPerDocument: number;
}

export interface SweepCellDetails
  extends Pick<CellSpec, 'documents' | 'backlog' | 'analyzer' | 'quota' | 'latency' | 'window'> {
  doclineSeconds: number;
  oracleSeconds: number;
  /** docline's drain over the oracle's, both timed from the last upload instead of the first publish. */
  ratioFromLastUpload: number;
  drained: boolean;
  bytesBilledBestPerDocument: number;
  /** The goals this cell misses (empty when it meets them all). */
  misses: string[];
  docline: ConsumerFigures;
  oracle: ConsumerFigures;
  reconcile?: ReconcileFigures;
}

export interface SweepSection extends Record<string, unknown> {
  cells: SweepCell[];
  /** The worst value of each figure over the non-tuning cells, and the cell it comes from. */
  worst: Record<string, { value: number; cell: string }>;
  goals: typeof SWEEP_GOALS;
  /** Non-tuning cells that meet every goal, and all non-tuning cells. */
  cellsMeetingGoals: number;
  cellsOffTuning: number;
  /** How much the figures move between the window models (everyAck → fastAcksOnly, same cell otherwise). */
  windowModelEffect: { medianRatioChange: number; medianDrainChange: number; pairs: number };
  details: Record<string, SweepCellDetails>;
  /** Cells of the grid this run did not run (`--skip-cells`); absent when it ran them all. */
  notRun?: string[];
  runtimeSeconds: number;
  timeModel: string;
}

/** The goals a cell misses. */
export function missedGoals(cell: SweepCell, documents: number, bestBytes: number): string[] {
  const misses: string[] = [];
  if (!(cell.ratioToOracle <= SWEEP_GOALS.ratioToOracle)) misses.push('ratioToOracle');
  if (!(cell.analysesPerDocument <= SWEEP_GOALS.analysesPerDocument)) misses.push('analysesPerDocument');
  if (cell.deadLetters !== 0) misses.push('deadLetters');
  if (cell.lost !== 0) misses.push('lost');
  if (cell.viewRows !== documents) misses.push('viewRows');
  if (!(cell.bytesBilledPerDocument <= SWEEP_GOALS.bytesBilledOverBest * bestBytes))
    misses.push('bytesBilledPerDocument');
  return misses;
}

function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Runs one grid cell: docline, then the oracle, on the same schedule and models. */
export async function runCell(c: GridCell): Promise<{ cell: SweepCell; details: SweepCellDetails }> {
  const docline = await runConsumer(c, 'docline');
  const oracle = await runConsumer(c, 'oracle');
  const d = docline.figures;
  const landed = Math.max(1, d.viewRows);
  const cell: SweepCell = {
    name: c.name,
    tuning: c.tuning,
    ratioToOracle: d.drainMs / Math.max(1, oracle.figures.drainMs),
    analysesPerDocument: d.paidAnalyses / landed,
    deadLetters: d.deadLetters,
    lost: d.lost,
    viewRows: d.viewRows,
    extraRawRows: d.extraRawRows,
    bytesBilledPerDocument: d.billedBytes / landed,
    dollarsPerDocument:
      (onDemandUsd(d.billedBytes) + d.geminiUsd + (docline.reconcile?.queryUsd ?? 0)) / landed,
  };
  const best = bestBytesPerDocument({
    documents: c.documents,
    oracleDrainMs: oracle.figures.drainMs,
    statementBytes: Math.max(LIMITS.minBilledBytesPerTable, d.maxEstimateBytes),
  });
  return {
    cell,
    details: {
      documents: c.documents,
      backlog: c.backlog,
      analyzer: c.analyzer,
      quota: c.quota,
      latency: c.latency,
      window: c.window,
      doclineSeconds: d.drainMs / 1000,
      oracleSeconds: oracle.figures.drainMs / 1000,
      ratioFromLastUpload: d.drainFromLastMs / Math.max(1, oracle.figures.drainFromLastMs),
      drained: d.drained,
      bytesBilledBestPerDocument: best,
      misses: missedGoals(cell, c.documents, best),
      docline: d,
      oracle: oracle.figures,
      ...(docline.reconcile ? { reconcile: docline.reconcile } : {}),
    },
  };
}

/** Runs the whole grid and builds the `sweep` section. */
export async function runSweepStage(options: {
  quick: boolean;
  progress: (text: string) => void;
  /** Cells run at once, each in its own process; 1 runs them one after another in this one. */
  jobs?: number;
  /** Only these cells of the grid (`--cells`). */
  cells?: readonly string[];
  /** The grid without these cells (`--skip-cells`); the section names them. */
  skip?: readonly string[];
}): Promise<SweepSection> {
  const started = process.hrtime.bigint();
  const grid = sweepGrid(options.quick, options.cells, options.skip);
  const jobs = options.jobs ?? 1;
  let finished = 0;
  // The heaviest cells first (the CPU a cell takes grows with its documents; a tier that counts its
  // refused calls is the slowest to drain), so that with several jobs the sweep does not end on one
  // long cell running alone. The section keeps the grid's order.
  const cost = (c: GridCell) => c.documents * (c.refusedCount ? 2 : 1);
  const order = [...grid].sort((a, b) => cost(b) - cost(a));
  const ran = await inOrderPool(
    order,
    jobs,
    (c) => (jobs === 1 ? runCell(c) : runCellInChild(c.name)),
    (run, c) => {
      finished += 1;
      options.progress(
        `sweep ${finished}/${order.length} ${c.name}: ratio ${run.cell.ratioToOracle.toFixed(2)}, ` +
          `${run.details.doclineSeconds.toFixed(0)} s simulated, misses: ${run.details.misses.join(', ') || 'none'} ` +
          `(${(run.details.docline.wallSeconds + run.details.oracle.wallSeconds).toFixed(1)} s real)`,
      );
    },
  );
  const runs = grid.map((c) => ran[order.indexOf(c)]!);
  return buildSweepSection(
    runs.map((r) => r.cell),
    Object.fromEntries(grid.map((c, i) => [c.name, runs[i]!.details])),
    Number(process.hrtime.bigint() - started) / 1e9,
    options.skip ?? [],
  );
}

/** The section from the cells (worst values, the window models' effect); pure, for tests. */
export function buildSweepSection(
  cells: SweepCell[],
  details: Record<string, SweepCellDetails>,
  runtimeSeconds: number,
  /** Grid cells this run left out (`--skip-cells`): named in the section, never counted as met. */
  notRun: readonly string[] = [],
): SweepSection {
  const off = cells.filter((c) => !c.tuning);
  const worst: SweepSection['worst'] = {};
  const higherIsWorse = [
    'ratioToOracle',
    'analysesPerDocument',
    'deadLetters',
    'lost',
    'extraRawRows',
    'bytesBilledPerDocument',
    'dollarsPerDocument',
  ] as const;
  for (const key of higherIsWorse) {
    for (const c of off) {
      if (!worst[key] || c[key] > worst[key]!.value) worst[key] = { value: c[key], cell: c.name };
    }
  }
  // View rows: the worst is the largest shortfall against the cell's documents.
  for (const c of off) {
    const short = (details[c.name]?.documents ?? c.viewRows) - c.viewRows;
    if (!worst.viewRowsShort || short > worst.viewRowsShort.value)
      worst.viewRowsShort = { value: short, cell: c.name };
  }
  const ratioChanges: number[] = [];
  const drainChanges: number[] = [];
  for (const c of cells) {
    if (!c.name.includes('-everyAck-')) continue;
    const other = cells.find((x) => x.name === c.name.replace('-everyAck-', '-fastAcksOnly-'));
    const a = details[c.name];
    const b = other ? details[other.name] : undefined;
    if (!other || !a || !b) continue;
    ratioChanges.push(other.ratioToOracle / c.ratioToOracle);
    drainChanges.push(b.doclineSeconds / Math.max(1e-9, a.doclineSeconds));
  }
  return {
    cells,
    worst,
    goals: SWEEP_GOALS,
    cellsMeetingGoals: off.filter((c) => (details[c.name]?.misses.length ?? 1) === 0).length,
    cellsOffTuning: off.length,
    windowModelEffect: {
      medianRatioChange: median(ratioChanges),
      medianDrainChange: median(drainChanges),
      pairs: ratioChanges.length,
    },
    details,
    ...(notRun.length > 0 ? { notRun: [...notRun] } : {}),
    runtimeSeconds,
    timeModel:
      'virtual time: simulated time moves only when nothing can run (no time scale; CPU time is not simulated time)',
  };
}
