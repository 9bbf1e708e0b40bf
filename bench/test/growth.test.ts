import { readFileSync } from 'node:fs';
import path from 'node:path';
import { maximumEstimateBytes } from '../../worker/src/contract/cost-model';
import {
  renderGrowthReport,
  renderVolumeTable,
  replaceGrowthFigures,
  replaceVolumeTable,
} from '../growth/report';
import {
  GROWTH_AGES_DAYS,
  GROWTH_DAY,
  GROWTH_RATES,
  GROWTH_WINDOWS,
  type GrowthCell,
  type GrowthSection,
  growthCellName,
  growthMisses,
  growthWindowStartMs,
  runGrowthCell,
  stackFor,
} from '../growth/stage';

const CELL_KEYS = [
  'name',
  'documentsPerDay',
  'tableAgeDays',
  'documents',
  'statementsRefused',
  'deadLetters',
  'lost',
  'viewRows',
  'bytesBilledPerDocument',
  'dollarsPerDocument',
  'bigQueryDollarsPerDocument',
  'geminiDollarsPerDocument',
  'p99SecondsToRow',
  'windows',
  'simulatedHours',
  'worstWindow',
  'unprunedLookupEstimateBytes',
  'refusedWithoutPruning',
];

/** A cell that meets every goal, to mutate one figure at a time. */
function goodCell(documentsPerDay: number, tableAgeDays: number): GrowthCell {
  return {
    name: growthCellName(documentsPerDay, tableAgeDays),
    documentsPerDay,
    tableAgeDays,
    documents: 100,
    statementsRefused: 0,
    deadLetters: 0,
    lost: 0,
    viewRows: 100,
    bytesBilledPerDocument: 1_000_000,
    dollarsPerDocument: 0.001545,
    bigQueryDollarsPerDocument: 0.000005,
    geminiDollarsPerDocument: 0.00154,
    p99SecondsToRow: 40,
    windows: 24,
    simulatedHours: 24,
    worstWindow: { startsAtUtc: '05:30', bytesBilledPerDocument: 1_000_000 },
    unprunedLookupEstimateBytes: 0,
    refusedWithoutPruning: false,
  };
}
const cellOf = (cells: GrowthCell[], rate: number, age: number) =>
  cells.find((x) => x.documentsPerDay === rate && x.tableAgeDays === age)!;
const goodGrid = () => GROWTH_RATES.flatMap((r) => GROWTH_AGES_DAYS.map((a) => goodCell(r, a)));

describe('the growth stage', () => {
  describe('its goals (growthMisses)', () => {
    it('passes a grid that meets them', () => {
      expect(growthMisses(goodGrid())).toEqual([]);
    });

    it.each<[string, [number, number], Partial<GrowthCell>, RegExp]>([
      ['a refused statement', [1_000, 1], { statementsRefused: 3 }, /3 statements refused/],
      ['a dead letter', [100_000, 15], { deadLetters: 1 }, /1 dead letters/],
      ['a lost document', [1_000_000, 365], { lost: 2 }, /2 documents lost/],
      ['a view row short', [1_000, 365], { viewRows: 99 }, /99 view rows for 100 documents/],
      [
        'bytes per document growing with the table',
        [100_000, 365],
        { bytesBilledPerDocument: 1_200_000 },
        /100000 a day: 1\.20 × the bytes per document of day 1 on day 365/,
      ],
      [
        'BigQuery over 5 % of Gemini at a million a day',
        [1_000_000, 365],
        { bigQueryDollarsPerDocument: 0.0001 },
        /growth-1000000perday-365d: BigQuery is 6\.5 % of Gemini/,
      ],
    ])('reports %s', (_, [rate, age], change, expected) => {
      const cells = goodGrid();
      Object.assign(cellOf(cells, rate, age), change);
      expect(growthMisses(cells)).toEqual([expect.stringMatching(expected)]);
    });
  });

  it('takes the settings the stack derives for the volume: a cap over any statement estimate of the layout', () => {
    for (const rate of GROWTH_RATES) {
      expect(stackFor(rate).maximumBytesBilled).toBeGreaterThanOrEqual(maximumEstimateBytes(rate));
    }
  });

  it('covers the whole simulated day, every hour, the first window centred on midnight', () => {
    for (const rate of GROWTH_RATES) {
      const { durationMs, count } = GROWTH_WINDOWS[rate];
      const starts = Array.from({ length: count }, (_, k) => growthWindowStartMs(rate, k));
      const midnight = Date.parse(`${GROWTH_DAY}T00:00:00.000Z`);
      expect(starts[0]! + durationMs / 2).toBe(midnight);
      // Every hour of the day has a window in it; the windows never overlap.
      const hoursCovered = new Set(
        starts.flatMap((s) =>
          Array.from({ length: durationMs / 60_000 }, (_, m) => new Date(s + m * 60_000).getUTCHours()),
        ),
      );
      expect(hoursCovered.size).toBe(24);
      for (let k = 1; k < count; k++) expect(starts[k]! - starts[k - 1]!).toBeGreaterThanOrEqual(durationMs);
    }
    // Where the windows add up to a day, they tile it.
    expect(GROWTH_WINDOWS[1000].count * GROWTH_WINDOWS[1000].durationMs).toBe(86_400_000);
    expect(GROWTH_WINDOWS[100000].count * GROWTH_WINDOWS[100000].durationMs).toBe(86_400_000);
  });

  it('runs a real cell: 1,000 documents a day into a 365-day table over the whole day, every document its row, nothing refused', async () => {
    const cell = await runGrowthCell(1_000, 365);
    expect(Object.keys(cell)).toEqual(CELL_KEYS);
    expect(cell).toMatchObject({
      documents: 1_000,
      statementsRefused: 0,
      deadLetters: 0,
      lost: 0,
      viewRows: 1_000,
      windows: 2,
      simulatedHours: 24,
    });
    expect(['18:00', '06:00']).toContain(cell.worstWindow.startsAtUtc);
    // Unpruned, a lookup would read all 366 days of the table: what the age changes.
    const young = await runGrowthCell(1_000, 1, 1, 1);
    expect(cell.unprunedLookupEstimateBytes).toBeCloseTo(183 * young.unprunedLookupEstimateBytes, 0);
    // At this rate every statement is at the 10 MiB floor, a handful of documents each.
    expect(cell.bytesBilledPerDocument).toBeGreaterThanOrEqual(10 * 1024 * 1024 * 0.5);
    expect(cell.p99SecondsToRow).toBeGreaterThan(0);
    expect(cell.dollarsPerDocument).toBeCloseTo(
      cell.bigQueryDollarsPerDocument + cell.geminiDollarsPerDocument,
      12,
    );
  }, 60_000);

  describe('its figures in bench/results.json and the docs generated from them', () => {
    const results = JSON.parse(readFileSync(path.join(__dirname, '../results.json'), 'utf8')) as {
      growth?: GrowthSection;
    };
    const growth = results.growth!;

    it('has every cell of the grid, with exactly the keys of the contract', () => {
      expect(growth.cells.map((c) => c.name)).toEqual(
        GROWTH_RATES.flatMap((r) => GROWTH_AGES_DAYS.map((a) => growthCellName(r, a))),
      );
      for (const c of growth.cells) expect(Object.keys(c)).toEqual(CELL_KEYS);
    });

    it('keeps the growth block of docs/sweep.md and the volume table of docs/deploy.md as generated', () => {
      for (const [file, replace] of [
        ['docs/sweep.md', (t: string) => replaceGrowthFigures(t, growth, 'docs/sweep.md')],
        ['docs/deploy.md', (t: string) => replaceVolumeTable(t, growth)],
      ] as const) {
        const text = readFileSync(path.join(__dirname, '../..', file), 'utf8');
        expect(replace(text)).toBe(text);
      }
      expect(renderGrowthReport(growth)).toContain('| growth-1000000perday-365d |');
      expect(
        renderVolumeTable(growth)
          .split('\n')
          .filter((l) => /^\| \d/.test(l)),
      ).toHaveLength(GROWTH_RATES.length);
    });
  });
});
