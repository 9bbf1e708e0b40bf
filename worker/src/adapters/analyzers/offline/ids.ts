/**
 * Company identifiers: French SIREN (9 digits) and SIRET (14 digits), often printed in groups
 * (`123 456 789 00012`), and intra-EU VAT ids (`FR 12 345678901`, `GB123456789`, `DE123456789`).
 */

// The body of each country's VAT id once separators are removed (EU VIES formats, plus GB and CH).
const VAT_BODIES: Readonly<Record<string, RegExp>> = {
  AT: /^U\d{8}$/,
  BE: /^[01]\d{9}$/,
  BG: /^\d{9,10}$/,
  CH: /^E\d{9}$/,
  CY: /^\d{8}[A-Z]$/,
  CZ: /^\d{8,10}$/,
  DE: /^\d{9}$/,
  DK: /^\d{8}$/,
  EE: /^\d{9}$/,
  EL: /^\d{9}$/,
  ES: /^[A-Z0-9]\d{7}[A-Z0-9]$/,
  FI: /^\d{8}$/,
  FR: /^[0-9A-HJ-NP-Z]{2}\d{9}$/,
  GB: /^(\d{9}|\d{12})$/,
  HR: /^\d{11}$/,
  HU: /^\d{8}$/,
  IE: /^\d{7}[A-Z]{1,2}$|^\d[A-Z+*]\d{5}[A-Z]$/,
  IT: /^\d{11}$/,
  LT: /^(\d{9}|\d{12})$/,
  LU: /^\d{8}$/,
  LV: /^\d{11}$/,
  MT: /^\d{8}$/,
  NL: /^\d{9}B\d{2}$/,
  PL: /^\d{10}$/,
  PT: /^\d{9}$/,
  RO: /^\d{2,10}$/,
  SE: /^\d{12}$/,
  SI: /^\d{8}$/,
  SK: /^\d{10}$/,
};

const COUNTRIES = Object.keys(VAT_BODIES).join('|');
// A country prefix, then letters/digits possibly split by spaces, dots or dashes (`FR 12 345 678 901`).
const VAT_CANDIDATE = new RegExp(
  String.raw`(?<![\p{L}\d])(?<country>${COUNTRIES})(?<body>(?:[ \u00a0\u202f.-]?[0-9A-Z+*]){8,13})(?![\p{L}\d])`,
  'gu',
);

/** Removes the spaces, dots and dashes that group the characters of an identifier. */
function compact(text: string): string {
  return text.replace(/[\s\u00a0\u202f.-]/gu, '');
}

/**
 * The first intra-EU (or UK/Swiss) VAT id in the text, without separators (`FR12345678901`), or
 * null. A candidate must match its country's format, so words in capitals are not mistaken for one.
 */
export function findVatId(text: string): string | null {
  const candidates = new RegExp(VAT_CANDIDATE);
  for (let match = candidates.exec(text); match; match = candidates.exec(text)) {
    const country = match.groups!.country!;
    const format = VAT_BODIES[country]!;
    // The body may run into a following group ("FR 12 345678901 RCS"): drop whole groups, never digits.
    const groups = match.groups!.body!.split(/[ \u00a0\u202f.-]/u).filter(Boolean);
    for (let count = groups.length; count > 0; count -= 1) {
      const body = groups.slice(0, count).join('');
      if (format.test(body)) return `${country}${body}`;
    }
    // A failed candidate may hide a real one inside it ("DEVIS FR12…"): look again one character on.
    candidates.lastIndex = match.index + 1;
  }
  return null;
}

/** Digits written in groups of 3 (`123 456 789`) or together, after a label, with at least `count` digits. */
function digitsAfter(text: string, label: RegExp, count: number): string | null {
  const match = label.exec(text);
  if (!match) return null;
  const rest = text.slice(match.index + match[0].length);
  const digits = /^[^\d\n]{0,40}?(\d(?:[ \u00a0\u202f.]?\d)*)/u.exec(rest);
  if (!digits) return null;
  const value = compact(digits[1]!);
  return value.length === count ? value : null;
}

/** The SIRET (14 digits) written after a `SIRET` label, or null. */
export function findSiret(text: string): string | null {
  return digitsAfter(text, /\bSIRET\b/iu, 14);
}

/**
 * The SIREN (9 digits) written after a `SIREN` or `RCS <city>` label, or null. Callers may derive it
 * from a SIRET (its first 9 digits) or a French VAT id (its last 9 digits): both contain it.
 */
export function findSiren(text: string): string | null {
  return digitsAfter(text, /\bSIREN\b/iu, 9) ?? digitsAfter(text, /\bRCS\b/u, 9);
}

/** The SIREN contained in a SIRET or a French VAT id, or null. */
export function sirenFrom(siret: string | null, vatId: string | null): string | null {
  if (siret) return siret.slice(0, 9);
  if (vatId?.startsWith('FR')) return vatId.slice(4);
  return null;
}
