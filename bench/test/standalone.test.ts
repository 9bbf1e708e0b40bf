import { readFileSync } from 'node:fs';
import path from 'node:path';
import { typescriptSources } from '../../worker/test/support/source-files';

const BENCH = path.join(__dirname, '..');
const TESTS = path.join(BENCH, 'test') + path.sep;

describe('the benchmark', () => {
  // What the benchmark shares with the worker's tests (the BigQuery server, the sample analysis,
  // the token for local clients) lives in sim/, so the benchmark runs without the test folders.
  it('takes nothing from the worker’s tests outside its own tests', () => {
    const offenders = typescriptSources(BENCH)
      .filter((f) => !f.startsWith(TESTS))
      .filter((f) => /['"](\.\.\/)+worker\/test\//.test(readFileSync(f, 'utf8')));
    expect(offenders.map((f) => path.relative(BENCH, f))).toEqual([]);
  });

  it('finds its own files (the check above looks at something)', () => {
    expect(typescriptSources(BENCH).filter((f) => !f.startsWith(TESTS)).length).toBeGreaterThan(10);
  });
});
