import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  BENCH_FIGURES,
  type BenchResults,
  BURST_FIGURES,
  floorFailures,
  renderReport,
  replaceBenchFigures,
} from '../report';

const readme = readFileSync(path.join(__dirname, '../README.md'), 'utf8');
const results = JSON.parse(readFileSync(path.join(__dirname, '../results.json'), 'utf8')) as BenchResults;

describe('the "Latest results" figures of bench/README.md', () => {
  it('are exactly the block generated from bench/results.json', () => {
    expect(replaceBenchFigures(readme, results)).toBe(readme);
  });

  it('come from a full run, not a quick one', () => {
    expect(results.settings.quick).toBe('no');
  });

  it('say which commit they were measured on, and it is clean', () => {
    expect(results.machine.commit).toMatch(/^[0-9a-f]{7,40}$/);
    expect(readme).toContain(`commit ${results.machine.commit}`);
  });

  it('sit under the "Latest results" heading, before the burst stage', () => {
    const heading = readme.indexOf('## Latest results');
    const start = readme.indexOf(BENCH_FIGURES.start);
    const end = readme.indexOf(BENCH_FIGURES.end);
    expect(heading).toBeGreaterThanOrEqual(0);
    expect(start).toBeGreaterThan(heading);
    expect(end).toBeGreaterThan(start);
    expect(readme.slice(heading, start).trim()).toBe('## Latest results');
    expect(readme.indexOf('\n## ', heading + 1)).toBeGreaterThan(end);
  });
});

describe('replaceBenchFigures', () => {
  const text = (body: string) =>
    `# Title\n\n${BENCH_FIGURES.start}\n${body}${BENCH_FIGURES.end}\n\n${BURST_FIGURES.start}\nburst\n${BURST_FIGURES.end}\n`;

  it('replaces what is between its markers and nothing else', () => {
    expect(replaceBenchFigures(text('pasted by hand\n'), results)).toBe(text(renderReport(results)));
  });

  it('refuses a README without its markers rather than appending the figures somewhere', () => {
    expect(() => replaceBenchFigures('# Title\n', results)).toThrow(/markers are missing/);
  });
});

describe('floorFailures (the quick benchmark floor CI runs)', () => {
  const run = (http: number, cpu: number, endToEnd: number | undefined) =>
    ({
      http: { ...results.http, doclineOverNaive: http, doclineOverNaiveByCpu: cpu },
      emulator:
        endToEnd === undefined
          ? { error: 'no emulator' }
          : { ...(results.emulator as object), ratio: 1, doclineOverNaive: endToEnd },
    }) as Pick<BenchResults, 'http' | 'emulator'>;

  it('passes when every docline/naive ratio is at the floor or above', () => {
    expect(floorFailures(run(0.5, 0.9, 1.2), 0.5)).toEqual([]);
  });

  it('names each ratio under the floor: over HTTP, in CPU and end to end', () => {
    expect(floorFailures(run(0.03, 0.79, 0.4), 0.5)).toEqual([
      'docline/naive (http) is 0.03, under the floor of 0.5',
      'docline/naive (endToEnd) is 0.40, under the floor of 0.5',
    ]);
  });

  it('counts a ratio that could not be measured as under the floor', () => {
    expect(floorFailures(run(1, 1, undefined), 0.5)).toEqual([
      'docline/naive (endToEnd) is n/a, under the floor of 0.5',
    ]);
  });
});
