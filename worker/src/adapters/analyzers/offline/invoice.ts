import type { Analysis } from '../../../contract/analysis';
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
  if (
    /(?<!\p{L})(?:gutschrift|creditnota|nota\s+de\s+cr[ée]dito|nota\s+di\s+credito|factura\s+rectificativa)(?!\p{L})/iu.test(
      text,
    )
  ) {
    return 'credit_note';
  }
  // German and Dutch write the word in compounds: "Mietrechnung", "Rechnungsnr.", "Factuurnummer".
  if (
    /(?<!\p{L})(?:facture|invoice|\p{L}*rechnung\p{L}*|factuur\p{L}*|factura|fattura)(?!\p{L})/iu.test(text)
  )
    return 'invoice';
  if (/\b(?:re[çc]u|receipt|ticket\s+de\s+caisse)\b/iu.test(text)) return 'receipt';
  return 'other';
}

/** Where a label was found: the rest of its cell, then the cells and lines after it. */
interface LabelHit {
  lineIndex: number;
  cellIndex: number;
  /** What the label's cell holds after the label. */
  rest: string;
  /** The rest of the labelled cell, else the next cell of the line, else the next non-blank line. */
  value: string | null;
}

function nextNonBlank(lines: readonly string[], from: number): number {
  let index = from;
  while (index < lines.length && isBlank(lines[index])) index += 1;
  return index;
}

/**
 * The value under a label in a form laid out as a table: a header line of labels ("Klant  Order
 * Factuur datum  Factuur  Vervaldatum") over a line of as many values.
 */
function columnBelow(lines: readonly string[], lineIndex: number, cellIndex: number): string | null {
  const header = splitCells(lines[lineIndex] ?? '');
  const below = splitCells(lines[nextNonBlank(lines, lineIndex + 1)] ?? '');
  if (header.length < 3 || below.length !== header.length) return null;
  // A header holds labels, not amounts or dates.
  if (header.some((cell) => /\d/u.test(cell))) return null;
  return below[cellIndex] ?? null;
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
        const value =
          rest ||
          columnBelow(lines, lineIndex, cellIndex) ||
          nextCell ||
          (nextLine === undefined ? null : (splitCells(nextLine)[0] ?? null));
        yield { lineIndex, cellIndex, rest, value };
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

/**
 * Whether a cell can be a company's or a person's name: letters, not a "key: value" line ("Nummer :
 * 549910", "USt-IdNr: DE…"), not an address line, a number, a mail or a web address.
 */
function looksLikeName(cell: string): boolean {
  const letters = cell.match(/\p{L}/gu)?.length ?? 0;
  return (
    letters >= 2 &&
    letters * 2 >= cell.replace(/\s/gu, '').length &&
    !NOT_A_NAME.test(cell) &&
    !/:\s*\S/u.test(cell) &&
    !/@|www\.|https?:/iu.test(cell) &&
    !TITLE.test(cell) &&
    // A label alone ("Verkäufer:"), not a name that starts with the word ("Lieferant GmbH").
    cell.replace(CUSTOMER_LABEL, '') !== '' &&
    cell.replace(SUPPLIER_LABEL, '') !== '' &&
    totalKind(cell) === null
  );
}

/**
 * The name a label introduces: the rest of its cell, else the cell in the same column on the next
 * lines of the block (a form with the label above its value), else the first line of the block that
 * looks like a name ("Verkäufer:", then "Nummer : 549910", then the name).
 */
function nameAfterLabel(lines: readonly string[], hit: LabelHit): string | null {
  // "Client n° C-12", "Customer VAT Number": the label has a value, and it is not a name.
  if (hit.rest) return looksLikeName(hit.rest) ? hit.rest : null;
  const cells = splitCells(lines[hit.lineIndex] ?? '');
  const beside = cells[hit.cellIndex + 1];
  if (beside && looksLikeName(beside)) return beside;
  for (let index = hit.lineIndex + 1, seen = 0; index < lines.length && seen < 6; index += 1) {
    if (isBlank(lines[index])) {
      if (seen > 0) break;
      continue;
    }
    seen += 1;
    const below = splitCells(lines[index]!);
    const cell = below.length === cells.length ? below[hit.cellIndex] : below[0];
    // In the block, a line with digits is an address or an identifier, not the name.
    if (cell && looksLikeName(cell) && !/\d/u.test(cell)) return cell;
  }
  return null;
}

/** The customer block: from its label to the next blank line. */
function customerBlock(lines: readonly string[]): { name: string | null; lineIndexes: Set<number> } {
  const lineIndexes = new Set<number>();
  let hit: LabelHit | null = null;
  let name: string | null = null;
  for (const candidate of labelHits(lines, [CUSTOMER_LABEL])) {
    name = nameAfterLabel(lines, candidate);
    if (name) {
      hit = candidate;
      break;
    }
  }
  if (!hit) return { name: null, lineIndexes };
  for (let index = hit.lineIndex; index < lines.length && !isBlank(lines[index]); index += 1) {
    lineIndexes.add(index);
  }
  // The name is on the label's line or on the first line of the block.
  const next = nextNonBlank(lines, hit.lineIndex + 1);
  for (let index = next; index < lines.length && !isBlank(lines[index]); index += 1) lineIndexes.add(index);
  return { name, lineIndexes };
}

// Legal forms that mark a company's name in a letterhead, in the languages read.
const LEGAL_FORM =
  /(?<!\p{L})(?:SAS|SASU|SARL|EURL|SA|SCI|SNC|GmbH|AG|KG|OHG|UG|e\.\s?K\.|B\.\s?V\.|N\.\s?V\.|BV|NV|Ltd\.?|Limited|LLC|LLP|Inc\.?|Corp\.?|PLC|S\.\s?L\.|S\.\s?A\.|S\.\s?r\.\s?l\.|S\.\s?p\.\s?A\.|Srl|SpA|Sp\.\s?z\s?o\.\s?o\.)(?!\p{L})/u;

/**
 * The supplier's name: after a supplier label; else, in the header block (the lines before the
 * first blank-separated block that names the customer, or the first dozen lines), the first cell
 * that carries a legal form; else the first cell that looks like a name.
 */
function supplierName(lines: readonly string[], customerLines: ReadonlySet<number>): string | null {
  for (const hit of labelHits(lines, [SUPPLIER_LABEL])) {
    const name = nameAfterLabel(lines, hit);
    if (name) return nameBeforeAddress(name);
  }
  const header: string[] = [];
  for (const [index, line] of lines.entries()) {
    if (header.length >= HEADER_LINES) break;
    if (customerLines.has(index) || MENTIONS_CUSTOMER.test(line)) continue;
    header.push(...splitCells(line));
  }
  const formal = header.find((cell) => LEGAL_FORM.test(cell) && looksLikeName(nameBeforeAddress(cell)));
  if (formal) return nameBeforeAddress(formal);
  const named = header.find((cell) => looksLikeName(cell) && !/\d/u.test(nameBeforeAddress(cell)));
  return named ? nameBeforeAddress(named) : null;
}

// A letterhead sits in the first lines of the page.
const HEADER_LINES = 12;

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

function documentNumber(
  lines: readonly string[],
  type: Analysis['document_type'],
): { number: string | null; lineIndex: number | null } {
  const labels =
    type === 'credit_note'
      ? [...CREDIT_NOTE_NUMBER_LABELS, ...INVOICE_NUMBER_LABELS]
      : [...INVOICE_NUMBER_LABELS, ...CREDIT_NOTE_NUMBER_LABELS];
  const hit = findLabel(lines, labels, (value) => referenceIn(value) !== null);
  return { number: referenceIn(hit?.value ?? null), lineIndex: hit?.lineIndex ?? null };
}

function issueDate(lines: readonly string[], order: DateOrder, numberLine: number | null): string | null {
  const labelled = findLabel(lines, ISSUE_DATE_LABELS, (value) => findDate(value, order) !== null);
  if (labelled?.value) return findDate(labelled.value, order);
  // "Rechnung Nr. 471113 vom 13.06.2018", "Invoice # RE-507 issued at 2019-06-10": the number's date.
  const besideNumber = numberLine === null ? null : findDate(lines[numberLine] ?? '', order);
  if (besideNumber && !DUE_DATE_LABEL.test(lines[numberLine!]!)) return besideNumber;
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
    const cells = splitCells(line);
    const cellIndex = cells.findIndex((cell) => DUE_DATE_LABEL.test(cell));
    const below = cellIndex >= 0 ? columnBelow(lines, index, cellIndex) : null;
    const beside =
      cellIndex >= 0 ? cells[cellIndex]!.replace(DUE_DATE_LABEL, '') || cells[cellIndex + 1] : null;
    const inColumn = findDate(beside ?? '', order) ?? findDate(below ?? '', order);
    if (inColumn) return inColumn;
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
 * The net, tax and total outside the items table. Every labelled line is a candidate; when some
 * net and tax add up to some total (within a cent), that triple is taken, the latest total first:
 * a layout that prints subtotals, discounts or a "Gesamtbetrag der Zuschläge 0,00" above its totals
 * is read by arithmetic rather than by the order of its labels. Otherwise the last line of each
 * kind, several tax lines (one per VAT rate) added up unless a "Total TVA" line gives the sum.
 */
function findTotals(lines: readonly string[], skip: ReadonlySet<number>, hint: DecimalHint): Totals {
  const candidates: Record<TotalKind, FoundAmount[]> = { net: [], tax: [], total: [] };
  let bareTotal: FoundAmount | null = null;
  const taxes: FoundAmount[] = [];
  let taxTotal: FoundAmount | null = null;
  for (const [index, line] of lines.entries()) {
    if (skip.has(index) || findVatId(line)) continue;
    const amounts = findAmounts(line, hint);
    const last = amounts[amounts.length - 1];
    if (!last) continue;
    // Two labelled totals side by side ("Exclusief BTW  € 593,36  Subtotaal  € 717,97"): each label
    // owns the amount after it. Otherwise the line's label owns its last amount ("TVA 20 %  100,00  20,00").
    const segments = amounts.map((amount, i) => ({
      label: line.slice(i === 0 ? 0 : amounts[i - 1]!.end, amount.index),
      amount,
    }));
    const labelled = segments.filter((segment, i) => i === 0 || totalKind(segment.label) !== null);
    const pairs =
      labelled.length > 1
        ? labelled.map((segment) => ({ label: segment.label, amount: segment.amount, all: [segment.amount] }))
        : [{ label: segments[0]!.label, amount: last, all: amounts }];
    for (const { label, amount, all } of pairs) {
      if (BARE_TOTAL.test(label.replace(/[\t:]/gu, ' '))) {
        bareTotal = amount;
        candidates.total.push(amount);
      }
      const kind = totalKind(label);
      if (kind === 'tax') {
        if (TAX_TOTAL.test(label)) taxTotal = amount;
        else taxes.push(amount);
        for (const each of all) candidates.tax.push(each);
      } else if (kind) candidates[kind].push(amount);
    }
  }
  const summedTax =
    taxTotal ??
    (taxes.length === 0
      ? null
      : { ...taxes[0]!, value: roundCents(taxes.reduce((sum, tax) => sum + tax.value, 0)) });
  if (summedTax) candidates.tax.push(summedTax);
  const consistent = consistentTotals(candidates);
  if (consistent) return consistent;
  return {
    net: candidates.net[candidates.net.length - 1] ?? null,
    tax: summedTax,
    total: lastOf(candidates.total, bareTotal),
  };
}

function lastOf(found: readonly FoundAmount[], bare: FoundAmount | null): FoundAmount | null {
  // A labelled total ("Total TTC") over a bare "Total", as before.
  const labelled = found.filter((amount) => amount !== bare);
  return labelled[labelled.length - 1] ?? bare;
}

const CENT = 0.011;

/** A net, tax and total that add up, the latest total and net first; null when none do. */
function consistentTotals(candidates: Record<TotalKind, FoundAmount[]>): Totals | null {
  for (const total of [...candidates.total].reverse()) {
    if (total.value === 0) continue;
    for (const net of [...candidates.net].reverse()) {
      if (net.value === 0 || Math.abs(net.value) > Math.abs(total.value) + CENT) continue;
      const tax = candidates.tax.find((t) => Math.abs(net.value + t.value - total.value) < CENT);
      if (tax) return { net, tax, total };
    }
  }
  return null;
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
  const number = documentNumber(lines, documentType);

  return {
    document_type: documentType,
    language,
    supplier_name: supplierName(lines, customer.lineIndexes),
    supplier_vat_id: vatId,
    supplier_siren: findSiren(supplierText) ?? sirenFrom(siret, vatId),
    supplier_siret: siret,
    customer_name: customer.name,
    invoice_number: number.number,
    issue_date: issueDate(lines, dateOrder, number.lineIndex),
    due_date: dueDate(lines, dateOrder),
    currency:
      found.total?.currency ?? found.net?.currency ?? found.tax?.currency ?? detectCurrency(text) ?? null,
    net_amount: amounts.net,
    tax_amount: amounts.tax,
    total_amount: amounts.total,
    line_items: lineItems.items,
  };
}
