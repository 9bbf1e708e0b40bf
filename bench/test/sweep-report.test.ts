import { readFileSync } from 'node:fs';
import path from 'node:path';
import { sweepGrid } from '../sweep/grid';
import { renderSweepReport, replaceSweepFigures, sweepFigures } from '../sweep/report';
import {
  buildSweepSection,
  missedGoals,
  type SweepCell,
  type SweepCellDetails,
  type SweepSection,
} from '../sweep/stage';

const cell = (overrides: Partial<SweepCell> = {}): SweepCell => ({
  name: 'tiers-1000rpm-fast-everyAck-1000',
  tuning: false,
  ratioToOracle: 1.1,
  analysesPerDocument: 1,
  deadLetters: 0,
  lost: 0,
  viewRows: 1_000,
  extraRawRows: 0,
  bytesBilledPerDocument: 100_000,
  dollarsPerDocument: 0.0015,
  ...overrides,
});

const details = (documents: number, doclineSeconds: number, misses: string[] = []) =>
  ({ documents, doclineSeconds, oracleSeconds: 100, misses }) as unknown as SweepCellDetails;

describe('the sweep section', () => {
  it('keeps the key names of the issue in every cell', () => {
    expect(Object.keys(cell())).toEqual([
      'name',
      'tuning',
      'ratioToOracle',
      'analysesPerDocument',
      'deadLetters',
      'lost',
      'viewRows',
      'extraRawRows',
      'bytesBilledPerDocument',
      'dollarsPerDocument',
    ]);
  });

  it('lists every goal a cell misses, and none for a cell that meets them', () => {
    expect(missedGoals(cell(), 1_000, 100_000)).toEqual([]);
    expect(
      missedGoals(
        cell({
          ratioToOracle: 1.3,
          analysesPerDocument: 1.02,
          deadLetters: 1,
          lost: 2,
          viewRows: 998,
          bytesBilledPerDocument: 250_000,
        }),
        1_000,
        100_000,
      ),
    ).toEqual([
      'ratioToOracle',
      'analysesPerDocument',
      'deadLetters',
      'lost',
      'viewRows',
      'bytesBilledPerDocument',
    ]);
  });

  it('takes the worst values from the cells off the tuned point only, and compares window models pair by pair', () => {
    const cells = [
      cell({ name: 'tiers-1000rpm-fast-everyAck-10000', tuning: true, ratioToOracle: 9 }),
      cell({ name: 'a-everyAck-1000', ratioToOracle: 1.2 }),
      cell({ name: 'a-fastAcksOnly-1000', ratioToOracle: 1.8 }),
    ];
    const section = buildSweepSection(
      cells,
      {
        'tiers-1000rpm-fast-everyAck-10000': details(10_000, 900),
        'a-everyAck-1000': details(1_000, 100),
        'a-fastAcksOnly-1000': details(1_000, 300, ['ratioToOracle']),
      },
      1,
    );
    expect(section.worst.ratioToOracle).toEqual({ value: 1.8, cell: 'a-fastAcksOnly-1000' });
    expect(section.cellsOffTuning).toBe(2);
    expect(section.cellsMeetingGoals).toBe(1);
    expect(section.windowModelEffect.pairs).toBe(1);
    expect(section.windowModelEffect.medianDrainChange).toBeCloseTo(3);
    expect(section.windowModelEffect.medianRatioChange).toBeCloseTo(1.5);
  });
});

describe('a sweep that leaves cells out (--skip-cells)', () => {
  it('runs the grid without them, and refuses a name the grid does not have', () => {
    const all = sweepGrid(false);
    const skipped = sweepGrid(false, undefined, ['tiers-1000rpm-fast-everyAck-10000-refusedCount']);
    expect(skipped).toHaveLength(all.length - 1);
    expect(skipped.map((c) => c.name)).not.toContain('tiers-1000rpm-fast-everyAck-10000-refusedCount');
    expect(() => sweepGrid(false, undefined, ['no-such-cell'])).toThrow(/no-such-cell/);
    expect(sweepGrid(false, ['tiers-60rpm-fast-everyAck-1000']).map((c) => c.name)).toEqual([
      'tiers-60rpm-fast-everyAck-1000',
    ]);
  });

  it('names them in the section and in the block, and counts them neither as met nor as missed', () => {
    const section = buildSweepSection([cell()], { [cell().name]: details(1_000, 100) }, 1, [
      'b-everyAck-10000',
    ]);
    expect(section.notRun).toEqual(['b-everyAck-10000']);
    expect(section.cellsOffTuning).toBe(1);
    expect(renderSweepReport(section)).toContain('Not run in this sweep (`--skip-cells`): b-everyAck-10000.');
    const whole = buildSweepSection([cell()], { [cell().name]: details(1_000, 100) }, 1);
    expect(whole.notRun).toBeUndefined();
    expect(renderSweepReport(whole)).not.toContain('Not run');
  });
});

describe('the sweep figures of bench/README.md and docs/sweep.md', () => {
  const results = JSON.parse(readFileSync(path.join(__dirname, '../results.json'), 'utf8')) as {
    sweep?: SweepSection;
  };

  it.each([
    ['bench/README.md', path.join(__dirname, '../README.md')],
    ['docs/sweep.md', path.join(__dirname, '../../docs/sweep.md')],
  ])('%s holds exactly the block generated from bench/results.json', (name, file) => {
    const text = readFileSync(file, 'utf8');
    expect(text).toContain(sweepFigures().start);
    expect(text).toContain(sweepFigures().end);
    expect(results.sweep).toBeDefined();
    expect(replaceSweepFigures(text, results.sweep!, name)).toBe(text);
    expect(text).toContain(renderSweepReport(results.sweep!));
  });
});
