import type { Agreement, Analysis, ReadHow } from '../../../contract/analysis';
import { type DecimalHint, detectCurrency, type FoundAmount, findAmounts, roundCents } from './amounts';
import { type DateOrder, findDate, numericDateOrder } from './dates';
import { findSiren, findSiret, findVatId, sirenFrom } from './ids';
import {
  BARE_NUMBER_LABEL,
  BARE_TOTAL,
  CREDIT_NOTE_NUMBER_LABELS,
  CURRENCY_LABEL,
  CUSTOMER_LABEL,
  DELIVERY_HEADING,
  DUE_DATE_LABEL,
  INVOICE_HEADING,
  INVOICE_NUMBER_LABELS,
  ISSUE_DATE_LABELS,
  MENTIONS_CUSTOMER,
  NAME_FIELD,
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
  // A German "Gutschrift" is also a self-billed invoice (the buyer bills itself on the seller's
  // behalf): an invoice, not a credit note, when it says so.
  const selfBilled =
    /selbst\s*ausgestellte\s+rechnung|selbstfakturierung|self[-\s]billing|self[-\s]billed|autofacturation|autofactura/iu.test(
      text,
    );
  if (
    !selfBilled &&
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
  /** Every place the value may be, in that order: the rest, the column below, the next cell, the line below. */
  candidates: string[];
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
  if (header.length < 2 || below.length !== header.length) return null;
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
        const belowCells = nextLine === undefined ? [] : splitCells(nextLine);
        const candidates = [
          rest,
          columnBelow(lines, lineIndex, cellIndex),
          nextCell,
          // Below the label: the cell in its column when the lines have as many cells, else the first
          // (only when nothing else shares the label's line: then the first cell below is its value).
          belowCells.length === cells.length ? belowCells[cellIndex] : undefined,
          nextCell === undefined ? belowCells[0] : undefined,
        ].filter((candidate): candidate is string => Boolean(candidate));
        yield { lineIndex, cellIndex, rest, value: candidates[0] ?? null, candidates };
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
    const value = hit.rest ? (accept(hit.rest) ? hit.rest : undefined) : hit.candidates.find(accept);
    if (value !== undefined) return { ...hit, value };
  }
  return null;
}

// Words that name the document or a part of it, never found in a company's name.
const DOCUMENT_WORD =
  /(?<!\p{L})(?:invoices?|receipt|bill|summary|facture|re[çc]u|rechnung|quittung|factuur|factura|fattura|ricevuta|recibo)(?!\p{L})/iu;

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
    // A heading over the delivery address: its name is below it.
    !DELIVERY_HEADING.test(cell) &&
    // A remark in brackets, or a heading that names the document ("Retail Invoices/Bill").
    !/^[([*\-–]/u.test(cell) &&
    // A label whose value is elsewhere ("Globale Nummer:"), or a legal form alone ("GmbH").
    !/:\s*$/u.test(cell) &&
    /\p{L}{2,}/u.test(cell.replace(LEGAL_FORM_WORDS, '')) &&
    !DOCUMENT_WORD.test(cell) &&
    // A label alone ("Verkäufer:"), not a name that starts with the word ("Lieferant GmbH").
    cell.replace(CUSTOMER_LABEL, '') !== '' &&
    cell.replace(SUPPLIER_LABEL, '') !== '' &&
    totalKind(cell) === null &&
    !BARE_TOTAL.test(cell)
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
  // Labels side by side over their values ("Factuuradres  Afleveradres", then the two names).
  const below = splitCells(lines[nextNonBlank(lines, hit.lineIndex + 1)] ?? '');
  const inColumn = cells.length > 1 && below.length === cells.length ? below[hit.cellIndex] : undefined;
  if (inColumn && looksLikeName(inColumn) && !/\d/u.test(inColumn)) return inColumn;
  const beside = cells[hit.cellIndex + 1];
  if (beside && looksLikeName(beside)) return beside;
  for (let index = hit.lineIndex + 1, seen = 0; index < lines.length && seen < 6; index += 1) {
    if (isBlank(lines[index])) {
      if (seen > 0) break;
      continue;
    }
    seen += 1;
    const below = splitCells(lines[index]!);
    const at = below.length === cells.length ? hit.cellIndex : 0;
    const cell = below[at];
    // A form under the party's heading: "Name: Lieferant GmbH", or its value a column apart.
    const field = cell && NAME_FIELD.exec(cell);
    const value = field ? cell.slice(field[0].length).trim() || (below[at + 1] ?? '') : '';
    if (field && looksLikeName(value)) return value;
    // In the block, a line with digits is an address or an identifier, not the name.
    if (cell && looksLikeName(cell) && !/\d/u.test(cell)) return cell;
  }
  return null;
}

// Where a letter's return address line may be: above the address window, in the first lines.
const SENDER_LINE_WITHIN = 20;
// The separators of a return address line: bullets, bars, dashes between spaces, commas.
const SENDER_SEPARATOR = /\s*[•·●|,]\s*|\s+[-–—]\s+/u;

/**
 * A letter's return address line, printed small above the address window ("QualityHosting AG -
 * Uferweg 40-42 - D-63571 Gelnhausen", "Bei Spiel GmbH ● Ecke 12 ● 12345 Stadthausen"): the
 * sender's name, then its address, one line. The window below it holds the recipient's address.
 */
function senderLine(lines: readonly string[]): { index: number; name: string } | null {
  for (const [index, line] of lines.slice(0, SENDER_LINE_WITHIN).entries()) {
    const parts = line
      .replace(/\t/gu, ' ')
      .split(SENDER_SEPARATOR)
      .map((part) => part.trim())
      .filter((part) => part !== '');
    if (parts.length < 3) continue;
    // A postal code in the address part: four or five digits, maybe after a country letter.
    if (!parts.slice(1).some((part) => /(?<![\d/])(?:[A-Z]{1,2}-)?\d{4,5}\s+\p{L}/u.test(part))) continue;
    if (looksLikeName(parts[0]!) && !/\d/u.test(parts[0]!)) return { index, name: parts[0]! };
  }
  return null;
}

/** The recipient in a letter's address window: the first name under the return address line. */
function addresseeAfter(lines: readonly string[], sender: number): number | null {
  for (let index = sender + 1, seen = 0; index < lines.length && seen < 4; index += 1) {
    if (isBlank(lines[index])) continue;
    const cell = splitCells(lines[index]!)[0];
    // The heading of the window's block ("Adresse de livraison") is not one of its lines.
    if (cell && DELIVERY_HEADING.test(cell)) continue;
    seen += 1;
    if (cell && looksLikeName(cell) && !/\d/u.test(cell)) return index;
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
  if (!hit) {
    // No label: a letter names its recipient in the address window, under the return address.
    const sender = senderLine(lines);
    const addressee = sender ? addresseeAfter(lines, sender.index) : null;
    if (addressee === null) return { name: null, lineIndexes };
    for (let index = addressee; index < lines.length && !isBlank(lines[index]); index += 1)
      lineIndexes.add(index);
    return { name: splitCells(lines[addressee]!)[0]!, lineIndexes };
  }
  for (let index = hit.lineIndex; index < lines.length && !isBlank(lines[index]); index += 1) {
    lineIndexes.add(index);
  }
  // The name is on the label's line or on the first line of the block.
  const next = nextNonBlank(lines, hit.lineIndex + 1);
  for (let index = next; index < lines.length && !isBlank(lines[index]); index += 1) lineIndexes.add(index);
  return { name, lineIndexes };
}

// Legal forms that mark a company's name in a letterhead, in the languages read.
const LEGAL_FORM_SOURCE = String.raw`(?<!\p{L})(?:SAS|SASU|SARL|EURL|SA|SCI|SNC|GmbH|AG|KG|OHG|UG|e\.\s?K\.|B\.\s?V\.|N\.\s?V\.|BV|NV|Ltd\.?|Limited|LLC|LLP|Inc\.?|Corp\.?|PLC|S\.\s?L\.|S\.\s?A\.|S\.\s?r\.\s?l\.|S\.\s?p\.\s?A\.|Srl|SpA|Sp\.\s?z\s?o\.\s?o\.)(?!\p{L})`;
const LEGAL_FORM_WORDS = new RegExp(LEGAL_FORM_SOURCE, 'gu');
const LEGAL_FORM = new RegExp(LEGAL_FORM_SOURCE, 'u');

/**
 * The supplier's name: after a supplier label; else, in the header block (the lines before the
 * first blank-separated block that names the customer, or the first dozen lines), the first cell
 * that carries a legal form; else the first cell that looks like a name.
 */
function supplierName(lines: readonly string[], customerLines: ReadonlySet<number>): Found<string> {
  for (const hit of labelHits(lines, [SUPPLIER_LABEL])) {
    const name = nameAfterLabel(lines, hit);
    if (name) return { value: nameBeforeAddress(name), how: 'labelled' };
  }
  const sender = senderLine(lines);
  if (sender) return { value: sender.name, how: 'layout' };
  const header: string[] = [];
  for (const [index, line] of lines.entries()) {
    if (header.length >= HEADER_LINES) break;
    if (customerLines.has(index) || MENTIONS_CUSTOMER.test(line)) continue;
    header.push(...splitCells(line));
  }
  const formal = header.find((cell) => LEGAL_FORM.test(cell) && looksLikeName(nameBeforeAddress(cell)));
  if (formal) return { value: nameBeforeAddress(formal), how: 'layout' };
  const named = header.find((cell) => looksLikeName(cell) && !/\d/u.test(nameBeforeAddress(cell)));
  return named ? { value: nameBeforeAddress(named), how: 'guess' } : NOT_FOUND;
}

/** A value found, and how (contract/analysis.ts `ReadHow`); null when not found. */
interface Found<T> {
  value: T | null;
  how?: ReadHow;
}
const NOT_FOUND = { value: null } as const;

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
): { number: string | null; lineIndex: number | null; how?: ReadHow } {
  const labels =
    type === 'credit_note'
      ? [...CREDIT_NOTE_NUMBER_LABELS, ...INVOICE_NUMBER_LABELS]
      : [...INVOICE_NUMBER_LABELS, ...CREDIT_NOTE_NUMBER_LABELS];
  const hit = findLabel(lines, labels, (value) => referenceIn(value) !== null);
  if (hit) return { number: referenceIn(hit.value), lineIndex: hit.lineIndex, how: 'labelled' };
  // A form: "Rechnungsdaten" over "Nummer: 471102", "Datum: 05.03.2018".
  for (const [index, line] of lines.entries()) {
    if (!INVOICE_HEADING.test(line.trim())) continue;
    const section = lines.slice(index + 1, index + 9);
    const field = findLabel(section, [BARE_NUMBER_LABEL], (value) => referenceIn(value) !== null);
    if (field)
      return { number: referenceIn(field.value), lineIndex: index + 1 + field.lineIndex, how: 'layout' };
  }
  return { number: null, lineIndex: null };
}

function issueDate(
  lines: readonly string[],
  order: DateOrder,
  numberLine: number | null,
  numberHow?: ReadHow,
): Found<string> {
  const labelled = findLabel(lines, ISSUE_DATE_LABELS, (value) => findDate(value, order) !== null);
  if (labelled?.value) return { value: findDate(labelled.value, order), how: 'labelled' };
  // "Rechnung Nr. 471113 vom 13.06.2018", "Invoice # RE-507 issued at 2019-06-10": the number's date.
  // On the line of a labelled number it is labelled too: the title names the invoice and the date
  // dates it (on the tuning corpora, 60 of 60 such dates are right, text layer and OCR alike).
  const besideNumber = numberLine === null ? null : findDate(lines[numberLine] ?? '', order);
  if (besideNumber && !DUE_DATE_LABEL.test(lines[numberLine!]!))
    return { value: besideNumber, how: numberHow === 'labelled' ? 'labelled' : 'layout' };
  // "Paris, le 30 novembre 2026", or a date beside the number: the first date that is not a due date.
  for (const line of lines) {
    const date = findDate(line, order);
    if (date && !OTHER_DATE_CONTEXT.test(line)) return { value: date, how: 'guess' };
  }
  return NOT_FOUND;
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
    // A column header ("Beschreibung  Fälligkeit  Teilzahlung"): its date is on one of the next lines.
    if (!/\d/u.test(line)) {
      for (let next = index + 1, seen = 0; next < lines.length && seen < 3; next += 1) {
        if (isBlank(lines[next])) continue;
        seen += 1;
        const below = findDate(lines[next]!, order);
        if (below) return below;
      }
    }
  }
  return null;
}

interface Totals {
  net: FoundAmount | null;
  tax: FoundAmount | null;
  total: FoundAmount | null;
  /** The three were found apart and add up. */
  consistent?: boolean;
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
    // The first amount is a label's only when a label comes before it: on an items row ("1
    // Grundpreis 3,90 1 Stk 7 % VAT (S) 3,90") the leading position number is not a total, and the
    // rate column's "VAT" does not make the row's amount a tax.
    const isLabel = (label: string) =>
      totalKind(label) !== null || BARE_TOTAL.test(label.replace(/[\t:]/gu, ' '));
    const labelled = segments.filter((segment) => isLabel(segment.label));
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
  for (const row of summaryTableRows(lines, skip, hint)) candidates[row.kind].push(row.amount);
  const summedTax = taxTotal ?? sumOfTaxes(taxes);
  if (summedTax) candidates.tax.push(summedTax);
  const consistent = consistentTotals(candidates);
  if (consistent) return consistent;
  return {
    net: candidates.net[candidates.net.length - 1] ?? null,
    tax: summedTax,
    total: lastOf(candidates.total, bareTotal),
  };
}

/**
 * The tax of several tax lines: their sum (one line per VAT rate), unless the last one is the sum of
 * the others, which makes it their total under another name ("VAT (S) 16,90 7 1,18", then
 * "Steuerbetrag 1,18").
 */
function sumOfTaxes(taxes: readonly FoundAmount[]): FoundAmount | null {
  if (taxes.length === 0) return null;
  const last = taxes[taxes.length - 1]!;
  const before = roundCents(taxes.slice(0, -1).reduce((sum, tax) => sum + tax.value, 0));
  if (taxes.length > 1 && Math.abs(before - last.value) < CENT) return last;
  return { ...taxes[0]!, value: roundCents(before + last.value) };
}

/**
 * The amounts of a summary table: a header of labels ("BTW %  Grondslag  BTW bedrag  Totaal",
 * "Netto  MwSt.  Brutto") over a line of as many cells; each amount is of its header's kind.
 */
function* summaryTableRows(
  lines: readonly string[],
  skip: ReadonlySet<number>,
  hint: DecimalHint,
): Generator<{ kind: TotalKind; amount: FoundAmount }> {
  for (const [index, line] of lines.entries()) {
    if (skip.has(index) || /\d/u.test(line.replace(/%/gu, ''))) continue;
    const header = splitCells(line);
    const kinds = header.map((cell) => (BARE_TOTAL.test(cell) ? 'total' : totalKind(cell)));
    // Every header cell names a sum (or a rate): an items table's header ("Product  Price  Total") is not one.
    if (header.length < 2 || kinds.some((kind, column) => kind === null && !/%/u.test(header[column]!)))
      continue;
    const next = nextNonBlank(lines, index + 1);
    if (skip.has(next)) continue;
    const cells = splitCells(lines[next] ?? '');
    if (cells.length !== header.length) continue;
    for (const [column, kind] of kinds.entries()) {
      // A rate column ("BTW %", "USt. %") holds percentages, never amounts.
      if (!kind || /%/u.test(header[column]!)) continue;
      const amounts = findAmounts(cells[column]!, hint);
      if (amounts.length === 1) yield { kind, amount: amounts[0]! };
    }
  }
}

function lastOf(found: readonly FoundAmount[], bare: FoundAmount | null): FoundAmount | null {
  // A labelled total ("Total TTC") wins over a bare "Total".
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
      if (tax) return { net, tax, total, consistent: true };
    }
  }
  return null;
}

/** Fills the third of net, tax and total when the other two are known; `derived` names it. */
function completeAmounts(
  net: number | null,
  tax: number | null,
  total: number | null,
): { net: number | null; tax: number | null; total: number | null; derived?: 'net' | 'tax' | 'total' } {
  if (net !== null && tax !== null && total === null)
    return { net, tax, total: roundCents(net + tax), derived: 'total' };
  if (net !== null && tax === null && total !== null)
    return { net, tax: roundCents(total - net), total, derived: 'tax' };
  if (net === null && tax !== null && total !== null)
    return { net: roundCents(total - tax), tax, total, derived: 'net' };
  return { net, tax, total };
}

/** The currency a label names ("Rechnungswährung : GBP"), in capitals as ISO 4217 writes it. */
function labelledCurrency(lines: readonly string[]): string | null {
  for (const line of lines) {
    const code = CURRENCY_LABEL.exec(line)?.[1];
    if (code && /^[A-Z]{3}$/u.test(code)) return code;
  }
  return null;
}

function decimalHintFor(language: Analysis['language']): DecimalHint {
  if (language === 'fr') return ',';
  if (language === 'en') return '.';
  return null;
}

/** The invoice fields of a document's text lines. */
export function extractInvoice(rawLines: readonly string[]): Analysis {
  return readInvoice(rawLines).analysis;
}

/** How each field the page gave was found (core/review.ts weighs it). */
export type FieldHows = Partial<Record<keyof Analysis, ReadHow>>;

/**
 * Per field, what the rest of the page says of the value read (contract/analysis.ts `Agreement`);
 * absent: nothing to compare it with. core/review.ts raises or lowers the field's confidence by it.
 */
export type FieldAgreements = Partial<Record<'supplier_name' | 'issue_date', Agreement>>;

// Within this many days of another date of the page (a due date, a delivery date), an issue date is
// borne out: a misread digit moves it by a year or a month's worth of days past every other date.
const RELATED_DATES_DAYS = 183;
const DAY_MS = 86_400_000;

// A cell of a line: its text and the column it starts at (cells are apart by a tab or two spaces).
function cellsAt(line: string): { text: string; at: number }[] {
  return [...line.matchAll(/[^\t ]+(?: [^\t ]+)*/gu)].map((m) => ({ text: m[0], at: m.index }));
}

// How far apart, in characters, two cells may start and still be one column.
const SAME_COLUMN = 3;

/**
 * Whether the page writes the name on, past where it was read: on a line where the name is a cell of
 * its own, the line right under it (no blank line between) has, in the same column, another cell
 * that looks like a name and holds no digit, as a name too long for its column wraps onto a second
 * line ("Musterhafter Versicherungsverein" / "Musterstadt a.G."). Then the value read may be the
 * name's first line only. A name ending in a legal form is whole and is not asked about; an address
 * or an identifier under the name (digits) does not go on with it.
 */
function nameGoesOn(lines: readonly string[], name: string): boolean {
  for (const [index, line] of lines.entries()) {
    const own = cellsAt(line).find((cell) => cell.text === name);
    if (!own) continue;
    const next = lines[index + 1];
    if (isBlank(next)) continue;
    const below = cellsAt(next!).find((cell) => Math.abs(cell.at - own.at) <= SAME_COLUMN);
    if (below && looksLikeName(below.text) && !/\d/u.test(below.text)) return true;
  }
  return false;
}

/**
 * What the rest of the page says of the supplier's name and the issue date. A name written in the
 * customer's block is contradicted (the page gives it to the other party), and so is a name without a
 * legal form that the page writes on, onto the line under it ({@link nameGoesOn}: the page does not
 * say where the name ends, and the value read may be its first line only). Otherwise it is borne out
 * by a legal form ("GmbH", "SAS": it names a company, not a column or a month), by being written on
 * another line of the page too (a footer, a return address), or by a word of it in the page's mail or
 * web address; else it stands alone. An issue date is borne out by another date of the page within
 * {@link RELATED_DATES_DAYS}, stands alone when the page has other dates but none that close.
 */
export function agreements(
  lines: readonly string[],
  analysis: Analysis,
  order: DateOrder,
  customerLines: ReadonlySet<number> = new Set(),
): FieldAgreements {
  const agreed: FieldAgreements = {};
  const name = analysis.supplier_name;
  if (name !== null) {
    const lower = name.toLowerCase();
    const writtenAt = [...lines.keys()].filter((index) => lines[index]!.toLowerCase().includes(lower));
    const addresses = (
      lines
        .join(' ')
        .toLowerCase()
        .match(/[\p{L}\d._-]+@[\p{L}\d.-]+|www\.[\p{L}\d.-]+|https?:\/\/[\p{L}\d.-]+/gu) ?? []
    ).join(' ');
    const inAddress = (lower.match(/\p{L}{4,}/gu) ?? []).some((word) => addresses.includes(word));
    const formal = LEGAL_FORM.test(name);
    const contradicted =
      writtenAt.some((index) => customerLines.has(index)) || (!formal && nameGoesOn(lines, name));
    agreed.supplier_name = contradicted
      ? 'contradicted'
      : formal || writtenAt.length >= 2 || inAddress
        ? 'borne_out'
        : 'alone';
  }
  const issued = analysis.issue_date;
  if (issued !== null) {
    const others: string[] = [];
    let seenItself = false;
    for (const line of lines)
      for (const cell of splitCells(line)) {
        const date = findDate(cell, order);
        if (date === null) continue;
        // The issue date's own place is not a second witness; a second writing of it is.
        if (date === issued && !seenItself) seenItself = true;
        else others.push(date);
      }
    if (others.length > 0)
      agreed.issue_date = others.some(
        (date) => Math.abs(Date.parse(date) - Date.parse(issued)) <= RELATED_DATES_DAYS * DAY_MS,
      )
        ? 'borne_out'
        : 'alone';
  }
  return agreed;
}

/** {@link extractInvoice}, with how each field it found was found and what the page says of it. */
export function readInvoice(rawLines: readonly string[]): {
  analysis: Analysis;
  how: FieldHows;
  agreed: FieldAgreements;
} {
  const lines = rawLines.map(normalizeLine);
  const text = lines.join('\n');
  if (text.trim() === '') return { analysis: emptyAnalysis(), how: {}, agreed: {} };

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
  const labelledSiren = findSiren(supplierText);
  const number = documentNumber(lines, documentType);
  const supplier = supplierName(lines, customer.lineIndexes);
  const issued = issueDate(lines, dateOrder, number.lineIndex, number.how);
  const labelledCode = labelledCurrency(lines);
  const amountCurrency = found.total?.currency ?? found.net?.currency ?? found.tax?.currency ?? null;
  const amountHow = (kind: 'net' | 'tax' | 'total'): ReadHow =>
    amounts.derived === kind ? 'derived' : found.consistent ? 'cross_checked' : 'labelled';

  const analysis: Analysis = {
    document_type: documentType,
    language,
    supplier_name: supplier.value,
    supplier_vat_id: vatId,
    supplier_siren: labelledSiren ?? sirenFrom(siret, vatId),
    supplier_siret: siret,
    customer_name: customer.name,
    invoice_number: number.number,
    issue_date: issued.value,
    due_date: dueDate(lines, dateOrder),
    currency: labelledCode ?? amountCurrency ?? detectCurrency(text) ?? null,
    net_amount: amounts.net,
    tax_amount: amounts.tax,
    total_amount: amounts.total,
    line_items: lineItems.items,
  };
  const how: FieldHows = {
    supplier_name: supplier.how,
    supplier_vat_id: 'pattern',
    supplier_siren: labelledSiren ? 'labelled' : 'derived',
    supplier_siret: 'labelled',
    invoice_number: number.how,
    issue_date: issued.how,
    due_date: 'labelled',
    currency: labelledCode ? 'labelled' : amountCurrency ? 'layout' : 'guess',
    net_amount: amountHow('net'),
    tax_amount: amountHow('tax'),
    total_amount: amountHow('total'),
  };
  // Only the fields found: a field left null has no "how".
  for (const field of Object.keys(how) as Array<keyof FieldHows>)
    if (analysis[field] === null || how[field] === undefined) delete how[field];
  return { analysis, how, agreed: agreements(lines, analysis, dateOrder, customer.lineIndexes) };
}
