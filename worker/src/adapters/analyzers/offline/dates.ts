/**
 * Dates on European invoices (French, English, German, Dutch, Spanish, Italian), returned as ISO `YYYY-MM-DD`. Numeric dates are read day
 * first (`30/11/2026`, `30-11-2026`, `30.11.2026`), as in France and the rest of Europe, in both
 * languages, unless the document itself shows it writes month first ({@link numericDateOrder}); ISO dates (`2026-11-30`) and spelled-out months (`30 novembre 2026`, `1er mars 2026`,
 * `30 November 2026`, `November 30, 2026`, `Nov 30, 2026`) are read too.
 */

const MONTHS: Readonly<Record<string, number>> = {
  janvier: 1,
  février: 2,
  fevrier: 2,
  mars: 3,
  avril: 4,
  mai: 5,
  juin: 6,
  juillet: 7,
  août: 8,
  aout: 8,
  septembre: 9,
  octobre: 10,
  novembre: 11,
  décembre: 12,
  decembre: 12,
  january: 1,
  february: 2,
  march: 3,
  april: 4,
  may: 5,
  june: 6,
  july: 7,
  august: 8,
  september: 9,
  october: 10,
  november: 11,
  december: 12,
  jan: 1,
  feb: 2,
  févr: 2,
  mar: 3,
  apr: 4,
  avr: 4,
  jun: 6,
  jul: 7,
  juil: 7,
  aug: 8,
  sep: 9,
  sept: 9,
  oct: 10,
  nov: 11,
  dec: 12,
  déc: 12,
  // German, Dutch, Spanish and Italian: the names that differ from the above.
  januar: 1,
  jänner: 1,
  februar: 2,
  märz: 3,
  maerz: 3,
  juni: 6,
  juli: 7,
  oktober: 10,
  dezember: 12,
  januari: 1,
  februari: 2,
  maart: 3,
  mei: 5,
  augustus: 8,
  okt: 10,
  dez: 12,
  mrt: 3,
  enero: 1,
  febrero: 2,
  marzo: 3,
  abril: 4,
  mayo: 5,
  junio: 6,
  julio: 7,
  agosto: 8,
  septiembre: 9,
  setiembre: 9,
  octubre: 10,
  noviembre: 11,
  diciembre: 12,
  gennaio: 1,
  febbraio: 2,
  aprile: 4,
  maggio: 5,
  giugno: 6,
  luglio: 7,
  settembre: 9,
  ottobre: 10,
  dicembre: 12,
};

const MONTH_NAME = String.raw`(?<month>[\p{L}]{3,10})\.?`;
// `1er`, `1st`, and the German `7.` (`7. Mai 2014`).
const DAY = String.raw`(?<day>\d{1,2})(?:er|st|nd|rd|th|\.)?`;
const YEAR = String.raw`(?<year>\d{4})`;

/** A numeric date `dd/mm/yyyy` (Europe, the default) or `mm/dd/yyyy` (the United States). */
export type DateOrder = 'day-first' | 'month-first';

// `11/03/2017`: day and month in the order of the document.
const NUMERIC = new RegExp(
  String.raw`(?<![\d/.-])(?<day>\d{1,2})[/.-](?<monthNumber>\d{1,2})[/.-]${YEAR}(?!\d)`,
  'u',
);

// Tried in this order on the whole text; the earliest match in the text wins.
const PATTERNS: readonly RegExp[] = [
  new RegExp(String.raw`(?<!\d)${YEAR}-(?<monthNumber>\d{1,2})-(?<day>\d{1,2})(?!\d)`, 'u'),
  NUMERIC,
  // `30 novembre 2026`, `7. Mai 2014`, `5 de marzo de 2026`.
  new RegExp(String.raw`(?<!\d)${DAY}\s+(?:de\s+)?${MONTH_NAME},?\s+(?:de\s+)?${YEAR}(?!\d)`, 'iu'),
  // `November 30, 2026`, and `August 3 , 2014` as a PDF's text layer may space it.
  new RegExp(String.raw`(?<![\p{L}])${MONTH_NAME}\s+${DAY}\s?,?\s+${YEAR}(?!\d)`, 'iu'),
];

/**
 * The order of a document's numeric dates: month first only when one of them can be read no other
 * way (`11/17/2017`) and none can only be read day first (`17/11/2017`); day first otherwise.
 */
export function numericDateOrder(text: string): DateOrder {
  let dayFirst = false;
  let monthFirst = false;
  for (const match of text.matchAll(new RegExp(NUMERIC.source, 'gu'))) {
    const first = Number(match.groups?.day);
    const second = Number(match.groups?.monthNumber);
    if (first > 12 && second <= 12) dayFirst = true;
    if (second > 12 && first <= 12) monthFirst = true;
  }
  return monthFirst && !dayFirst ? 'month-first' : 'day-first';
}

/** `YYYY-MM-DD` when the parts make a real calendar day, else null (31/02/2026 is not one). */
export function isoDate(year: number, month: number, day: number): string | null {
  const date = new Date(Date.UTC(year, month - 1, day));
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) {
    return null;
  }
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${year}-${pad(month)}-${pad(day)}`;
}

function fromGroups(groups: Record<string, string | undefined>, swap: boolean): string | null {
  const month = groups.monthNumber
    ? Number(swap ? groups.day : groups.monthNumber)
    : MONTHS[(groups.month ?? '').toLowerCase().normalize('NFC')];
  if (month === undefined) return null;
  return isoDate(Number(groups.year), month, Number(swap ? groups.monthNumber : groups.day));
}

/** The first date written in the text, as `YYYY-MM-DD`, or null; numeric dates in `order`. */
export function findDate(text: string, order: DateOrder = 'day-first'): string | null {
  let best: { index: number; iso: string } | null = null;
  for (const pattern of PATTERNS) {
    const global = new RegExp(pattern.source, `${pattern.flags}g`);
    const swap = pattern === NUMERIC && order === 'month-first';
    for (const match of text.matchAll(global)) {
      if (best && match.index >= best.index) break;
      const iso = fromGroups(match.groups ?? {}, swap);
      if (iso) {
        best = { index: match.index, iso };
        break;
      }
    }
  }
  return best?.iso ?? null;
}
