import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { STACK_KEYS } from '../../worker/src/contract/settings';
import { parseStackConfig } from '../config';
import { settingsFiles } from '../settings-files';

const REPO = join(__dirname, '..', '..');

/** The `config` block of a Pulumi project or stack file. */
function configOf(file: string): Record<string, unknown> {
  return (load(readFileSync(join(REPO, file), 'utf8')) as { config: Record<string, unknown> }).config;
}

describe('the files written from the settings table', () => {
  it.each(settingsFiles())(
    '$file is what the table writes (run `npm run settings` after changing it)',
    ({ current, written }) => {
      expect(current).toBe(written);
    },
  );
});

describe('Pulumi.yaml', () => {
  type Declaration = { type: string; default: unknown };
  const declared = configOf('Pulumi.yaml') as Record<string, Declaration>;

  it('declares exactly the stack keys of the table', () => {
    expect(Object.keys(declared)).toEqual(STACK_KEYS);
  });

  it('declares defaults that the program reads as its own', () => {
    // Parsing the declared defaults as if the CLI had passed them must give the built-in defaults.
    const asTheCliPassesThem = Object.fromEntries(
      Object.entries(declared).map(([key, d]) => [
        key,
        Array.isArray(d.default) ? JSON.stringify(d.default) : String(d.default),
      ]),
    );
    expect(parseStackConfig('p', 'dev', asTheCliPassesThem)).toEqual(parseStackConfig('p', 'dev', {}));
  });
});

describe.each(['Pulumi.dev.yaml', 'Pulumi.prod.yaml'])('%s', (file) => {
  it('sets only keys the stack reads, and they pass its checks', () => {
    const config = configOf(file);
    const docline = Object.fromEntries(
      Object.entries(config)
        .filter(([key]) => key.startsWith('docline:'))
        .map(([key, value]) => [
          key.slice('docline:'.length),
          Array.isArray(value) ? JSON.stringify(value) : String(value),
        ]),
    );
    expect(Object.keys(docline).filter((key) => !(STACK_KEYS as string[]).includes(key))).toEqual([]);
    // An image is set by the deploy workflow for a promoted stack.
    expect(() =>
      parseStackConfig(String(config['gcp:project']), file.split('.')[1]!, { ...docline, image: 'i' }),
    ).not.toThrow();
  });
});
