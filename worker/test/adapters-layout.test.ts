/**
 * The adapters are grouped by the port they implement, and only the composition root picks one.
 * The folder listing is the architecture doc's table; a new adapter lands in its port's folder.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { typescriptSources } from './support/source-files';

const SRC = path.join(__dirname, '..', 'src');
const ADAPTERS = path.join(SRC, 'adapters');

/** The relative specifiers a file imports (static, dynamic and re-exports). */
function relativeImports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:from|import\(?)\s*'(\.{1,2}\/[^']+)'/g)].map((m) => m[1]!);
}

const importsAdapter = (file: string) =>
  relativeImports(file).some((spec) =>
    path.resolve(path.dirname(file), spec).startsWith(ADAPTERS + path.sep),
  );

describe('worker/src/adapters', () => {
  it('holds one folder per port with several adapters, beside the single-adapter files', () => {
    const entries = readdirSync(ADAPTERS, { withFileTypes: true })
      .map((e) => (e.isDirectory() ? `${e.name}/` : e.name))
      .sort();
    expect(entries).toEqual([
      'analyzers/',
      'e-invoice/',
      'memo-stores/',
      'pdf/',
      'push-auth.ts',
      'quota-gate.ts',
      'readers/',
      'stores/',
    ]);
  });

  it('is imported by the composition root, never by the core or the contract', () => {
    const outside = typescriptSources(SRC).filter((f) => !f.startsWith(ADAPTERS + path.sep));
    const importers = outside.filter(importsAdapter).map((f) => path.relative(SRC, f));
    expect(importers.filter((f) => f.startsWith('core') || f.startsWith('contract'))).toEqual([]);
    // main.ts picks the adapters; the reconcile sources borrow the stores' table name and error helper.
    expect(importers.sort()).toEqual(['main.ts', 'reconcile/cloud-sources.ts', 'reconcile/local-sources.ts']);
  });

  it('names each adapter file after its port folder', () => {
    const byFolder: Record<string, RegExp> = {
      analyzers: /-(analyzer|prompt)\.ts$/,
      stores: /-store\.ts$/,
      'memo-stores': /-memo-store\.ts$/,
      readers: /-(reader|bucket)\.ts$/,
    };
    for (const [folder, pattern] of Object.entries(byFolder)) {
      const files = readdirSync(path.join(ADAPTERS, folder)).filter((n) => n.endsWith('.ts'));
      expect(files.length).toBeGreaterThan(1);
      for (const name of files) expect(`${folder}/${name}`).toMatch(pattern);
    }
  });
});
