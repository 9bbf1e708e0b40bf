import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { BurstFigures } from '../burst/stage';
import { type BurstReportInput, renderBurstReport, replaceBurstFigures } from '../report';

const figures = (overrides: Partial<BurstFigures> = {}): BurstFigures => ({
  simulatedSeconds: 700,
  analysesPerDocument: 1,
  mergeStatements: 200,
  lookupStatements: 400,
  bytesBilledPerDocument: 50_000,
  nacks: 0,
  deadLetters: 0,
  tableRows: 10_000,
  viewRows: 10_000,
  lost: 0,
  ...overrides,
});

const burst = (groupCommit: BurstFigures | undefined): BurstReportInput => ({
  cell: 'tiers-1000rpm-fast-everyAck-10000',
  documents: 10_000,
  analyzerBoundSeconds: 600,
  perDelivery: figures({
    simulatedSeconds: 9_000,
    bytesBilledPerDocument: 20 * 1024 * 1024,
    viewRows: 2_700,
  }),
  ...(groupCommit ? { groupCommit } : {}),
});

describe('the burst figures of bench/README.md', () => {
  it('are exactly the block generated from bench/results.json', () => {
    const readme = readFileSync(path.join(__dirname, '../README.md'), 'utf8');
    const results = JSON.parse(readFileSync(path.join(__dirname, '../results.json'), 'utf8')) as {
      burst?: BurstReportInput;
    };
    expect(results.burst).toBeDefined();
    expect(replaceBurstFigures(readme, results.burst!)).toBe(readme);
  });

  it('marks every goal met when groupCommit meets them, with the ratio to perDelivery', () => {
    const text = renderBurstReport(burst(figures()));
    expect(text).not.toContain('**missed**');
    expect(text).toMatch(/≤ 1\.25 × 600 s = 750 s: met/);
    expect(text).toMatch(/groupCommit \/ perDelivery: 0\.08 × the simulated time/);
  });

  it('marks a goal missed when groupCommit is too slow or loses a document', () => {
    const text = renderBurstReport(burst(figures({ simulatedSeconds: 751, lost: 1, viewRows: 9_999 })));
    expect(text).toMatch(/750 s: \*\*missed\*\*/);
    expect(text).toMatch(/Documents without a row \(`lost`\) \| 0 \| 1 \| 0: \*\*missed\*\*/);
  });

  it('says groupCommit did not run rather than inventing figures', () => {
    expect(renderBurstReport(burst(undefined))).toContain('not run yet');
  });
});
