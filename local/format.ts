import type { Row } from '../worker/src/contract/row';

/** How the local tools print rows and outcomes for people. */

const pad = (value: string, width: number) =>
  value.length > width ? `${value.slice(0, width - 1)}…` : value.padEnd(width);

interface AnalysisFields {
  supplier_name?: string | null;
  total_amount?: number | null;
  currency?: string | null;
}

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
