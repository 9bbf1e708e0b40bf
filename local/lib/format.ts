import type { Analysis } from '../../worker/src/contract/analysis';
import type { Row } from '../../worker/src/contract/row';

/** How the local tools print rows and outcomes for people. */

const pad = (value: string, width: number) =>
  value.length > width ? `${value.slice(0, width - 1)}…` : value.padEnd(width);

/** The analysis fields printed here, as the invoice schema defines them (absent on a rejected row). */
type AnalysisFields = Partial<Pick<Analysis, 'supplier_name' | 'total_amount' | 'currency'>>;

export function money(amount: number | null | undefined, currency: string | null | undefined): string {
  if (amount === null || amount === undefined) return '';
  return `${amount.toFixed(2)} ${currency ?? ''}`.trim();
}

/** The short name of an object generation: `name#generation`. */
export function objectLabel(row: Pick<Row, 'object_name' | 'generation' | 'message_id'>): string {
  return row.object_name ? `${row.object_name}#${row.generation}` : `(message ${row.message_id})`;
}

/** One line for one outcome, as `npm start` prints it. */
export function outcomeLine(status: string, label: string, row?: Row, note?: string): string {
  const analysis = (row?.analysis ?? {}) as AnalysisFields;
  const details =
    status === 'ok'
      ? [
          analysis.supplier_name ?? '',
          money(analysis.total_amount, analysis.currency),
          row?.total_tokens ? `${row.total_tokens} tokens` : '',
        ]
      : [note ?? ''];
  return [pad(status, 10), pad(label, 48), ...details.filter(Boolean)].join('  ').trimEnd();
}

/** The documents view as a readable table. */
export function rowsTable(rows: Row[]): string {
  const header = ['status', 'object', 'supplier', 'total', 'tokens', 'reason'];
  const body = rows.map((row) => {
    const analysis = (row.analysis ?? {}) as AnalysisFields;
    return [
      row.status,
      objectLabel(row),
      analysis.supplier_name ?? '',
      money(analysis.total_amount, analysis.currency),
      String(row.total_tokens ?? 0),
      row.reason ?? '',
    ];
  });
  const widths = header.map((h, i) => Math.min(60, Math.max(h.length, ...body.map((r) => r[i]!.length))));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => pad(c, widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n');
}

/** One object of a duplicate_invoices group, as the view returns it. */
export interface DuplicateInvoice {
  supplier_key: string;
  invoice_number_key: string;
  total_amount: number;
  group_objects: number;
  object_uri: string;
  object_name: string | null;
  supplier_name: string | null;
  invoice_number: string | null;
  arrived_at: string | null;
  first_processed_at: string;
}

/** The duplicate_invoices view as readable groups: one header per invoice, one line per object. */
export function duplicatesTable(rows: DuplicateInvoice[]): string {
  const groups = new Map<string, DuplicateInvoice[]>();
  for (const row of rows) {
    const key = `${row.supplier_key}|${row.invoice_number_key}|${row.total_amount}`;
    groups.set(key, [...(groups.get(key) ?? []), row]);
  }
  const lines: string[] = [];
  for (const group of groups.values()) {
    const first = group[0]!;
    lines.push(
      `invoice ${first.invoice_number ?? first.invoice_number_key} of ${first.supplier_name ?? first.supplier_key} ` +
        `(${first.supplier_key}), total ${first.total_amount}: ${group.length} objects`,
    );
    for (const row of [...group].sort((a, b) => String(a.arrived_at).localeCompare(String(b.arrived_at))))
      lines.push(
        `  ${row.object_uri.replace(/^gs:\/\/[^/]+\//, '')}  arrived ${row.arrived_at ?? row.first_processed_at}`,
      );
  }
  return lines.join('\n');
}

/** The objects of the duplicate_invoices group an object belongs to (none when it is in no group). */
export function duplicateGroupOf(rows: DuplicateInvoice[], objectUri: string): DuplicateInvoice[] {
  const member = rows.find((d) => d.object_uri === objectUri);
  if (!member) return [];
  return rows.filter(
    (d) =>
      d.supplier_key === member.supplier_key &&
      d.invoice_number_key === member.invoice_number_key &&
      d.total_amount === member.total_amount,
  );
}

/**
 * How many other objects the duplicate-invoice warning names. A group of 5,000 copies would otherwise
 * print 5,000 names per new row; `npm run rows -- --duplicates` lists them all.
 */
export const DUPLICATE_WARNING_NAMES = 3;

/**
 * The warning `npm start` prints when a new row joins a duplicate_invoices group, given the other
 * objects of that group (object URIs): the first {@link DUPLICATE_WARNING_NAMES} are named, "and
 * others" says there are more. Pass {@link DUPLICATE_WARNING_NAMES} + 1 of them when there are.
 */
export function duplicateWarning(objectUri: string, others: readonly string[]): string | undefined {
  const rest = others.filter((uri) => uri !== objectUri);
  if (rest.length === 0) return undefined;
  const label = (uri: string) => uri.replace(/^gs:\/\/[^/]+\//, '');
  const named = rest.slice(0, DUPLICATE_WARNING_NAMES).map(label).join(', ');
  const more = rest.length > DUPLICATE_WARNING_NAMES ? ' and others' : '';
  return (
    `warning    duplicate invoice: ${label(objectUri)} has the supplier, number and total of ` +
    `${named}${more} (npm run rows -- --duplicates)`
  );
}
