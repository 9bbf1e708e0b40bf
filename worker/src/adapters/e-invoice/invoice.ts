import type { Analysis, LineItem } from '../../contract/analysis';
import {
  CREDIT_NOTE_TYPE_CODES,
  HEADER_TERMS,
  LANGUAGE_BY_COUNTRY,
  LINE_TERMS,
  SYNTAXES,
  type Syntax,
  type Term,
} from './mapping';
import type { XmlElement } from './xml';

/**
 * An EN 16931 invoice (CII or UBL) read into docline's analysis, by the paths of ./mapping. Values
 * are copied as the XML states them: a credit note keeps the signs it is written with (positive,
 * as EN 16931 writes credit notes), which is also how the analyzers copy a printed credit note.
 */

/** The structure is readable XML but not a usable invoice: a required term is missing or malformed. */
export class IncompleteInvoice extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'IncompleteInvoice';
  }
}

/** The largest number of lines the analysis holds (contract/analysis.ts); later lines are left out. */
const MAX_LINES = 500;
/** BT-109 + BT-110 must give BT-112 within a cent (EN 16931 rule BR-CO-15). */
const CENT = 0.01 + 1e-9;

/** The syntax of a root element, or undefined when it is no EN 16931 invoice. */
export function syntaxOf(root: XmlElement): Syntax | undefined {
  const [ciiUri, ciiLocal] = SYNTAXES.cii.root;
  if (root.uri === ciiUri && root.local === ciiLocal) return 'cii';
  if (SYNTAXES.ubl.root.some(([uri, local]) => root.uri === uri && root.local === local)) return 'ubl';
  return undefined;
}

/** Reads the analysis from an invoice's root element. Throws {@link IncompleteInvoice}. */
export function readInvoice(root: XmlElement, syntax: Syntax): Analysis {
  const header = new Map<string, unknown>();
  const context: Context = { syntax, currency: undefined };
  for (const t of HEADER_TERMS) {
    if (t.kind === 'lines') continue;
    const value = termValue(root, t, context, root);
    if (value === null && t.required) {
      throw new IncompleteInvoice(`${t.term} (${t.field}) is missing or malformed`);
    }
    if (t.field === 'currency') context.currency = value as string | null;
    header.set(t.field, value);
  }
  const net = header.get('net_amount') as number;
  const tax = header.get('tax_amount') as number | null;
  const total = header.get('total_amount') as number;
  if (tax !== null && Math.abs(net + tax - total) > CENT) {
    throw new IncompleteInvoice(`BT-109 + BT-110 (${net} + ${tax}) is not BT-112 (${total})`);
  }
  const legalId = header.get('supplier_siren, supplier_siret') as string | null;
  const country = header.get('language') as string | null;
  const linesTerm = HEADER_TERMS.find((t) => t.kind === 'lines')!;
  const lines = select(root, pathOf(linesTerm, syntax), context).slice(0, MAX_LINES);
  return {
    document_type: header.get('document_type') as Analysis['document_type'],
    language: (country && LANGUAGE_BY_COUNTRY[country]) || 'other',
    supplier_name: header.get('supplier_name') as string,
    supplier_vat_id: header.get('supplier_vat_id') as string | null,
    supplier_siren: legalId?.length === 9 ? legalId : null,
    supplier_siret: legalId?.length === 14 ? legalId : null,
    customer_name: header.get('customer_name') as string | null,
    invoice_number: header.get('invoice_number') as string,
    issue_date: header.get('issue_date') as string,
    due_date: header.get('due_date') as string | null,
    currency: header.get('currency') as string,
    net_amount: net,
    tax_amount: tax,
    total_amount: total,
    line_items: lines.map((line) => lineItem(line, context, root)),
  };
}

function lineItem(line: XmlElement, context: Context, root: XmlElement): LineItem {
  const value = (field: string) => termValue(line, LINE_TERMS.find((t) => t.field === field)!, context, root);
  return {
    description: (value('line_items[].description') as string | null) ?? '',
    quantity: value('line_items[].quantity') as number | null,
    unit_price: value('line_items[].unit_price') as number | null,
    amount: value('line_items[].amount') as number | null,
    vat_rate: value('line_items[].vat_rate') as number | null,
  };
}

interface Context {
  syntax: Syntax;
  /** The invoice currency (BT-5), once read: `$currency` in a path. */
  currency: string | null | undefined;
}

function pathOf(t: Term, syntax: Syntax): string {
  return syntax === 'cii' ? t.cii : t.ubl;
}

/** A term's value in the analysis' terms, or null when it is absent or malformed. */
function termValue(from: XmlElement, t: Term, context: Context, root: XmlElement): unknown {
  const node = select(from, pathOf(t, context.syntax), context)[0];
  if (!node) return null;
  const text = node.text;
  if (text === '') return null;
  switch (t.kind) {
    case 'text':
      // A name may be wrapped over lines in the XML; the row keeps it on one.
      return text.replace(/\s+/g, ' ');
    case 'code':
      return /^[A-Za-z]{2,3}$/.test(text) ? text.toUpperCase() : null;
    case 'amount':
    case 'number':
      return /^[+-]?(\d+\.?\d*|\.\d+)$/.test(text) ? Number(text) : null;
    case 'date':
      return isoDate(text, node.attributes.format, context.syntax);
    case 'type':
      if (!/^\d{1,3}$/.test(text)) return null;
      if (context.syntax === 'ubl' && root.local === 'CreditNote') return 'credit_note';
      return CREDIT_NOTE_TYPE_CODES.has(text) ? 'credit_note' : 'invoice';
    case 'legal_id': {
      const digits = text.replace(/[\s.]/g, '');
      return /^(\d{9}|\d{14})$/.test(digits) ? digits : null;
    }
    case 'lines':
      return null;
  }
}

/** `20171116` (CII format 102) or `2017-11-16` (UBL, maybe with a zone) → `2017-11-16`; null otherwise. */
function isoDate(text: string, format: string | undefined, syntax: Syntax): string | null {
  let iso: string;
  if (syntax === 'cii') {
    if ((format ?? '102') !== '102' || !/^\d{8}$/.test(text)) return null;
    iso = `${text.slice(0, 4)}-${text.slice(4, 6)}-${text.slice(6, 8)}`;
  } else {
    if (!/^\d{4}-\d{2}-\d{2}(Z|[+-]\d{2}:\d{2})?$/.test(text)) return null;
    iso = text.slice(0, 10);
  }
  const date = new Date(`${iso}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().startsWith(iso) ? iso : null;
}

// ---- the paths of ./mapping ----

interface Step {
  uri: string;
  local: string;
  condition?:
    | { attribute: string; equals: string }
    | { attribute: string; equalsCurrency: true }
    | { path: Step[]; equals: string };
}

const compiled = new Map<string, Step[][]>();

/** The elements a path finds under `from`, in document order; the first alternative that finds any wins. */
export function select(
  from: XmlElement,
  path: string,
  context: Pick<Context, 'syntax' | 'currency'>,
): XmlElement[] {
  let alternatives = compiled.get(path);
  if (!alternatives) {
    alternatives = path.split(' | ').map((alternative) => compileSteps(alternative, context.syntax));
    compiled.set(path, alternatives);
  }
  for (const steps of alternatives) {
    const found = walk([from], steps, context);
    if (found.length > 0) return found;
  }
  return [];
}

function walk(
  from: readonly XmlElement[],
  steps: readonly Step[],
  context: Pick<Context, 'currency'>,
): XmlElement[] {
  let current = from;
  for (const step of steps) {
    current = current.flatMap((element) =>
      element.children.filter(
        (child) => child.uri === step.uri && child.local === step.local && meets(child, step, context),
      ),
    );
  }
  return [...current];
}

function meets(element: XmlElement, step: Step, context: Pick<Context, 'currency'>): boolean {
  const c = step.condition;
  if (!c) return true;
  if ('path' in c) return walk([element], c.path, context).some((found) => found.text === c.equals);
  const value = element.attributes[c.attribute];
  if ('equalsCurrency' in c) return value === undefined || value === context.currency;
  return value === c.equals;
}

/** Splits a path into steps at the slashes outside conditions. */
function compileSteps(path: string, syntax: Syntax): Step[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < path.length; i++) {
    if (path[i] === '[') depth++;
    else if (path[i] === ']') depth--;
    else if (path[i] === '/' && depth === 0) {
      parts.push(path.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(path.slice(start));
  return parts.map((part) => compileStep(part.trim(), syntax));
}

function compileStep(text: string, syntax: Syntax): Step {
  const open = text.indexOf('[');
  const name = open < 0 ? text : text.slice(0, open);
  const [prefix, local] = name.split(':') as [string, string];
  const namespaces: Record<string, string> = SYNTAXES[syntax].namespaces;
  const uri = namespaces[prefix];
  if (uri === undefined || !local) throw new Error(`mapping: unknown step "${text}" for ${syntax}`);
  if (open < 0) return { uri, local };
  const condition = text.slice(open + 1, -1);
  const eq = condition.indexOf('=');
  const left = condition.slice(0, eq);
  const right = condition.slice(eq + 1);
  const quoted = right.startsWith("'") && right.endsWith("'") ? right.slice(1, -1) : undefined;
  if (left.startsWith('@') && right === '$currency') {
    return { uri, local, condition: { attribute: left.slice(1), equalsCurrency: true } };
  }
  if (quoted === undefined) throw new Error(`mapping: unknown condition "${condition}"`);
  if (left.startsWith('@')) return { uri, local, condition: { attribute: left.slice(1), equals: quoted } };
  return { uri, local, condition: { path: compileSteps(left, syntax), equals: quoted } };
}
