import type { BurstReportInput } from '../report';
import { type ConsumerFigures, type ConsumerName, runConsumer } from '../sweep/cell';
import { type GridCell, sweepGrid } from '../sweep/grid';

/**
 * The burst stage of `npm run bench`: the sweep's burst cell (10,000 uploads within 60 s, 5 %
 * announced twice, a Developer API tier of 1,000 requests a minute, the fast latency, a push window
 * that grows with every ack) run twice in the sweep's simulator: by docline, and by the seed's
 * design it replaced (`perDelivery`: one lookup and one MERGE per delivery, no memo). Same models,
 * same virtual time, same instances started the same way; the figures the goals are about.
 */

/** The sweep cell the burst runs: the point the defaults were first tuned on. */
export const BURST_CELL = 'tiers-1000rpm-fast-everyAck-10000';

/** The figures of one run, as the goals read them (results.json → burst → perDelivery, groupCommit). */
export interface BurstFigures {
  simulatedSeconds: number;
  analysesPerDocument: number;
  mergeStatements: number;
  lookupStatements: number;
  bytesBilledPerDocument: number;
  /** Pushes answered other than 2xx (503, Cloud Run's 429) or not answered in time. */
  nacks: number;
  deadLetters: number;
  tableRows: number;
  viewRows: number;
  lost: number;
}

export interface BurstSection extends BurstReportInput, Record<string, unknown> {
  groupCommit: BurstFigures;
  ratios: Record<string, number>;
  /** Each run's figures as the sweep reports them (what held it back). */
  details: Record<string, Omit<ConsumerFigures, 'secondsToRow'>>;
}

function burstFigures(f: ConsumerFigures): BurstFigures {
  const landed = Math.max(1, f.viewRows);
  return {
    simulatedSeconds: Math.round(f.drainMs / 1000),
    analysesPerDocument: f.paidAnalyses / landed,
    mergeStatements: f.merges,
    lookupStatements: f.lookups,
    bytesBilledPerDocument: f.billedBytes / landed,
    nacks: f.nacks,
    deadLetters: f.deadLetters,
    tableRows: f.viewRows + f.extraRawRows,
    viewRows: f.viewRows,
    lost: f.lost,
  };
}

/** Runs the stage; `documents` (the quick run's 1,000) shrinks the burst, everything else stays. */
export async function runBurstStage(options: {
  documents?: number;
  progress: (text: string) => void;
}): Promise<BurstSection> {
  const [grid] = sweepGrid(false, [BURST_CELL]) as [GridCell];
  const cell: GridCell = { ...grid, documents: options.documents ?? grid.documents };
  const run = async (name: string, consumer: ConsumerName) => {
    options.progress(`burst: ${name} on ${BURST_CELL} (${cell.documents} documents)`);
    return (await runConsumer(cell, consumer)).figures;
  };
  const runs = {
    groupCommit: await run('groupCommit', 'docline'),
    perDelivery: await run('perDelivery', 'perDelivery'),
  };
  const groupCommit = burstFigures(runs.groupCommit);
  const perDelivery = burstFigures(runs.perDelivery);
  const analyzerBoundSeconds = Math.round((cell.documents / cell.quota) * 60);
  const details = Object.fromEntries(
    Object.entries(runs).map(([name, { secondsToRow: _, ...rest }]) => [name, rest]),
  );
  return {
    cell: BURST_CELL,
    documents: cell.documents,
    analyzerBoundSeconds,
    perDelivery,
    groupCommit,
    ratios: {
      simulatedSecondsGroupCommitOverPerDelivery: groupCommit.simulatedSeconds / perDelivery.simulatedSeconds,
      bytesBilledGroupCommitOverPerDelivery:
        groupCommit.bytesBilledPerDocument / perDelivery.bytesBilledPerDocument,
      simulatedSecondsGroupCommitOverAnalyzerBound: groupCommit.simulatedSeconds / analyzerBoundSeconds,
    },
    details,
  };
}
