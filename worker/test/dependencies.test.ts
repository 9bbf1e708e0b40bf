import { readFileSync } from 'node:fs';
import path from 'node:path';
import { typescriptSources } from './support/source-files';

/**
 * The image installs production dependencies only (`npm ci --omit=dev` in worker/Dockerfile) and
 * deletes the compiled offline analyzer. So every package the rest of the worker loads at run time
 * must be a production dependency, and the offline analyzer's own packages need not be.
 */
const ROOT = path.join(__dirname, '..', '..');
const SRC = path.join(ROOT, 'worker', 'src');
const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

/** Files the Dockerfile deletes from the image: `adapters/analyzers/offline/` and `adapters/analyzers/offline-analyzer.*`. */
const notInImage = (file: string) =>
  /^adapters\/analyzers\/offline(\/|-analyzer\.)/.test(path.relative(SRC, file));

/** The packages a file loads at run time (type-only imports are erased by the compiler). */
function runtimePackages(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = [
    ...[...text.matchAll(/^import\s+(?!type\s)[^'"]*?from\s+'([^']+)'/gm)].map((m) => m[1]!),
    ...[...text.matchAll(/^import\s+'([^']+)'/gm)].map((m) => m[1]!),
    ...[...text.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g)].map((m) => m[1]!),
  ];
  return specifiers
    .filter((s) => !s.startsWith('.') && !s.startsWith('node:'))
    .map((s) => (s.startsWith('@') ? s.split('/').slice(0, 2).join('/') : s.split('/')[0]!));
}

describe('the worker image', () => {
  const files = typescriptSources(SRC);

  it('finds the packages the worker imports', () => {
    const all = new Set(files.flatMap(runtimePackages));
    expect(all).toContain('express');
    expect(all).toContain('unpdf');
  });

  it('gets every package the service loads from the production dependencies', () => {
    const missing = files
      .filter((file) => !notInImage(file))
      .flatMap((file) =>
        runtimePackages(file)
          .filter((name) => !(name in pkg.dependencies))
          .map((name) => `${path.relative(ROOT, file)} imports ${name}`),
      );
    expect(missing).toEqual([]);
  });

  it('keeps the offline analyzer’s own packages out of the production dependencies', () => {
    const offlineOnly = new Set(files.filter(notInImage).flatMap(runtimePackages));
    for (const file of files.filter((f) => !notInImage(f))) {
      for (const name of runtimePackages(file)) offlineOnly.delete(name);
    }
    // OCR is the offline analyzer's alone; pdf.js (unpdf) reads Factur-X attachments in the service too.
    expect([...offlineOnly].sort()).toEqual(['tesseract.js']);
    for (const name of ['tesseract.js', '@tesseract.js-data/eng', '@tesseract.js-data/fra']) {
      expect(Object.keys(pkg.dependencies)).not.toContain(name);
      expect(Object.keys(pkg.devDependencies)).toContain(name);
    }
    expect(Object.keys(pkg.dependencies)).toContain('unpdf');
  });

  it('has one PDF library: pdf.js, never pdf-lib, in what the service loads or the repository installs', () => {
    // The samples, tests and benchmark write their PDFs with samples/pdf-writer.ts.
    expect(Object.keys({ ...pkg.dependencies, ...pkg.devDependencies })).not.toContain('pdf-lib');
    const loaders = files.filter((file) => runtimePackages(file).includes('pdf-lib'));
    expect(loaders).toEqual([]);
  });
});
