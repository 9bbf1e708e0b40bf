import type { Analysis } from '../../worker/src/contract/analysis';
import type { MonthRow } from './month';

/**
 * The month's documents for the accounts (`npm run export`): CSV, one line per document, and the
 * French FEC layout for purchase invoices (docs/month-end.md says where each column comes from).
 */

/** The CSV's columns, in order: the document, then the invoice the row states. */
export const CSV_COLUMNS = [
  'arrived_on',
  'object_name',
  'status',
  'reason',
  'document_type',
  'supplier_name',
  'supplier_vat_id',
  'supplier_siren',
  'supplier_siret',
  'invoice_number',
  'issue_date',
  'due_date',
  'currency',
  'net_amount',
  'tax_amount',
  'total_amount',
  'customer_name',
  'model',
  'total_tokens',
  'e_invoice_verdict',
  'review',
  'dedup_key',
] as const;

export const analysisOf = (row: MonthRow) => (row.analysis ?? {}) as Partial<Analysis>;

/** A review verdict as one cell: `none`, or its reasons separated by `; ` (empty when not recorded). */
export function reviewCell(review: unknown): string {
  if (review === undefined || review === null) return '';
  if (review === 'none') return 'none';
  if (Array.isArray(review)) return review.length === 0 ? 'none' : review.map(reasonText).join('; ');
  if (typeof review === 'object' && 'reasons' in review)
    return reviewCell((review as { reasons: unknown }).reasons);
  return String(review);
}

function reasonText(reason: unknown): string {
  if (typeof reason === 'string') return reason;
  if (reason && typeof reason === 'object') {
    const r = reason as { reason?: unknown; code?: unknown; field?: unknown };
    const what = String(r.reason ?? r.code ?? JSON.stringify(reason));
    return r.field ? `${what} (${String(r.field)})` : what;
  }
  return String(reason);
}

/** The e-invoice validation verdict of a row (`valid`, `invalid`, `unchecked`), empty when none. */
export function verdictCell(row: MonthRow): string {
  const v = row.e_invoice_validation as { verdict?: unknown } | null | undefined;
  return typeof v?.verdict === 'string' ? v.verdict : '';
}

/** One CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break. */
function csvField(value: unknown): string {
  const text = value === null || value === undefined ? '' : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/**
 * The month's documents as CSV (RFC 4180: comma, CRLF, a header line; UTF-8): every document,
 * rejected ones too (their invoice cells are empty). Amounts are written as JSON numbers (`.`).
 */
export function csvExport(rows: readonly MonthRow[]): string {
  const lines = [CSV_COLUMNS.join(',')];
  for (const row of rows) {
    const a = analysisOf(row);
    const cells: Record<(typeof CSV_COLUMNS)[number], unknown> = {
      arrived_on: row.day,
      object_name: row.object_name,
      status: row.status,
      reason: row.reason,
      document_type: a.document_type,
      supplier_name: a.supplier_name,
      supplier_vat_id: a.supplier_vat_id,
      supplier_siren: a.supplier_siren,
      supplier_siret: a.supplier_siret,
      invoice_number: a.invoice_number,
      issue_date: a.issue_date,
      due_date: a.due_date,
      currency: a.currency,
      net_amount: a.net_amount,
      tax_amount: a.tax_amount,
      total_amount: a.total_amount,
      customer_name: a.customer_name,
      model: row.model,
      total_tokens: row.total_tokens,
      e_invoice_verdict: verdictCell(row),
      review: reviewCell(row.review),
      dedup_key: row.dedup_key,
    };
    lines.push(CSV_COLUMNS.map((c) => csvField(cells[c])).join(','));
  }
  return `${lines.join('\r\n')}\r\n`;
}

/**
 * The 18 fields of the FEC, in the order and with the names of article A47 A-1 of the Livre des
 * procédures fiscales (VII, 1° to 18°), as BOI-CF-IOR-60-40-20 asks for the first line of a flat file.
 */
export const FEC_COLUMNS = [
  'JournalCode',
  'JournalLib',
  'EcritureNum',
  'EcritureDate',
  'CompteNum',
  'CompteLib',
  'CompAuxNum',
  'CompAuxLib',
  'PieceRef',
  'PieceDate',
  'EcritureLib',
  'Debit',
  'Credit',
  'EcritureLet',
  'DateLet',
  'ValidDate',
  'Montantdevise',
  'Idevise',
] as const;

/** The accounts a purchase invoice is booked on (plan comptable général), and the journal. */
export const FEC_BOOKING = {
  journal: { code: 'HA', label: 'Achats' },
  expense: { account: '607000', label: 'Achats de marchandises' },
  vat: { account: '445660', label: 'TVA déductible sur autres biens et services' },
  supplier: { account: '401000', label: 'Fournisseurs' },
} as const;

/** A document the FEC leaves out, and why (the command prints these). */
export interface FecSkip {
  object: string;
  reason: string;
}

/** `YYYY-MM-DD` as the FEC writes dates: `AAAAMMJJ`. */
const fecDate = (iso: string) => iso.slice(0, 10).replaceAll('-', '');

/** An amount as the FEC writes it: decimal, comma as the separator, two decimals, no thousands. */
export function fecAmount(value: number): string {
  return value.toFixed(2).replace('.', ',');
}

/** A text field: the field separator and line breaks cannot occur inside a field. */
const fecField = (value: unknown) =>
  String(value ?? '')
    .replace(/[\t\r\n|]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();

/** The auxiliary (supplier) account: `F` and the first identifier the row states, else its name. */
export function supplierAccount(a: Partial<Analysis>): string {
  const id = (value: string | null | undefined) => value?.replace(/[\s.\-/_]/g, '').toUpperCase();
  const siren = id(a.supplier_siren) ?? id(a.supplier_siret)?.slice(0, 9);
  const key =
    siren ||
    id(a.supplier_vat_id) ||
    (a.supplier_name ?? '')
      .normalize('NFD')
      .replace(/[^A-Za-z0-9]/g, '')
      .toUpperCase()
      .slice(0, 16);
  return `F${key || 'INCONNU'}`;
}

const CENT = 0.005 + 1e-9;

/**
 * The month's purchase invoices and credit notes as FEC entries: per document one entry (one
 * EcritureNum) of three lines: the expense (net), the deductible VAT (when there is some) and the
 * supplier (total, on the supplier's auxiliary account). An invoice debits the expense and the
 * VAT and credits the supplier; a credit note the other way round, whether its amounts are
 * written positive (EN 16931) or with a minus (a printed avoir); an invoice with negative amounts
 * changes sides too. Every entry balances. Left out, with the reason: rejected documents, documents that are
 * not invoices or credit notes, amounts missing, not in euros, or that do not add up.
 */
export function fecEntries(rows: readonly MonthRow[]): { lines: string[][]; skipped: FecSkip[] } {
  const lines: string[][] = [];
  const skipped: FecSkip[] = [];
  let sequence = 0;
  for (const row of rows) {
    const object = row.object_name ?? row.dedup_key;
    const a = analysisOf(row);
    const skip = (reason: string) => skipped.push({ object, reason });
    if (row.status !== 'ok') {
      skip(`rejected: ${String(row.reason ?? '')}`);
      continue;
    }
    if (a.document_type !== 'invoice' && a.document_type !== 'credit_note') {
      skip(`not an invoice or a credit note (${String(a.document_type)})`);
      continue;
    }
    const { net_amount: net, total_amount: total } = a;
    if (typeof net !== 'number' || typeof total !== 'number') {
      skip('net or total missing');
      continue;
    }
    if (a.currency !== 'EUR') {
      skip(`in ${String(a.currency)}, not EUR: the FEC is kept in euros (convert it and book it by hand)`);
      continue;
    }
    const tax = typeof a.tax_amount === 'number' ? a.tax_amount : total - net;
    if (Math.abs(net + tax - total) > CENT) {
      skip(`net + VAT (${net} + ${tax}) is not the total (${total})`);
      continue;
    }
    sequence += 1;
    const credit = a.document_type === 'credit_note';
    const day = fecDate(row.day);
    const number = fecField(a.invoice_number) || object;
    const supplier = fecField(a.supplier_name) || 'Fournisseur inconnu';
    const label = fecField(`${credit ? 'Avoir' : 'Facture'} ${number} ${supplier}`);
    const common = {
      num: `${FEC_BOOKING.journal.code}${row.day.slice(0, 7).replace('-', '')}-${String(sequence).padStart(5, '0')}`,
      pieceDate: a.issue_date ? fecDate(a.issue_date) : day,
    };
    // Signed as an invoice books them: a credit note's amounts are negative whatever sign it
    // prints (EN 16931 writes them positive, a picture may print a minus); an invoice keeps its own.
    const signed = (n: number) => round2(credit ? -Math.abs(n) : n);
    /** One line: a positive amount on the `side` given, a negative one on the other side. */
    const line = (
      account: { account: string; label: string },
      amount: number,
      side: 'debit' | 'credit',
      aux: [string, string] = ['', ''],
    ) => {
      const onDebit = (side === 'debit') === amount >= 0;
      const value = fecAmount(Math.abs(amount));
      lines.push([
        FEC_BOOKING.journal.code,
        FEC_BOOKING.journal.label,
        common.num,
        day,
        account.account,
        account.label,
        aux[0],
        aux[1],
        number,
        common.pieceDate,
        label,
        onDebit ? value : fecAmount(0),
        onDebit ? fecAmount(0) : value,
        '',
        '',
        day,
        '',
        '',
      ]);
    };
    const hasVat = Math.abs(tax) > CENT;
    line(FEC_BOOKING.expense, signed(net), 'debit');
    if (hasVat) line(FEC_BOOKING.vat, signed(tax), 'debit');
    // The supplier's line takes the other two's sum: the entry balances to the cent.
    line(FEC_BOOKING.supplier, round2(signed(net) + (hasVat ? signed(tax) : 0)), 'credit', [
      supplierAccount(a),
      supplier,
    ]);
  }
  return { lines, skipped };
}

const round2 = (n: number) => Math.round(n * 100) / 100;

/** The FEC's text: the field names, then one line per booking line, tab-separated, CRLF. */
export function fecText(rows: readonly MonthRow[]): { text: string; skipped: FecSkip[] } {
  const { lines, skipped } = fecEntries(rows);
  const text = [FEC_COLUMNS, ...lines].map((fields) => fields.join('\t')).join('\r\n');
  return { text: `${text}\r\n`, skipped };
}

// ISO 8859-15 is Latin-1 but for eight code points (the euro sign, Š š Ž ž Œ œ Ÿ in place of
// ¤ ¦ ¨ ´ ¸ ¼ ½ ¾).
const LATIN9_SPECIAL: Record<number, number> = {
  8364: 0xa4,
  352: 0xa6,
  353: 0xa8,
  381: 0xb4,
  382: 0xb8,
  338: 0xbc,
  339: 0xbd,
  376: 0xbe,
};
const LATIN9_REPLACED = new Set([0xa4, 0xa6, 0xa8, 0xb4, 0xb8, 0xbc, 0xbd, 0xbe]);

/**
 * Text in ISO 8859-15, one of the character sets article A47 A-1 allows (III, 1°). A character
 * it lacks is written without its accent when that is in the set (`ł` stays `?`), else as `?`.
 */
export function latin9(text: string): Buffer {
  const out: number[] = [];
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    const special = LATIN9_SPECIAL[code];
    if (special !== undefined) out.push(special);
    else if (code < 0x100 && !LATIN9_REPLACED.has(code)) out.push(code);
    else {
      const base = ch.normalize('NFD').replace(/[\u0300-\u036f]/g, '');
      const b = base.codePointAt(0) ?? 0x3f;
      out.push(base.length === 1 && b < 0x100 && !LATIN9_REPLACED.has(b) ? b : 0x3f);
    }
  }
  return Buffer.from(out);
}

/** The inverse of {@link latin9}, for tests and checks. */
export function fromLatin9(bytes: Uint8Array): string {
  const back = new Map(Object.entries(LATIN9_SPECIAL).map(([k, v]) => [v, Number(k)]));
  let text = '';
  for (const b of bytes) text += String.fromCodePoint(back.get(b) ?? b);
  return text;
}
