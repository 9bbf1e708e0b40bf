import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { XMLParser } from 'fast-xml-parser';
import type { EInvoiceValidation } from '../../src/adapters/e-invoice/validation/validation';
import type { EInvoiceReader } from '../../src/core/ports';

/**
 * The shared EN 16931 fixtures (../shared/fixtures/e-invoices beside the repository, read in place)
 * and an oracle that reads what their XML states, written independently of the worker's reader:
 * plain property paths over fast-xml-parser's object output, namespace prefixes dropped, so that a
 * mistake in the reader's mapping or path evaluator cannot hide behind the same mistake here.
 */

const REPO_ROOT = path.join(__dirname, '..', '..', '..');
export const E_INVOICE_FIXTURES = path.resolve(REPO_ROOT, '..', 'shared', 'fixtures', 'e-invoices');

export interface Fixture {
  folder: 'factur-x-fr' | 'factur-x-fr-invalid' | 'cii' | 'ubl';
  file: string;
  path: string;
  contentType: 'application/pdf' | 'application/xml';
}

/** The files of one fixture folder, sorted. */
export function fixtures(folder: Fixture['folder']): Fixture[] {
  return readdirSync(path.join(E_INVOICE_FIXTURES, folder))
    .sort()
    .map((file) => ({
      folder,
      file,
      path: path.join(E_INVOICE_FIXTURES, folder, file),
      contentType: file.endsWith('.pdf') ? 'application/pdf' : 'application/xml',
    }));
}

/** The file `file` of one fixture folder. */
export const fixture = (folder: Fixture['folder'], file: string) =>
  fixtures(folder).find((f) => f.file === file)!;

/** What `reader` makes of fixture `f` uploaded as it is, and the validation it recorded (which must be there). */
export async function validated(reader: EInvoiceReader, f: Fixture) {
  const reading = await reader.read({
    bytes: readFileSync(f.path),
    contentType: f.contentType,
    name: f.file,
  });
  const v = (reading as { validation?: EInvoiceValidation }).validation;
  if (!v) throw new Error(`${f.file}: no validation recorded`);
  return { reading, v };
}

/** The corpus lists these as failing validation: they are not part of "every valid file". */
export const isListedInvalid = (f: Fixture) =>
  f.folder === 'factur-x-fr-invalid' || f.file.startsWith('not_validating');

/** The fields every valid file's row must equal, as the XML states them. */
export interface StatedFields {
  invoice_number: string;
  issue_date: string;
  due_date: string | null;
  currency: string;
  supplier_name: string;
  supplier_vat_id: string | null;
  net_amount: number;
  tax_amount: number | null;
  total_amount: number;
  document_type: 'invoice' | 'credit_note';
}

type Node = Record<string, unknown>;
const parser = new XMLParser({
  removeNSPrefix: true,
  ignoreAttributes: false,
  attributeNamePrefix: '@',
  parseTagValue: false,
  textNodeName: '#text',
});

const list = (value: unknown): unknown[] =>
  value === undefined ? [] : Array.isArray(value) ? value : [value];
const textOf = (value: unknown): string | undefined => {
  const first = list(value)[0];
  if (first === undefined) return undefined;
  const text = typeof first === 'object' ? (first as Node)['#text'] : first;
  return text === undefined ? undefined : String(text).trim().replace(/\s+/g, ' ');
};
const attr = (value: unknown, name: string) =>
  typeof value === 'object' ? (value as Node)[`@${name}`] : undefined;
const get = (node: unknown, ...keys: string[]): unknown =>
  keys.reduce<unknown>(
    (at, key) => (at && typeof at === 'object' ? (list(at)[0] as Node)[key] : undefined),
    node,
  );
const date102 = (s: string | undefined) => (s ? `${s.slice(0, 4)}-${s.slice(4, 6)}-${s.slice(6, 8)}` : null);
const num = (s: string | undefined) => (s === undefined ? null : Number(s));

/** What a CII or UBL invoice states, read by the oracle. */
export function statedFields(xml: string): StatedFields {
  const doc = parser.parse(xml) as Node;
  if (doc.CrossIndustryInvoice) return ciiFields(doc.CrossIndustryInvoice as Node);
  const root = (doc.Invoice ?? doc.CreditNote) as Node | undefined;
  if (!root) throw new Error('neither CII nor UBL');
  return ublFields(root, doc.CreditNote !== undefined);
}

function ciiFields(inv: Node): StatedFields {
  const settlement = get(inv, 'SupplyChainTradeTransaction', 'ApplicableHeaderTradeSettlement');
  const seller = get(
    inv,
    'SupplyChainTradeTransaction',
    'ApplicableHeaderTradeAgreement',
    'SellerTradeParty',
  );
  const totals = get(settlement, 'SpecifiedTradeSettlementHeaderMonetarySummation');
  const currency = textOf(get(settlement, 'InvoiceCurrencyCode'))!;
  const vat = list(get(seller, 'SpecifiedTaxRegistration'))
    .map((r) => get(r, 'ID'))
    .find((id) => attr(id, 'schemeID') === 'VA');
  const tax = list(get(totals, 'TaxTotalAmount')).find((t) =>
    [undefined, currency].includes(attr(t, 'currencyID') as string),
  );
  const dueTerms = list(get(settlement, 'SpecifiedTradePaymentTerms')).find((t) => get(t, 'DueDateDateTime'));
  const type = textOf(get(inv, 'ExchangedDocument', 'TypeCode'));
  return {
    invoice_number: textOf(get(inv, 'ExchangedDocument', 'ID'))!,
    issue_date: date102(textOf(get(inv, 'ExchangedDocument', 'IssueDateTime', 'DateTimeString')))!,
    due_date: date102(textOf(get(dueTerms, 'DueDateDateTime', 'DateTimeString'))),
    currency,
    supplier_name: textOf(get(seller, 'Name'))!,
    supplier_vat_id: textOf(vat) ?? null,
    net_amount: num(textOf(get(totals, 'TaxBasisTotalAmount')))!,
    tax_amount: num(textOf(tax)),
    total_amount: num(textOf(get(totals, 'GrandTotalAmount')))!,
    document_type: type === '381' ? 'credit_note' : 'invoice',
  };
}

function ublFields(inv: Node, creditNote: boolean): StatedFields {
  const seller = get(inv, 'AccountingSupplierParty', 'Party');
  const totals = get(inv, 'LegalMonetaryTotal');
  const currency = textOf(get(inv, 'DocumentCurrencyCode'))!;
  const vat = list(get(seller, 'PartyTaxScheme')).find((s) => textOf(get(s, 'TaxScheme', 'ID')) === 'VAT');
  const tax = list(get(inv, 'TaxTotal'))
    .map((t) => get(t, 'TaxAmount'))
    .find((t) => [undefined, currency].includes(attr(t, 'currencyID') as string));
  const due = textOf(get(inv, 'DueDate')) ?? textOf(get(inv, 'PaymentMeans', 'PaymentDueDate'));
  return {
    invoice_number: textOf(get(inv, 'ID'))!,
    issue_date: textOf(get(inv, 'IssueDate'))!.slice(0, 10),
    due_date: due ? due.slice(0, 10) : null,
    currency,
    supplier_name: textOf(get(seller, 'PartyLegalEntity', 'RegistrationName'))!,
    supplier_vat_id: textOf(get(vat, 'CompanyID')) ?? null,
    net_amount: num(textOf(get(totals, 'TaxExclusiveAmount')))!,
    tax_amount: num(textOf(tax)),
    total_amount: num(textOf(get(totals, 'TaxInclusiveAmount')))!,
    document_type: creditNote || textOf(get(inv, 'InvoiceTypeCode')) === '381' ? 'credit_note' : 'invoice',
  };
}
