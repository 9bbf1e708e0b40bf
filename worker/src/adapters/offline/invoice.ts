import type { Analysis } from '../../contract/analysis';
import { type DecimalHint, detectCurrency, type FoundAmount, findAmounts, roundCents } from './amounts';
import { type DateOrder, findDate, numericDateOrder } from './dates';
import { findSiren, findSiret, findVatId, sirenFrom } from './ids';
import {
  BARE_TOTAL,
  CREDIT_NOTE_NUMBER_LABELS,
  CUSTOMER_LABEL,
  DUE_DATE_LABEL,
  INVOICE_NUMBER_LABELS,
  ISSUE_DATE_LABELS,
  MENTIONS_CUSTOMER,
  NOT_A_NAME,
  NOT_A_TAX_AMOUNT,
  OTHER_DATE_CONTEXT,
  SUPPLIER_LABEL,
  TAX_TOTAL,
  TITLE,
  TOTAL_LABELS,
  type TotalKind,
} from './labels';
import { parseLineItems } from './line-items';
import { isBlank, normalizeLine, splitCells } from './text';

/**
 * Reads the fields of {@link Analysis} from the lines of an invoice's text, French or English.
 * Every field it cannot find is null; it never guesses a value that is not written (except the
 * third of net/tax/total when the other two are there, and a SIREN contained in a SIRET or a French
 * VAT id).
 */

/** The analysis of a document with no readable text: valid, and empty. */
export function emptyAnalysis(): Analysis {
  return {
    document_type: 'other',
    language: 'other',
    supplier_name: null,
    supplier_vat_id: null,
    supplier_siren: null,
    supplier_siret: null,
    customer_name: null,
    invoice_number: null,
    issue_date: null,
    due_date: null,
    currency: null,
    net_amount: null,
    tax_amount: null,
    total_amount: null,
    line_items: [],
  };
}

const FRENCH_WORDS = new Set(
  'facture avoir tva ht ttc montant échéance client désignation quantité qté prix unitaire payer le la les de des du et pour conditions règlement paiement siret siren rcs fournisseur émetteur adresse rue jours à au sur par'.split(
    ' ',
  ),
);
const ENGLISH_WORDS = new Set(
  'invoice credit note vat subtotal due amount bill to customer quantity qty price unit the of and for payment terms days from street please thank you number within by'.split(
    ' ',
  ),
);
// Fewer hits than this and the text is too short to say.
const MIN_LANGUAGE_HITS = 3;

/** `fr`, `en`, or `other` (another language, or too little text to tell). */
export function detectLanguage(text: string): Analysis['language'] {
  let french = 0;
  let english = 0;
  for (const word of text.toLowerCase().split(/[^\p{L}]+/u)) {
    if (FRENCH_WORDS.has(word)) french += 1;
    if (ENGLISH_WORDS.has(word)) english += 1;
  }
  if (french > english && french >= MIN_LANGUAGE_HITS) return 'fr';
  if (english > french && english >= MIN_LANGUAGE_HITS) return 'en';
  return 'other';
}

/** Credit note (avoir) before invoice: a credit note names the invoice it cancels. */
export function detectDocumentType(lines: readonly string[]): Analysis['document_type'] {
  const text = lines.join('\n');
  const startsWithAvoir = lines.some((line) => splitCells(line).some((cell) => /^avoir\b/iu.test(cell)));
  if (
    startsWithAvoir ||
    /\b(?:credit\s+note|credit\s+memo|facture\s+d'avoir|note\s+de\s+cr[ée]dit)\b/iu.test(text)
  ) {
    return 'credit_note';
  }
  if (/\b(?:facture|invoice)\b/iu.test(text)) return 'invoice';
  if (/\b(?:re[çc]u|receipt|ticket\s+de\s+caisse)\b/iu.test(text)) return 'receipt';
  return 'other';
}

/** Where a label was found: the rest of its cell, then the cells and lines after it. */
interface LabelHit {
  lineIndex: number;
  /** The rest of the labelled cell, else the next cell of the line, else the next non-blank line. */
  value: string | null;
}

function nextNonBlank(lines: readonly string[], from: number): number {
  let index = from;
  while (index < lines.length && isBlank(lines[index])) index += 1;
  return index;
}

/** Every cell that starts with one of the labels, label by label, each in reading order. */
function* labelHits(lines: readonly string[], labels: readonly RegExp[]): Generator<LabelHit> {
  for (const label of labels) {
    for (const [lineIndex, line] of lines.entries()) {
      const cells = splitCells(line);
      for (const [cellIndex, cell] of cells.entries()) {
        const match = label.exec(cell);
        if (!match) continue;
        const rest = cell.slice(match[0].length).trim();
        const nextCell = cells[cellIndex + 1];
        const nextLine = lines[nextNonBlank(lines, lineIndex + 1)];
        const value = rest || nextCell || (nextLine === undefined ? null : (splitCells(nextLine)[0] ?? null));
        yield { lineIndex, value };
      }
    }
  }
}

/** The first labelled value that `accept` takes. */
function findLabel(
  lines: readonly string[],
  labels: readonly RegExp[],
  accept: (value: string) => boolean = () => true,
): LabelHit | null {
  for (const hit of labelHits(lines, labels)) {
    if (hit.value !== null && accept(hit.value)) return hit;
  }
  return null;
}

/** The customer block: from its label to the next blank line. */
function customerBlock(lines: readonly string[]): { name: string | null; lineIndexes: Set<number> } {
  const lineIndexes = new Set<number>();
  const hit = findLabel(lines, [CUSTOMER_LABEL], (value) => !NOT_A_NAME.test(value));
  if (!hit) return { name: null, lineIndexes };
  for (let index = hit.lineIndex; index < lines.length && !isBlank(lines[index]); index += 1) {
    lineIndexes.add(index);
  }
  // The name is on the label's line or on the first line of the block.
  const next = nextNonBlank(lines, hit.lineIndex + 1);
  for (let index = next; index < lines.length && !isBlank(lines[index]); index += 1) lineIndexes.add(index);
  return { name: hit.value, lineIndexes };
}

function supplierName(lines: readonly string[]): string | null {
  const labelled = findLabel(lines, [SUPPLIER_LABEL]);
  if (labelled?.value) return nameBeforeAddress(labelled.value);
  for (const line of lines) {
    const first = splitCells(line)[0];
    if (first && !TITLE.test(first)) return nameBeforeAddress(first);
  }
  return null;
}

/**
 * A letterhead often runs the name into the address on one line ("Au bon moulin SARL - 1242 chemin
 * de l'olive - 84340 Malaucène"): the name is the part before the first separator, when a later
 * part holds a number (a street or postal code).
 */
function nameBeforeAddress(cell: string): string {
  const parts = cell.split(/\s+[-–—|•·]\s+/u);
  return parts.length > 1 && parts.slice(1).some((part) => /\d/u.test(part)) ? parts[0]!.trim() : cell;
}

/** A reference such as `F-2026-0142`, `INV/2026/118` or `2026-118`: it must contain a digit. */
function referenceIn(value: string | null): string | null {
  const token = /^[#:]?\s*([\p{L}\d][\p{L}\d\-/._]*)/u.exec(value ?? '')?.[1]?.replace(/[._]+$/u, '');
  return token && /\d/u.test(token) ? token : null;
}

function documentNumber(lines: readonly string[], type: Analysis['document_type']): string | null {
  const labels =
    type === 'credit_note'
      ? [...CREDIT_NOTE_NUMBER_LABELS, ...INVOICE_NUMBER_LABELS]
      : [...INVOICE_NUMBER_LABELS, ...CREDIT_NOTE_NUMBER_LABELS];
  return referenceIn(findLabel(lines, labels, (value) => referenceIn(value) !== null)?.value ?? null);
}

function issueDate(lines: readonly string[], order: DateOrder): string | null {
  const labelled = findLabel(lines, ISSUE_DATE_LABELS, (value) => findDate(value, order) !== null);
  if (labelled?.value) return findDate(labelled.value, order);
  // "Paris, le 30 novembre 2026", or a date beside the number: the first date that is not a due date.
  for (const line of lines) {
    const date = findDate(line, order);
    if (date && !OTHER_DATE_CONTEXT.test(line)) return date;
  }
  return null;
}

function dueDate(lines: readonly string[], order: DateOrder): string | null {
  for (const [index, line] of lines.entries()) {
    const match = DUE_DATE_LABEL.exec(line);
    if (!match) continue;
    const rest = line.slice(match.index + match[0].length);
    const date = findDate(rest, order);
    if (date) return date;
    if (rest.trim() === '') return findDate(lines[nextNonBlank(lines, index + 1)] ?? '', order);
  }
  return null;
}

interface Totals {
  net: FoundAmount | null;
  tax: FoundAmount | null;
  total: FoundAmount | null;
}

function totalKind(label: string): TotalKind | null {
  for (const [kind, pattern] of TOTAL_LABELS) {
    if (!pattern.test(label)) continue;
    if (kind === 'tax' && NOT_A_TAX_AMOUNT.test(label)) return null;
    return kind;
  }
  return null;
}

/**
 * The last net, total and tax lines outside the items table. Several tax lines (one per VAT rate)
 * add up, unless a "Total TVA" line gives the sum.
 */
function findTotals(lines: readonly string[], skip: ReadonlySet<number>, hint: DecimalHint): Totals {
  const totals: Totals = { net: null, tax: null, total: null };
  let bareTotal: FoundAmount | null = null;
  const taxes: FoundAmount[] = [];
  let taxTotal: FoundAmount | null = null;
  for (const [index, line] of lines.entries()) {
    if (skip.has(index) || findVatId(line)) continue;
    const amounts = findAmounts(line, hint);
    const last = amounts[amounts.length - 1];
    if (!last) continue;
    const label = line.slice(0, amounts[0]!.index);
    if (BARE_TOTAL.test(label.replace(/[\t:]/gu, ' '))) bareTotal = last;
    const kind = totalKind(label);
    if (kind === 'tax') {
      if (TAX_TOTAL.test(label)) taxTotal = last;
      else taxes.push(last);
    } else if (kind) totals[kind] = last;
  }
  totals.total ??= bareTotal;
  totals.tax =
    taxTotal ??
    (taxes.length === 0
      ? null
      : { ...taxes[0]!, value: roundCents(taxes.reduce((sum, tax) => sum + tax.value, 0)) });
  return totals;
}

/** Fills the third of net, tax and total when the other two are known. */
function completeAmounts(net: number | null, tax: number | null, total: number | null) {
  if (net !== null && tax !== null && total === null) return { net, tax, total: roundCents(net + tax) };
  if (net !== null && tax === null && total !== null) return { net, tax: roundCents(total - net), total };
  if (net === null && tax !== null && total !== null) return { net: roundCents(total - tax), tax, total };
  return { net, tax, total };
}

function decimalHintFor(language: Analysis['language']): DecimalHint {
  if (language === 'fr') return ',';
  if (language === 'en') return '.';
  return null;
}

/** The invoice fields of a document's text lines. */
export function extractInvoice(rawLines: readonly string[]): Analysis {
  const lines = rawLines.map(normalizeLine);
  const text = lines.join('\n');
  if (text.trim() === '') return emptyAnalysis();

  const language = detectLanguage(text);
  const dateOrder = numericDateOrder(text);
  const hint = decimalHintFor(language);
  const documentType = detectDocumentType(lines);
  const customer = customerBlock(lines);
  const supplierText = lines
    .filter((line, index) => !customer.lineIndexes.has(index) && !MENTIONS_CUSTOMER.test(line))
    .join('\n');
  const lineItems = parseLineItems(lines, hint);
  const found = findTotals(lines, lineItems.lineIndexes, hint);
  const amounts = completeAmounts(
    found.net?.value ?? null,
    found.tax?.value ?? null,
    found.total?.value ?? null,
  );
  const vatId = findVatId(supplierText);
  const siret = findSiret(supplierText);

  return {
    document_type: documentType,
    language,
    supplier_name: supplierName(lines),
    supplier_vat_id: vatId,
    supplier_siren: findSiren(supplierText) ?? sirenFrom(siret, vatId),
    supplier_siret: siret,
    customer_name: customer.name,
    invoice_number: documentNumber(lines, documentType),
    issue_date: issueDate(lines, dateOrder),
    due_date: dueDate(lines, dateOrder),
    currency:
      found.total?.currency ?? found.net?.currency ?? found.tax?.currency ?? detectCurrency(text) ?? null,
    net_amount: amounts.net,
    tax_amount: amounts.tax,
    total_amount: amounts.total,
    line_items: lineItems.items,
  };
}
