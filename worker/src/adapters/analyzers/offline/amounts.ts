/**
 * Money on French and English invoices: `1 234,56 €` (space, NBSP or narrow NBSP between
 * thousands), `1.234,56 EUR`, `€1,234.56`, `1,234.56 GBP`, `$1,234.56`, `CHF 1'234.50`, and the
 * negative amounts of credit notes (`-120,00 €`, `-€450.00`).
 */

/** Which character separates the decimals, when a number alone cannot tell (`1.234`). */
export type DecimalHint = ',' | '.' | null;

/** One amount found in a line of text. */
export interface FoundAmount {
  value: number;
  /** ISO 4217 code when a symbol or code is attached to the number. */
  currency: string | null;
  /** Where the match starts in the line, so callers can tell what the label before it says. */
  index: number;
  /** Where it ends: the next amount's label starts there. */
  end: number;
}

const CURRENCY_MARKERS: ReadonlyArray<readonly [RegExp, string]> = [
  [/€|\bEUR\b|\beuros?\b/giu, 'EUR'],
  [/£|\bGBP\b/giu, 'GBP'],
  // `US$` and `USD` are unambiguous; a lone `$` is read as US dollars too, the usual meaning on invoices.
  [/\$|\bUSD\b/giu, 'USD'],
  [/\bCHF\b/giu, 'CHF'],
  [/₹|\bINR\b|\bRs\.?(?=\s?\d)/giu, 'INR'],
  [/zł|\bPLN\b/giu, 'PLN'],
];

const CURRENCY_TOKEN = String.raw`€|£|US\$|\$|EUR|GBP|USD|CHF|₹|INR|Rs\.?|zł|PLN`;
// Thousands separators: space, NBSP (U+00A0), narrow NBSP (U+202F), thin space (U+2009), dot,
// comma, and the Swiss apostrophes. A group is always exactly three digits.
const GROUP_SEPARATOR = String.raw`[ \u00a0\u202f\u2009.,'’]`;
const NUMBER = String.raw`\d{1,3}(?:${GROUP_SEPARATOR}\d{3})+(?:[.,]\d{1,4})?|\d+(?:[.,]\d{1,4})?`;
// The look-behind keeps numbers inside words, dates and references (F-2026-001, 30/11/2026) out;
// the look-aheads keep percentages (`TVA 20 %`) and truncated numbers out.
const AMOUNT_PATTERN = String.raw`(?<![\p{L}\d/.,_\-−])(?<sign1>[-−])?(?<pre>(?:${CURRENCY_TOKEN})\s?)?(?<sign2>[-−])?(?<number>${NUMBER})(?![\d%/]|[.,]\d)(?!\s?%)(?<post>\s?(?:${CURRENCY_TOKEN})(?![\p{L}]))?`;

/** ISO code of a currency symbol or code (`€` → `EUR`), or null. */
export function currencyCode(token: string): string | null {
  const trimmed = token.trim().toUpperCase();
  if (trimmed === '€' || trimmed === 'EUR') return 'EUR';
  if (trimmed === '£' || trimmed === 'GBP') return 'GBP';
  if (trimmed === '$' || trimmed === 'US$' || trimmed === 'USD') return 'USD';
  if (trimmed === 'CHF') return 'CHF';
  if (trimmed === '₹' || trimmed === 'INR' || trimmed === 'RS' || trimmed === 'RS.') return 'INR';
  if (trimmed === 'ZŁ' || trimmed === 'PLN') return 'PLN';
  return null;
}

/**
 * Reads the digits of one number: `1 234,56` → 1234.56, `1,234.56` → 1234.56, `1.234,56` →
 * 1234.56. When one separator is followed by exactly three digits (`1.234`, `1,234`) it is read as
 * a thousands separator, unless it is the `decimalHint` (the decimal mark of the document's
 * language) or the integer part is 0 (`0,125`).
 */
export function parseNumber(raw: string, decimalHint: DecimalHint = null): number | null {
  const compact = raw.replace(/[\s\u00a0\u202f\u2009'’]/gu, '');
  if (!/^\d[\d.,]*$/u.test(compact)) return null;
  const lastDot = compact.lastIndexOf('.');
  const lastComma = compact.lastIndexOf(',');
  let decimalMark: string | null = null;
  if (lastDot >= 0 && lastComma >= 0) {
    decimalMark = lastDot > lastComma ? '.' : ',';
  } else if (lastDot >= 0 || lastComma >= 0) {
    const mark = lastDot >= 0 ? '.' : ',';
    const [integer, decimals, ...more] = compact.split(mark);
    const ambiguous = decimals!.length === 3 && integer !== '0' && mark !== decimalHint;
    decimalMark = more.length > 0 || ambiguous ? null : mark;
  }
  const thousands = decimalMark === null ? /[.,]/g : decimalMark === '.' ? /,/g : /\./g;
  const canonical = compact.replace(thousands, '').replace(',', '.');
  const value = Number(canonical);
  return Number.isFinite(value) ? value : null;
}

/** Every amount in a line, left to right. Percentages are skipped. */
export function findAmounts(line: string, decimalHint: DecimalHint = null): FoundAmount[] {
  const found: FoundAmount[] = [];
  for (const match of line.matchAll(new RegExp(AMOUNT_PATTERN, 'gu'))) {
    const groups = match.groups!;
    const magnitude = parseNumber(groups.number!, decimalHint);
    if (magnitude === null) continue;
    const negative = Boolean(groups.sign1 ?? groups.sign2);
    const token = groups.pre ?? groups.post ?? null;
    found.push({
      value: negative ? -magnitude : magnitude,
      currency: token ? currencyCode(token) : null,
      index: match.index,
      end: match.index + match[0].length,
    });
  }
  return found;
}

/** The single amount of a cell or short text (`1 234,56 €`), or null when there is none. */
export function parseAmount(text: string, decimalHint: DecimalHint = null): number | null {
  return findAmounts(text, decimalHint)[0]?.value ?? null;
}

/** A percentage such as `20 %`, `5,5%` or `20.0 %`, as a number (20, 5.5). */
export function parsePercent(text: string): number | null {
  const match = /(\d{1,3}(?:[.,]\d{1,2})?)\s?%/u.exec(text);
  return match ? Number(match[1]!.replace(',', '.')) : null;
}

/**
 * The currency a document is written in: the one most often written next to its amounts or
 * spelled out (`€`, `EUR`, `£`, `$`, `CHF`); ties go to the first in that order.
 */
export function detectCurrency(text: string): string | null {
  let best: string | null = null;
  let bestCount = 0;
  for (const [pattern, code] of CURRENCY_MARKERS) {
    const count = text.match(pattern)?.length ?? 0;
    if (count > bestCount) {
      best = code;
      bestCount = count;
    }
  }
  return best;
}

/** Rounds to cents, the unit every amount of the schema is in. */
export function roundCents(value: number): number {
  // Symmetric rounding, so a credit note's -0.005 rounds like its invoice's 0.005.
  const cents = Math.round((Math.abs(value) + Number.EPSILON) * 100);
  return (Math.sign(value) * cents) / 100 || 0;
}
