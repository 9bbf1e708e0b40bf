import { readFileSync } from 'node:fs';
import path from 'node:path';
import { typescriptSources } from '../../worker/test/support/source-files';

const SIM = path.join(__dirname, '..');

/** Whether a file's text imports (statically or not) a module under worker/test/. */
const importsWorkerTests = (text: string) => /['"](\.\.\/)+worker\/test\//.test(text);

describe('the simulator', () => {
  // Every TypeScript file under sim/, tests included.
  const files = typescriptSources(SIM);

  it('takes nothing from bench/ (what both need lives in sim/, bench imports it from there)', () => {
    const offenders = files.filter((f) => /from '(\.\.\/)+bench\//.test(readFileSync(f, 'utf8')));
    expect(offenders.map((f) => path.relative(SIM, f))).toEqual([]);
  });

  it('takes nothing from the worker’s tests outside its own tests (shared stand-ins live in sim/)', () => {
    const offenders = files.filter(
      (f) => !f.startsWith(path.join(SIM, 'test') + path.sep) && importsWorkerTests(readFileSync(f, 'utf8')),
    );
    expect(offenders.map((f) => path.relative(SIM, f))).toEqual([]);
  });

  it('says what a scenario is, not which issue it came from', () => {
    const offenders = files.filter((f) => /\bissue \d+/i.test(readFileSync(f, 'utf8')));
    expect(offenders.map((f) => path.relative(SIM, f))).toEqual([]);
  });

  it('finds its own files (the checks above look at something)', () => {
    expect(files.length).toBeGreaterThan(10);
  });
});
