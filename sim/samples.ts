import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { inflateSync } from 'node:zlib';
import type { AnalysisResult } from '../worker/src/contract/analysis';

/** The repository's root (this file sits one folder below it). */
const ROOT = path.join(__dirname, '..');

/** The invoices of samples/invoices whose name ends with `extension` (name and bytes), in a stable order. */
function sampleInvoices(extension: string, what: string): Array<{ name: string; bytes: Buffer }> {
  const dir = path.join(ROOT, 'samples/invoices');
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(extension))
    .sort();
  if (files.length === 0) throw new Error(`no ${what} in ${dir}`);
  return files.map((f) => ({ name: f, bytes: readFileSync(path.join(dir, f)) }));
}

/**
 * The text invoices of samples/invoices (name and bytes), in a stable order: the documents of the
 * fault simulator's runs and of the benchmark's loads.
 */
export function textInvoices(): Array<{ name: string; bytes: Buffer }> {
  return sampleInvoices('.txt', 'text invoices');
}

/** The PDF invoices of samples/invoices (text-layer PDFs with no e-invoice in them), in a stable order. */
export function pdfInvoices(): Array<{ name: string; bytes: Buffer }> {
  return sampleInvoices('.pdf', 'PDF invoices');
}

/**
 * One e-invoice of each kind the simulator uploads, with the invoice number its XML states (read
 * here with a pattern, independently of the worker's reader): a CII and a UBL XML of the EN 16931
 * examples (sim/e-invoices, Apache-2.0, from ZUGFeRD/corpus) and a Factur-X PDF of the evaluation's
 * tuning corpus.
 */
export async function eInvoiceSamples(): Promise<
  Record<'facturX' | 'cii' | 'ubl', { bytes: Buffer; invoiceNumber: string }>
> {
  const read = (...parts: string[]) => readFileSync(path.join(ROOT, ...parts));
  const numberOf = (xml: string, pattern: RegExp) => {
    const found = pattern.exec(xml)?.[1];
    if (!found) throw new Error(`no invoice number in the sample e-invoice (${pattern.source})`);
    return found.trim();
  };
  const cii = /<rsm:ExchangedDocument>\s*<ram:ID>([^<]+)<\/ram:ID>/u;
  const facturXPath = path.join(ROOT, 'bench/corpus/zugferd-tuning/zugferd_2p1_EN16931_2_Teilrechnung.pdf');
  const ciiBytes = read('sim/e-invoices/EN16931_Einfach.cii.xml');
  const ublBytes = read('sim/e-invoices/EN16931_Einfach.ubl.xml');
  return {
    facturX: {
      bytes: readFileSync(facturXPath),
      invoiceNumber: numberOf(await attachedXml(facturXPath), cii),
    },
    cii: { bytes: ciiBytes, invoiceNumber: numberOf(ciiBytes.toString('utf8'), cii) },
    ubl: {
      bytes: ublBytes,
      invoiceNumber: numberOf(ublBytes.toString('utf8'), /<cbc:ID>([^<]+)<\/cbc:ID>/u),
    },
  };
}

/**
 * The XML of a Factur-X PDF: its embedded file's stream, found in the raw bytes by
 * its dictionary's `/Type /EmbeddedFile` (a stream is never inside an object stream) and inflated
 * here, without pdf.js, so that the worker's reader is checked against bytes it did not read.
 */
export async function attachedXml(pdfPath: string): Promise<string> {
  const bytes = readFileSync(pdfPath);
  const text = bytes.toString('latin1');
  for (const match of text.matchAll(/\/Type\s*\/EmbeddedFile(?![A-Za-z0-9])/gu)) {
    const objStart = text.lastIndexOf(' obj', match.index);
    const keyword = text.indexOf('stream', match.index);
    if (keyword < 0 || text.lastIndexOf('endobj', keyword) > match.index) continue;
    const dictionary = text.slice(objStart, keyword);
    let start = keyword + 'stream'.length;
    if (bytes[start] === 0x0d) start++;
    if (bytes[start] === 0x0a) start++;
    const stored = bytes.subarray(start, text.indexOf('endstream', start));
    // The stream's end of line before `endstream` is left to the inflater, which stops at its end.
    return (/\/FlateDecode/u.test(dictionary) ? inflateSync(stored, { finishFlush: 2 }) : stored)
      .toString('utf8')
      .replace(/\r?\n?$/u, '');
  }
  throw new Error(`${pdfPath} has no embedded file`);
}

/** An analysis as the analyzers answer it: a French invoice of a small supplier; `overrides` replace fields. */
export const sampleAnalysis = (overrides: Record<string, unknown> = {}): AnalysisResult['analysis'] => ({
  document_type: 'invoice',
  language: 'fr',
  supplier_name: 'Atelier Dupont SARL',
  supplier_vat_id: 'FR12345678901',
  supplier_siren: '345678901',
  supplier_siret: null,
  customer_name: 'Client SA',
  invoice_number: 'F-2026-0042',
  issue_date: '2026-11-30',
  due_date: '2026-12-30',
  currency: 'EUR',
  net_amount: 1028.8,
  tax_amount: 205.76,
  total_amount: 1234.56,
  line_items: [],
  ...overrides,
});
