import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { attachedXml } from '../worker/test/support/e-invoices';

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
