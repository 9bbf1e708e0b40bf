import { figuresBlock } from '../results-file';
import type { SweepSection } from './stage';

/** The sweep block, in bench/README.md and docs/sweep.md (`file` names it in an error). */
export const sweepFigures = (file = 'bench/README.md') =>
  figuresBlock('sweep-figures', 'npm run bench -- --stage sweep', file);

const MIB = 1024 * 1024;
const int = (n: number) => Math.round(n).toLocaleString('en-US');
const two = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '–');

/** The sweep table and its summary, generated from results.json's `sweep` section. */
export function renderSweepReport(sweep: SweepSection): string {
  const g = sweep.goals;
  const e = sweep.windowModelEffect;
  const w = sweep.worst;
  const lines = [
    `${sweep.cells.length} cells (${sweep.cells.length - sweep.cellsOffTuning} in the tuning set, ${sweep.cellsOffTuning} the defaults never saw); ${sweep.cellsMeetingGoals} of ${sweep.cellsOffTuning} meet every goal ` +
      `(ratio to the oracle ≤ ${g.ratioToOracle}, analyses per document ≤ ${g.analysesPerDocument}, 0 dead letters, 0 lost, ` +
      `view rows = documents, bytes billed ≤ ${g.bytesBilledOverBest}× the cell's best). Runtime ${int(sweep.runtimeSeconds)} s; ${sweep.timeModel}.`,
    ...(sweep.notRun && sweep.notRun.length > 0
      ? [
          '',
          `Not run in this sweep (\`--skip-cells\`): ${sweep.notRun.join(', ')}. Their figures are in no table here, and they count neither as meeting nor as missing a goal.`,
        ]
      : []),
    '',
    `Window models: from everyAck to fastAcksOnly (${e.pairs} pairs of otherwise equal cells), docline's drain time changes ×${two(e.medianDrainChange)} ` +
      `and its ratio to the oracle ×${two(e.medianRatioChange)} (medians).`,
    '',
    '| Cell | Tuning | docline s | oracle s | Ratio to oracle | Ratio from last upload | Analyses / doc | Dead letters | Lost | View rows | Extra raw rows | MiB billed / doc | $ / doc | Misses |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...sweep.cells.map((c) => {
      const d = sweep.details[c.name];
      return `| ${c.name} | ${c.tuning ? 'yes' : ''} | ${d ? int(d.doclineSeconds) : '–'} | ${d ? int(d.oracleSeconds) : '–'} | ${two(c.ratioToOracle)} | ${two(d?.ratioFromLastUpload ?? Number.NaN)} | ${c.analysesPerDocument.toFixed(3)} | ${int(c.deadLetters)} | ${int(c.lost)} | ${int(c.viewRows)} | ${int(c.extraRawRows)} | ${two(c.bytesBilledPerDocument / MIB)} | ${c.dollarsPerDocument.toFixed(5)} | ${c.tuning ? '(tuning)' : d?.misses.join(', ') || 'none'} |`;
    }),
    '',
    `Worst off the tuning set: ratio ${two(w.ratioToOracle?.value ?? Number.NaN)} (${w.ratioToOracle?.cell ?? '–'}), ` +
      `analyses per document ${(w.analysesPerDocument?.value ?? Number.NaN).toFixed(3)} (${w.analysesPerDocument?.cell ?? '–'}), ` +
      `dead letters ${int(w.deadLetters?.value ?? 0)}, lost ${int(w.lost?.value ?? 0)}, ` +
      `MiB billed per document ${two((w.bytesBilledPerDocument?.value ?? Number.NaN) / MIB)} (${w.bytesBilledPerDocument?.cell ?? '–'}).`,
  ];
  for (const [name, d] of Object.entries(sweep.details)) {
    const r = d.reconcile;
    if (!r) continue;
    lines.push(
      '',
      `Backfill ${name}: reconcile listed ${int(r.listed)} objects in ${int(r.listCalls)} list calls (${two(r.listSeconds)} s), ` +
        `one query billed ${two(r.queryBytesBilled / MIB)} MiB ($${r.queryUsd.toFixed(5)}), published ${int(r.missing)} announcements ` +
        `in ${int(r.publishCalls)} calls (${two(r.publishSeconds)} s); the worker drained them in ${int(d.doclineSeconds)} s ` +
        `(oracle ${int(d.oracleSeconds)} s), ${int(d.docline.deadLetters)} dead letters, ${int(d.documents - d.docline.viewRows)} documents without a line.`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** `text` with its sweep block replaced by the one generated from `sweep`. */
export function replaceSweepFigures(text: string, sweep: SweepSection, file?: string): string {
  return sweepFigures(file).replace(text, renderSweepReport(sweep));
}
