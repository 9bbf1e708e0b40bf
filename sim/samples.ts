import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** The repository's root (this file sits one folder below it). */
const ROOT = path.join(__dirname, '..');

/**
 * The text invoices of samples/invoices (name and bytes), in a stable order: the documents of the
 * fault simulator's runs and of the benchmark's loads.
 */
export function textInvoices(): Array<{ name: string; bytes: Buffer }> {
  const dir = path.join(ROOT, 'samples/invoices');
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.txt'))
    .sort();
  if (files.length === 0) throw new Error(`no text invoices in ${dir}`);
  return files.map((f) => ({ name: f, bytes: readFileSync(path.join(dir, f)) }));
}
