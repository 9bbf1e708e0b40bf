import type { LineItem } from '../../../contract/analysis';
import { type DecimalHint, findAmounts, parseAmount, parsePercent } from './amounts';
import { BARE_TOTAL, COLUMN_HEADERS, type ColumnRole, TOTAL_LABELS } from './labels';
import { isBlank, splitCells } from './text';

/**
 * Best-effort reading of a line-items table: a header line naming the columns ("Désignation  Qté
 * Prix unitaire HT  Montant HT", "Description  Qty  Unit price  Amount"), then one line per item
 * until the totals, a blank line or the end. Cells are matched to the header's columns when both
 * have as many; otherwise the numbers are read from the right (amount last, quantity and unit
 * price before it). A line without numbers continues the previous item's description.
 */

/** The items found and which lines they came from, so totals are not looked for among them. */
export interface LineItemsFound {
  items: LineItem[];
  lineIndexes: ReadonlySet<number>;
}

const MAX_ITEMS = 500;

/** The role of each header cell, or null when the line is not a table header. */
export function headerRoles(cells: readonly string[]): Array<ColumnRole | null> | null {
  if (cells.length < 3) return null;
  const roles = cells.map((cell) => COLUMN_HEADERS.find(([, pattern]) => pattern.test(cell))?.[0] ?? null);
  const hasDescription = roles.includes('description');
  const hasNumbers = roles.some((role) => role === 'amount' || role === 'unit_price' || role === 'quantity');
  // A header names its columns and holds no amounts.
  return hasDescription && hasNumbers && cells.every((cell) => findAmounts(cell).length === 0) ? roles : null;
}

function isTotalsLine(line: string): boolean {
  const label = splitCells(line)[0] ?? '';
  return BARE_TOTAL.test(label) || TOTAL_LABELS.some(([, pattern]) => pattern.test(label));
}

function emptyItem(description: string): LineItem {
  return { description, quantity: null, unit_price: null, amount: null, vat_rate: null };
}

function itemFromColumns(
  cells: readonly string[],
  roles: ReadonlyArray<ColumnRole | null>,
  hint: DecimalHint,
): LineItem {
  const item = emptyItem('');
  cells.forEach((cell, index) => {
    const role = roles[index];
    if (role === 'description') item.description = cell;
    else if (role === 'vat_rate') item.vat_rate = parsePercent(cell) ?? parseAmount(cell, hint);
    else if (role) item[role] = parseAmount(cell, hint);
  });
  return item;
}

function itemFromRight(cells: readonly string[], hint: DecimalHint): LineItem | null {
  const words: string[] = [];
  const numbers: number[] = [];
  let vatRate: number | null = null;
  for (const cell of cells) {
    const percent = parsePercent(cell);
    const amount = parseAmount(cell, hint);
    if (percent !== null) vatRate = percent;
    else if (amount !== null && findAmounts(cell, hint).length === 1 && /^[-−]?[\d€£$]/u.test(cell)) {
      numbers.push(amount);
    } else words.push(cell);
  }
  if (numbers.length === 0 || words.length === 0) return null;
  const item = emptyItem(words.join(' '));
  item.vat_rate = vatRate;
  item.amount = numbers[numbers.length - 1]!;
  if (numbers.length >= 3) {
    item.quantity = numbers[0]!;
    item.unit_price = numbers[1]!;
  } else if (numbers.length === 2) {
    item.quantity = numbers[0]!;
  }
  return item;
}

/** Reads the first line-items table of the document. */
export function parseLineItems(lines: readonly string[], hint: DecimalHint): LineItemsFound {
  const items: LineItem[] = [];
  const lineIndexes = new Set<number>();
  const headerIndex = lines.findIndex((line) => headerRoles(splitCells(line)) !== null);
  if (headerIndex < 0) return { items, lineIndexes };
  const roles = headerRoles(splitCells(lines[headerIndex]!))!;
  lineIndexes.add(headerIndex);

  for (let index = headerIndex + 1; index < lines.length && items.length < MAX_ITEMS; index += 1) {
    const line = lines[index]!;
    if (isBlank(line)) {
      if (items.length > 0) break;
      continue;
    }
    if (isTotalsLine(line)) break;
    const cells = splitCells(line);
    const hasNumbers = cells.some((cell) => findAmounts(cell, hint).length > 0);
    const previous = items[items.length - 1];
    if (!hasNumbers) {
      // A description that wraps onto a second line.
      if (!previous) break;
      previous.description = `${previous.description} ${cells.join(' ')}`;
      lineIndexes.add(index);
      continue;
    }
    const item =
      cells.length === roles.length ? itemFromColumns(cells, roles, hint) : itemFromRight(cells, hint);
    if (!item || item.description === '') break;
    items.push(item);
    lineIndexes.add(index);
  }
  return { items, lineIndexes };
}
