/**
 * Writes docline's synthetic sample documents, deterministically: running it again gives the same
 * bytes. Every company, person, number and identifier below is made up for this project.
 *
 *   tsx samples/generate.ts            # rewrites samples/
 *   tsx samples/generate.ts OUT_DIR    # writes elsewhere, e.g. to check samples/ is up to date
 *
 * One description per invoice (the `SAMPLES` table) feeds both the rendered file (plain text or a
 * PDF drawn with samples/pdf-writer.ts) and its entry in `expected.json`, which the offline analyzer's test reads
 * back: the analyzer must find in the rendered file what the description says.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { crc32, deflateSync } from 'node:zlib';
import { photoOf, scanOf } from '../bench/scans';
import { AnalysisSchema } from '../worker/src/contract/analysis';
import { type PdfPage, PdfWriter, type StandardFont, textWidth } from './pdf-writer';

type Language = 'fr' | 'en';
type DateStyle = 'dmy-slash' | 'iso' | 'fr-long' | 'en-dmy-long' | 'en-mdy-long';

/** How amounts are written: separators, currency sign and where it goes, and the currency it is. */
interface AmountStyle {
  currency: 'EUR' | 'GBP' | 'USD';
  group: string;
  decimal: string;
  prefix: string;
  suffix: string;
}

const NBSP = '\u00a0';
const NARROW_NBSP = '\u202f';
const AMOUNT_STYLES = {
  frSpace: { currency: 'EUR', group: ' ', decimal: ',', prefix: '', suffix: ' €' },
  frNbsp: { currency: 'EUR', group: NBSP, decimal: ',', prefix: '', suffix: `${NBSP}€` },
  frNarrowNbsp: { currency: 'EUR', group: NARROW_NBSP, decimal: ',', prefix: '', suffix: `${NBSP}€` },
  frDotEur: { currency: 'EUR', group: '.', decimal: ',', prefix: '', suffix: ' EUR' },
  enEuroSign: { currency: 'EUR', group: ',', decimal: '.', prefix: '€', suffix: '' },
  enEurCode: { currency: 'EUR', group: ',', decimal: '.', prefix: '', suffix: ' EUR' },
  enGbpCode: { currency: 'GBP', group: ',', decimal: '.', prefix: '', suffix: ' GBP' },
  enDollar: { currency: 'USD', group: ',', decimal: '.', prefix: '$', suffix: '' },
} as const satisfies Record<string, AmountStyle>;

interface Company {
  name: string;
  address: string[];
  /** 9 digits; French companies only. */
  siren?: string;
  /** The 5 digits that make a SIRET of the SIREN. */
  nic?: string;
  /** Printed as written here; expected without separators. */
  vatId?: string;
}

interface Item {
  description: string;
  quantity: number;
  unitPrice: number;
  vatRate: number;
}

/** The wording of one document; every sample picks its own to exercise the analyzer's labels. */
interface Wording {
  title: string;
  /** Label put before the supplier's block, or none (the supplier's name opens the document). */
  supplierLabel?: string;
  number: string;
  issueDate: string;
  dueDate?: string;
  customer: string;
  /** The customer's name on the label's line instead of the next one. */
  customerInline?: boolean;
  headers: { description: string; quantity: string; unitPrice: string; vatRate?: string; amount: string };
  net: string;
  tax: (rate: number) => string;
  taxTotal?: string;
  total: string;
  ids: { siren?: string; siret?: string; vatId?: string };
}

interface Sample {
  /** `fr-…` or `en-…`: the prefix is the document's language. */
  file: `${Language}-${string}`;
  /** A credit note (its amounts printed negative); absent: an invoice. */
  creditNote?: boolean;
  supplier: Company;
  customer: Company;
  number: string;
  issueDate: string;
  /** ISO date, or a sentence with no date in it ("à réception"). */
  dueDate: string | null;
  dueText?: string;
  amounts: AmountStyle;
  dates: DateStyle;
  /** Currency signs in the items table too, not only in the totals. */
  itemCurrency?: boolean;
  vatColumn?: boolean;
  /** VAT is not charged (French micro-entreprise): no tax line, a mention instead. */
  vatExempt?: boolean;
  items: Item[];
  /** What differs from the language's wording (FR_WORDING, EN_WORDING). */
  wording?: Partial<Wording>;
  /** Lines between the dates and the customer (references, periods). */
  extra?: string[];
  /** Closing lines: payment terms, legal mentions. */
  footer: string[];
}

const FR_MONTHS =
  'janvier février mars avril mai juin juillet août septembre octobre novembre décembre'.split(' ');
const EN_MONTHS =
  'January February March April May June July August September October November December'.split(' ');

function formatDate(iso: string, style: DateStyle): string {
  const [year, month, day] = iso.split('-').map(Number) as [number, number, number];
  const dd = String(day).padStart(2, '0');
  const mm = String(month).padStart(2, '0');
  switch (style) {
    case 'dmy-slash':
      return `${dd}/${mm}/${year}`;
    case 'iso':
      return iso;
    case 'fr-long':
      return `${day === 1 ? '1er' : day} ${FR_MONTHS[month - 1]} ${year}`;
    case 'en-dmy-long':
      return `${day} ${EN_MONTHS[month - 1]} ${year}`;
    case 'en-mdy-long':
      return `${EN_MONTHS[month - 1]} ${day}, ${year}`;
  }
}

function groupThousands(integer: string, separator: string): string {
  return integer.replace(/\B(?=(\d{3})+(?!\d))/g, separator);
}

function formatNumber(value: number, style: AmountStyle, decimals = 2): string {
  const [integer, fraction] = Math.abs(value).toFixed(decimals).split('.') as [string, string?];
  const digits = groupThousands(integer, style.group) + (fraction ? style.decimal + fraction : '');
  return (value < 0 ? '-' : '') + digits;
}

function formatAmount(value: number, style: AmountStyle, withCurrency = true): string {
  const number = formatNumber(Math.abs(value), style);
  const sign = value < 0 ? '-' : '';
  return withCurrency ? `${sign}${style.prefix}${number}${style.suffix}` : `${sign}${number}`;
}

function formatQuantity(value: number, language: Language): string {
  return Number.isInteger(value) ? String(value) : String(value).replace('.', language === 'fr' ? ',' : '.');
}

const cents = (value: number) => Math.round(value * 100) / 100;

/** The figures of a sample, computed once for the document and for expected.json. */
function figures(sample: Sample) {
  // Credit notes print negative amounts.
  const sign = sample.creditNote ? -1 : 1;
  const lines = sample.items.map((item) => ({
    ...item,
    unitPrice: sign * item.unitPrice,
    amount: cents(sign * item.quantity * item.unitPrice),
  }));
  const rates = [...new Set(lines.map((line) => line.vatRate))].sort((a, b) => a - b);
  const taxes = sample.vatExempt
    ? []
    : rates.map((rate) => {
        const base = lines
          .filter((line) => line.vatRate === rate)
          .reduce((sum, line) => sum + line.amount, 0);
        return { rate, amount: cents((base * rate) / 100) };
      });
  const net = cents(lines.reduce((sum, line) => sum + line.amount, 0));
  const tax = cents(taxes.reduce((sum, entry) => sum + entry.amount, 0));
  return { lines, taxes, net, tax, total: cents(net + tax) };
}

/** One line of a rendered document. */
type Row =
  | { kind: 'text'; text: string; right?: string }
  | { kind: 'items'; cells: string[] }
  | { kind: 'totals'; label: string; value: string }
  | { kind: 'blank' };

const text = (value: string, right?: string): Row => ({ kind: 'text', text: value, right });
const blank: Row = { kind: 'blank' };

function idLines(company: Company, wording: Wording): string[] {
  const lines: string[] = [];
  const siren = company.siren?.replace(/(\d{3})(?=\d)/g, '$1 ');
  if (siren && wording.ids.siren) lines.push(`${wording.ids.siren} ${siren}`);
  if (siren && company.nic && wording.ids.siret) lines.push(`${wording.ids.siret} ${siren} ${company.nic}`);
  if (company.vatId && wording.ids.vatId) lines.push(`${wording.ids.vatId} ${company.vatId}`);
  return lines;
}

const languageOf = (sample: Sample) => sample.file.slice(0, 2) as Language;
const wordingOf = (sample: Sample): Wording => ({
  ...(languageOf(sample) === 'fr' ? FR_WORDING : EN_WORDING),
  ...sample.wording,
});

function rows(sample: Sample): Row[] {
  const { supplier, customer, amounts } = sample;
  const w = wordingOf(sample);
  const language = languageOf(sample);
  const itemCurrency = Boolean(sample.itemCurrency);
  const f = figures(sample);
  const date = (iso: string) => formatDate(iso, sample.dates);
  const out: Row[] = [];

  if (w.supplierLabel) {
    out.push(text(w.title), blank, text(w.supplierLabel), text(supplier.name));
  } else {
    out.push(text(supplier.name, w.title));
  }
  out.push(...supplier.address.map((line) => text(line)), ...idLines(supplier, w).map((line) => text(line)));
  out.push(blank, text(`${w.number} ${sample.number}`), text(`${w.issueDate} ${date(sample.issueDate)}`));
  if (w.dueDate) out.push(text(`${w.dueDate} ${sample.dueDate ? date(sample.dueDate) : sample.dueText}`));
  out.push(...(sample.extra ?? []).map((line) => text(line)), blank);

  if (w.customerInline) out.push(text(`${w.customer} ${customer.name}`));
  else out.push(text(w.customer), text(customer.name));
  out.push(...customer.address.map((line) => text(line)), blank);

  const h = w.headers;
  const vatHeader = sample.vatColumn && h.vatRate ? [h.vatRate] : [];
  out.push({ kind: 'items', cells: [h.description, h.quantity, h.unitPrice, ...vatHeader, h.amount] });
  const percent = (rate: number) =>
    `${formatNumber(rate, { ...amounts, group: '' }, Number.isInteger(rate) ? 0 : 1)}${language === 'fr' ? ' %' : '%'}`;
  for (const line of f.lines) {
    out.push({
      kind: 'items',
      cells: [
        line.description,
        formatQuantity(line.quantity, language),
        formatAmount(line.unitPrice, amounts, itemCurrency),
        ...(sample.vatColumn ? [percent(line.vatRate)] : []),
        formatAmount(line.amount, amounts, itemCurrency),
      ],
    });
  }
  out.push(blank, { kind: 'totals', label: w.net, value: formatAmount(f.net, amounts) });
  for (const tax of f.taxes) {
    out.push({ kind: 'totals', label: w.tax(tax.rate), value: formatAmount(tax.amount, amounts) });
  }
  if (w.taxTotal && f.taxes.length > 1) {
    out.push({ kind: 'totals', label: w.taxTotal, value: formatAmount(f.tax, amounts) });
  }
  out.push({ kind: 'totals', label: w.total, value: formatAmount(f.total, amounts) });
  out.push(blank, ...sample.footer.map((line) => text(line)));
  return out;
}

function textRow(row: Row, widths: readonly number[]): string {
  switch (row.kind) {
    case 'blank':
      return '';
    case 'text':
      return row.right ? `${row.right}\n\n${row.text}` : row.text;
    case 'items':
      return row.cells
        .map((cell, column) => (column === 0 ? cell.padEnd(widths[0]!) : cell.padStart(widths[column]!)))
        .join('   ')
        .trimEnd();
    case 'totals':
      return `${' '.repeat(24)}${row.label.padEnd(28)}${row.value.padStart(18)}`;
  }
}

// Plain text: columns padded with spaces, at least two between cells, numbers right-aligned.
function renderText(sample: Sample): string {
  const all = rows(sample);
  const itemRows = all.flatMap((row) => (row.kind === 'items' ? [row.cells] : []));
  const widths = itemRows[0]!.map((_, column) => Math.max(...itemRows.map((cells) => cells[column]!.length)));
  return `${all.map((row) => textRow(row, widths)).join('\n')}\n`;
}

const PAGE = { width: 595.28, height: 841.89, left: 50, right: 545, top: 790, lineHeight: 15 };
// Right edges of the items table's numeric columns (quantity, unit price, [VAT], amount).
const ITEM_COLUMNS_WITH_VAT = [330, 420, 470, PAGE.right];
const ITEM_COLUMNS = [350, 440, PAGE.right];
const TOTALS_LABEL_X = 320;

function drawRight(page: PdfPage, font: StandardFont, value: string, right: number, y: number, size: number) {
  page.drawText(value, { x: right - textWidth(value, font, size), y, size, font });
}

// A PDF: one drawText per cell, so the text layer keeps the columns apart.
async function renderPdf(sample: Sample): Promise<Uint8Array> {
  if (sample.amounts.group === NARROW_NBSP) throw new Error('Helvetica (WinAnsi) cannot encode U+202F');
  const fixed = new Date(`${sample.issueDate}T09:00:00Z`);
  const doc = new PdfWriter({
    title: `${wordingOf(sample).title} ${sample.number}`,
    author: sample.supplier.name,
    producer: 'docline samples/generate.ts (samples/pdf-writer.ts)',
    creator: 'docline samples/generate.ts',
    created: fixed,
    modified: fixed,
  });
  const font: StandardFont = 'Helvetica';
  const bold: StandardFont = 'Helvetica-Bold';
  const page = doc.addPage(PAGE.width, PAGE.height);
  const size = 10;
  let y = PAGE.top;
  for (const row of rows(sample)) {
    if (row.kind === 'text') {
      page.drawText(row.text, { x: PAGE.left, y, size, font });
      if (row.right) drawRight(page, bold, row.right, PAGE.right, y, 16);
    } else if (row.kind === 'items') {
      const columns = row.cells.length === 5 ? ITEM_COLUMNS_WITH_VAT : ITEM_COLUMNS;
      page.drawText(row.cells[0]!, { x: PAGE.left, y, size, font });
      row.cells.slice(1).forEach((cell, index) => {
        drawRight(page, font, cell, columns[index]!, y, size);
      });
    } else if (row.kind === 'totals') {
      page.drawText(row.label, { x: TOTALS_LABEL_X, y, size, font: bold });
      drawRight(page, bold, row.value, PAGE.right, y, size);
    }
    y -= PAGE.lineHeight;
  }
  return doc.save();
}

/** The analysis the offline analyzer must return for a sample (see worker/src/contract/analysis.ts). */
function expected(sample: Sample) {
  const f = figures(sample);
  const french = Boolean(sample.supplier.siren);
  const { ids } = wordingOf(sample);
  const showsVat = sample.supplier.vatId && ids.vatId;
  return {
    document_type: sample.creditNote ? 'credit_note' : 'invoice',
    language: languageOf(sample),
    supplier_name: sample.supplier.name,
    supplier_vat_id: showsVat ? sample.supplier.vatId!.replace(/[\s.]/g, '') : null,
    supplier_siren: french ? sample.supplier.siren! : null,
    supplier_siret:
      french && sample.supplier.nic && ids.siret ? sample.supplier.siren! + sample.supplier.nic : null,
    customer_name: sample.customer.name,
    invoice_number: sample.number,
    issue_date: sample.issueDate,
    due_date: sample.dueDate,
    currency: sample.amounts.currency,
    net_amount: f.net,
    tax_amount: f.tax,
    total_amount: f.total,
    line_items: f.lines.map((line) => ({
      description: line.description,
      quantity: line.quantity,
      unit_price: line.unitPrice,
      amount: line.amount,
      vat_rate: sample.vatColumn ? line.vatRate : null,
    })),
  };
}

const FR_WORDING: Wording = {
  title: 'FACTURE',
  number: 'Facture n°',
  issueDate: 'Date de facture :',
  dueDate: "Date d'échéance :",
  customer: 'Client :',
  headers: {
    description: 'Désignation',
    quantity: 'Qté',
    unitPrice: 'Prix unitaire HT',
    vatRate: 'TVA',
    amount: 'Montant HT',
  },
  net: 'Total HT',
  tax: (rate) => `TVA ${String(rate).replace('.', ',')} %`,
  total: 'Total TTC',
  ids: { siret: 'SIRET :', vatId: 'TVA intracommunautaire :' },
};

const EN_WORDING: Wording = {
  title: 'INVOICE',
  number: 'Invoice No:',
  issueDate: 'Invoice date:',
  dueDate: 'Due date:',
  customer: 'Bill to',
  headers: {
    description: 'Description',
    quantity: 'Qty',
    unitPrice: 'Unit price',
    vatRate: 'VAT',
    amount: 'Amount',
  },
  net: 'Subtotal',
  tax: (rate) => `VAT ${rate}%`,
  total: 'Total due',
  ids: { vatId: 'VAT No:' },
};

/** French VAT id of a SIREN: FR + key + SIREN, key = (12 + 3 × (SIREN mod 97)) mod 97. */
function frenchVatId(siren: string, spaced: boolean): string {
  const key = String((12 + 3 * (Number(siren) % 97)) % 97).padStart(2, '0');
  return spaced ? `FR ${key} ${siren}` : `FR${key}${siren}`;
}

const SAMPLES: Sample[] = [
  {
    file: 'fr-01-facture-conseil.pdf',
    supplier: {
      name: 'Atelier Numérique Ravel SAS',
      address: ['14 rue des Tanneurs', '69002 Lyon'],
      siren: '812345676',
      nic: '00017',
      vatId: frenchVatId('812345676', true),
    },
    customer: { name: 'Boulangerie des Quatre Vents SARL', address: ['3 place du Marché', '38000 Grenoble'] },
    number: 'F-2026-0142',
    issueDate: '2026-11-30',
    dueDate: '2026-12-30',
    amounts: AMOUNT_STYLES.frNbsp,
    dates: 'dmy-slash',
    itemCurrency: true,
    vatColumn: true,
    items: [
      { description: 'Audit du site de commande en ligne', quantity: 1, unitPrice: 1850, vatRate: 20 },
      { description: 'Développement module de réservation', quantity: 6, unitPrice: 540, vatRate: 20 },
      { description: 'Hébergement annuel', quantity: 1, unitPrice: 289.9, vatRate: 20 },
    ],
    footer: [
      'Conditions de règlement : virement à 30 jours.',
      'Pénalités de retard : trois fois le taux d’intérêt légal.',
      'Indemnité forfaitaire pour frais de recouvrement : 40 €.',
    ],
  },
  {
    file: 'fr-02-facture-maintenance.txt',
    supplier: {
      name: 'Maintenance Industrielle du Vercors SARL',
      address: ['ZA des Cèdres, 12 allée Hélène Boucher', '38130 Échirolles'],
      siren: '523781946',
      vatId: frenchVatId('523781946', true),
    },
    customer: {
      name: 'Fromagerie Coopérative du Trièves',
      address: ['Route de Mens', '38710 Saint-Baudille'],
    },
    number: 'MIV-2026-118',
    issueDate: '2026-11-30',
    dueDate: '2026-12-30',
    amounts: AMOUNT_STYLES.frNarrowNbsp,
    dates: 'fr-long',
    items: [
      {
        description: 'Contrat de maintenance préventive (trimestre 4)',
        quantity: 1,
        unitPrice: 2400,
        vatRate: 20,
      },
      { description: 'Intervention sur presse hydraulique', quantity: 7.5, unitPrice: 85, vatRate: 20 },
      { description: 'Joint torique 120 mm', quantity: 12, unitPrice: 14.6, vatRate: 20 },
    ],
    wording: {
      number: 'N° de facture :',
      issueDate: 'Date :',
      dueDate: 'Échéance :',
      customer: 'Facturé à :',
      customerInline: true,
      headers: { ...FR_WORDING.headers, quantity: 'Quantité', amount: 'Total HT' },
      net: 'Montant HT',
      tax: (rate) => `TVA (${rate} %)`,
      total: 'Net à payer',
      ids: { siren: 'RCS Grenoble', vatId: 'TVA :' },
    },
    footer: ['Règlement par virement ou chèque à l’ordre de Maintenance Industrielle du Vercors.'],
  },
  {
    file: 'fr-03-avoir.txt',
    creditNote: true,
    supplier: {
      name: 'Librairie Papeterie Les Hirondelles',
      address: ['8 rue Sainte-Catherine', '33000 Bordeaux'],
      siren: '438120552',
      nic: '00023',
      vatId: frenchVatId('438120552', false),
    },
    customer: { name: 'École Montessori du Parc', address: ['21 avenue Thiers', '33100 Bordeaux'] },
    number: 'AV-2026-007',
    issueDate: '2026-12-02',
    dueDate: null,
    amounts: AMOUNT_STYLES.frSpace,
    dates: 'dmy-slash',
    itemCurrency: true,
    vatColumn: true,
    items: [
      { description: 'Retour : albums jeunesse (lot de 10)', quantity: 2, unitPrice: 60, vatRate: 5.5 },
      {
        description: 'Remise commerciale sur commande F-2026-0098',
        quantity: 1,
        unitPrice: 35,
        vatRate: 5.5,
      },
    ],
    wording: {
      title: 'AVOIR',
      supplierLabel: 'Fournisseur :',
      number: 'Avoir n°',
      issueDate: 'Date :',
      dueDate: undefined,
      ids: { siret: 'SIRET', vatId: 'N° TVA :' },
    },
    extra: ["Facture d'origine n° F-2026-0098 du 12/11/2026"],
    footer: ['Montant à déduire de votre prochaine facture.'],
  },
  {
    file: 'fr-04-facture-fournitures.pdf',
    supplier: {
      name: 'Fournitures Bureau Garonne SAS',
      address: ['45 boulevard de Strasbourg', '31000 Toulouse'],
      siren: '401234562',
      vatId: frenchVatId('401234562', true),
    },
    customer: {
      name: "Cabinet d'Architectes Lumière & Associés",
      address: ['2 rue Ozenne', '31000 Toulouse'],
    },
    number: 'FBG-26-03315',
    issueDate: '2026-12-01',
    dueDate: '2026-12-31',
    amounts: AMOUNT_STYLES.frDotEur,
    dates: 'fr-long',
    vatColumn: true,
    items: [
      { description: 'Ramettes papier A4 80 g (carton de 5)', quantity: 40, unitPrice: 24.5, vatRate: 20 },
      { description: 'Fauteuil de bureau ergonomique', quantity: 3, unitPrice: 389, vatRate: 20 },
      { description: 'Guides techniques (livres)', quantity: 6, unitPrice: 42, vatRate: 5.5 },
    ],
    wording: {
      supplierLabel: 'Émetteur :',
      number: 'Facture N°',
      issueDate: "Date d'émission :",
      dueDate: 'Date limite de paiement :',
      net: 'Total hors taxes',
      taxTotal: 'Total TVA',
      ids: { siren: 'SIREN :', vatId: 'N° TVA intracommunautaire :' },
    },
    footer: ['Escompte pour paiement anticipé : néant.'],
  },
  {
    file: 'fr-05-facture-transport.txt',
    supplier: {
      name: 'Transports Mistral & Fils SARL',
      address: ['Port autonome, quai 9', '13002 Marseille'],
      siren: '790456123',
      nic: '00039',
    },
    customer: {
      name: 'Savonnerie Artisanale de Provence',
      address: ['Chemin des Oliviers', '13100 Aix-en-Provence'],
    },
    number: 'TM-26-0457',
    issueDate: '2026-11-28',
    dueDate: '2026-12-28',
    amounts: AMOUNT_STYLES.frSpace,
    dates: 'iso',
    items: [
      { description: 'Transport palettes Marseille - Lyon', quantity: 14, unitPrice: 95, vatRate: 20 },
      { description: 'Hayon élévateur', quantity: 1, unitPrice: 60, vatRate: 20 },
      { description: 'Stockage entrepôt (jours)', quantity: 10, unitPrice: 12.5, vatRate: 20 },
    ],
    wording: {
      number: 'Facture N° :',
      customer: 'Facturé à',
      ids: { siret: 'SIRET :' },
    },
    footer: ['Paiement par virement - IBAN FR76 0000 0000 0000 0000 0000 000.'],
  },
  {
    file: 'fr-06-facture-formation.pdf',
    supplier: {
      name: 'Élodie Marchand Formation',
      address: ['17 rue du Moulin', '44000 Nantes'],
      siren: '882901333',
      nic: '00014',
    },
    customer: { name: 'Association Les Ateliers du Quai', address: ['5 quai de la Fosse', '44000 Nantes'] },
    number: '2026-031',
    issueDate: '2026-11-15',
    dueDate: null,
    dueText: 'à réception',
    amounts: AMOUNT_STYLES.frNbsp,
    dates: 'dmy-slash',
    itemCurrency: true,
    vatExempt: true,
    items: [
      { description: 'Formation tableur niveau 2 (jours)', quantity: 2, unitPrice: 650, vatRate: 0 },
      { description: 'Support de cours imprimé', quantity: 10, unitPrice: 20, vatRate: 0 },
    ],
    wording: {
      dueDate: 'Échéance :',
      total: 'Net à payer',
      ids: { siret: 'SIRET :' },
    },
    footer: [
      'TVA non applicable, art. 293 B du CGI.',
      'Micro-entreprise - dispensée d’immatriculation au RCS.',
    ],
  },
  {
    file: 'en-01-invoice-design.pdf',
    supplier: {
      name: 'Harbourside Design Studio Ltd',
      address: ['Unit 4, Wapping Wharf', 'Bristol BS1 6WP', 'United Kingdom'],
      vatId: 'GB 284 1937 52',
    },
    customer: { name: 'Orchard Lane Bakery Ltd', address: ['22 Orchard Lane', 'Bath BA1 1AA'] },
    number: 'HDS-2611',
    issueDate: '2026-11-30',
    dueDate: '2026-12-30',
    amounts: AMOUNT_STYLES.enGbpCode,
    dates: 'en-dmy-long',
    vatColumn: true,
    items: [
      { description: 'Brand identity refresh', quantity: 1, unitPrice: 3200, vatRate: 20 },
      { description: 'Packaging artwork (per design)', quantity: 4, unitPrice: 275, vatRate: 20 },
      { description: 'Photography day rate', quantity: 1.5, unitPrice: 640, vatRate: 20 },
    ],
    footer: ['Payment by bank transfer within 30 days. Thank you for your business.', 'Company No. 09876543'],
  },
  {
    file: 'en-02-invoice-hosting.txt',
    supplier: {
      name: 'Cobalt Ridge Hosting LLC',
      address: ['1180 Alder Street, Suite 300', 'Portland, OR 97205', 'USA'],
    },
    customer: { name: 'Greywater Labs Inc.', address: ['400 Harbor Drive', 'San Diego, CA 92101'] },
    number: 'CRH-10293',
    issueDate: '2026-11-30',
    dueDate: '2026-12-30',
    amounts: AMOUNT_STYLES.enDollar,
    dates: 'en-mdy-long',
    itemCurrency: true,
    items: [
      { description: 'Dedicated server, November', quantity: 2, unitPrice: 489, vatRate: 8.5 },
      { description: 'Managed backups (TB)', quantity: 12, unitPrice: 18.75, vatRate: 8.5 },
      { description: 'Support hours', quantity: 3, unitPrice: 120, vatRate: 8.5 },
    ],
    wording: {
      number: 'Invoice #:',
      issueDate: 'Date:',
      dueDate: 'Payment due:',
      customer: 'Bill to:',
      customerInline: true,
      tax: (rate) => `Sales tax (${rate}%)`,
      total: 'Amount due',
      ids: {},
    },
    footer: ['Please include the invoice number with your payment.'],
  },
  {
    file: 'en-03-invoice-translation.txt',
    supplier: {
      name: 'Lindenhof Übersetzungen GmbH',
      address: ['Kastanienallee 51', '10119 Berlin', 'Germany'],
      vatId: 'DE 287 654 321',
    },
    customer: { name: 'Studio Papillon SAS', address: ['9 rue de la Roquette', '75011 Paris', 'France'] },
    number: 'LU-2026-0871',
    issueDate: '2026-11-30',
    dueDate: '2026-12-14',
    amounts: AMOUNT_STYLES.enEuroSign,
    dates: 'iso',
    itemCurrency: true,
    items: [
      {
        description: 'Translation FR > EN, technical manual (words)',
        quantity: 12400,
        unitPrice: 0.14,
        vatRate: 19,
      },
      { description: 'Proofreading (hours)', quantity: 6, unitPrice: 65, vatRate: 19 },
    ],
    wording: {
      number: 'Invoice number:',
      issueDate: 'Issue date:',
      customer: 'Customer:',
      net: 'Net amount',
      total: 'Total amount',
      ids: { vatId: 'VAT ID:' },
    },
    footer: ['Bank: IBAN DE00 0000 0000 0000 0000 00.'],
  },
  {
    file: 'en-04-credit-note.pdf',
    creditNote: true,
    supplier: {
      name: 'Blue Heron Analytics B.V.',
      address: ['Keizersgracht 318', '1016 EZ Amsterdam', 'Netherlands'],
      vatId: 'NL 8123.45.678.B01',
    },
    customer: { name: 'Marlowe Quay Hotels Ltd', address: ['1 Marlowe Quay', 'Cork T12 0000', 'Ireland'] },
    number: 'CN-2026-0012',
    issueDate: '2026-12-02',
    dueDate: null,
    amounts: AMOUNT_STYLES.enEuroSign,
    dates: 'dmy-slash',
    itemCurrency: true,
    vatColumn: true,
    items: [{ description: 'Dashboard licence, unused seats', quantity: 5, unitPrice: 90, vatRate: 21 }],
    wording: {
      title: 'CREDIT NOTE',
      supplierLabel: 'Seller:',
      number: 'Credit note No:',
      issueDate: 'Date:',
      dueDate: undefined,
      customer: 'Customer:',
      total: 'Total credited',
      ids: { vatId: 'VAT number:' },
    },
    extra: ['Original invoice: INV-2026-0377 of 14/11/2026'],
    footer: ['This amount will be refunded to your account within 14 days.'],
  },
  {
    file: 'en-05-invoice-consulting.pdf',
    supplier: {
      name: 'Kestrel & Finch Consulting Ltd',
      address: ['Fitzwilliam Hall, Fitzwilliam Place', 'Dublin 2, D02 XXXX', 'Ireland'],
      vatId: 'IE 4821937KH',
    },
    customer: { name: 'Saltmarsh Renewables Ltd', address: ['Harbour Road', 'Galway H91 0000'] },
    number: 'KF-0458',
    issueDate: '2026-11-30',
    dueDate: '2026-12-30',
    amounts: AMOUNT_STYLES.enEurCode,
    dates: 'en-mdy-long',
    items: [
      { description: 'Grid connection study (days)', quantity: 8, unitPrice: 950, vatRate: 23 },
      { description: 'Site visit and travel', quantity: 1, unitPrice: 420, vatRate: 23 },
    ],
    wording: {
      supplierLabel: 'From:',
      number: 'Invoice number:',
      issueDate: 'Date of issue:',
      dueDate: 'Payment due:',
      net: 'Net amount',
      tax: (rate) => `VAT @ ${rate}%`,
      ids: { vatId: 'VAT Reg. No:' },
    },
    footer: ['Payment terms: 30 days from the date of issue.'],
  },
  {
    file: 'en-06-invoice-catering.txt',
    supplier: {
      name: 'La Table Verte Traiteur SAS',
      address: ['27 rue des Petites Écuries', '75010 Paris', 'France'],
      siren: '912345675',
      nic: '00025',
      vatId: frenchVatId('912345675', true),
    },
    customer: {
      name: 'Greenfield Events Europe Ltd',
      address: ['8 Market Street', 'Manchester M1 1AB', 'United Kingdom'],
      vatId: 'GB 123 4567 89',
    },
    number: 'TV-2026-1130',
    issueDate: '2026-11-30',
    dueDate: '2026-12-15',
    amounts: AMOUNT_STYLES.frSpace,
    dates: 'dmy-slash',
    vatColumn: true,
    items: [
      { description: 'Cocktail reception, per guest', quantity: 180, unitPrice: 28, vatRate: 10 },
      { description: 'Service staff (hours)', quantity: 24, unitPrice: 42, vatRate: 20 },
      { description: 'Equipment rental', quantity: 1, unitPrice: 1150, vatRate: 20 },
    ],
    wording: {
      number: 'Invoice No.',
      net: 'Total excl. VAT',
      taxTotal: 'Total VAT',
      total: 'Total incl. VAT',
      ids: { siret: 'SIRET:', vatId: 'VAT number:' },
    },
    extra: ['Event date: 21/11/2026'],
    footer: ['Customer VAT number: GB 123 4567 89', 'Payment by bank transfer within 15 days.'],
  },
];

/** A grey gradient, one byte a pixel, row by row. */
function greyGradient(widthPx: number, heightPx: number): Buffer {
  const pixels = Buffer.alloc(widthPx * heightPx);
  for (let row = 0; row < heightPx; row += 1) {
    for (let column = 0; column < widthPx; column += 1)
      pixels[row * widthPx + column] = 160 + ((row + column) % 64);
  }
  return pixels;
}

/** A small valid PNG (grey gradient): an image the content check accepts and no OCR can read. */
function png(widthPx: number, heightPx: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(widthPx, 0);
  header.writeUInt32BE(heightPx, 4);
  header.set([8, 0, 0, 0, 0], 8); // 8-bit greyscale, no interlace
  // Each row starts with its filter type (0: none).
  const grey = greyGradient(widthPx, heightPx);
  const pixels = Buffer.alloc((widthPx + 1) * heightPx);
  for (let row = 0; row < heightPx; row += 1) {
    grey.copy(pixels, row * (widthPx + 1) + 1, row * widthPx, (row + 1) * widthPx);
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(pixels, { level: 9 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A "scanned" invoice: a page with an image and shapes but no text layer. */
async function scannedPdf(widthPx: number, heightPx: number): Promise<Uint8Array> {
  const fixed = new Date('2026-11-30T09:00:00Z');
  const doc = new PdfWriter({
    producer: 'docline samples/generate.ts (samples/pdf-writer.ts)',
    created: fixed,
    modified: fixed,
  });
  const page = doc.addPage(PAGE.width, PAGE.height);
  page.drawImage(doc.greyPixels(widthPx, heightPx, greyGradient(widthPx, heightPx)), {
    x: 50,
    y: 300,
    width: 495,
    height: 490,
  });
  page.drawRectangle({ x: 320, y: 120, width: 225, height: 80, stroke: [0.2, 0.2, 0.2], lineWidth: 1 });
  return doc.save();
}

async function main(): Promise<void> {
  const root = process.argv[2] ? resolve(process.argv[2]) : __dirname;
  for (const folder of ['invoices', 'other', 'bad']) mkdirSync(join(root, folder), { recursive: true });
  const expectations: Record<string, unknown> = {};

  for (const sample of SAMPLES) {
    const bytes = sample.file.endsWith('.pdf') ? await renderPdf(sample) : renderText(sample);
    writeFileSync(join(root, 'invoices', sample.file), bytes);
    expectations[`invoices/${sample.file}`] = expected(sample);
  }

  // Every field null but the two enums, which say `other`.
  const empty = {
    ...Object.fromEntries(Object.keys(AnalysisSchema.shape).map((field) => [field, null])),
    document_type: 'other',
    language: 'other',
    line_items: [],
  };
  // A scan and a phone photo of two of the invoices above (bench/scans.ts says how they are made):
  // OCR must find in them what the invoice's text layer holds.
  const scanned = 'invoices/en-01-invoice-design.pdf';
  const photographed = 'invoices/fr-01-facture-conseil.pdf';
  const others: Array<[string, Uint8Array, unknown]> = [
    ['scan-invoice-design.pdf', await scanOf(readFileSync(join(root, scanned))), expectations[scanned]],
    [
      'photo-facture-conseil.jpg',
      await photoOf(readFileSync(join(root, photographed))),
      expectations[photographed],
    ],
    ['receipt-photo.png', png(48, 64), empty],
    ['scanned-invoice.pdf', await scannedPdf(48, 64), empty],
  ];
  for (const [file, bytes, expectation] of others) {
    writeFileSync(join(root, 'other', file), bytes);
    expectations[`other/${file}`] = expectation;
  }

  const bad: Record<string, string | Buffer> = {
    'not-a-pdf.pdf': 'Facture n° F-2026-0999\nThis is plain text saved with a .pdf name.\n',
    'empty.txt': '',
    'not-a-png.png': 'GIF89a? No: just text pretending to be a PNG.\n',
    'binary-with-nul.txt': Buffer.from([
      0x46, 0x61, 0x63, 0x74, 0x75, 0x72, 0x65, 0x00, 0x00, 0x01, 0x02, 0xff, 0x00, 0x0a,
    ]),
  };
  for (const [file, bytes] of Object.entries(bad)) writeFileSync(join(root, 'bad', file), bytes);

  writeFileSync(join(root, 'expected.json'), `${JSON.stringify(expectations, null, 2)}\n`);
  console.log(
    `wrote ${SAMPLES.length} invoices, a scan, a photo, 2 unreadable documents and 4 bad files under ${root}`,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
