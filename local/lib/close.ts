import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Analysis } from '../../worker/src/contract/analysis';
import type { ObjectResource } from '../../worker/src/reconcile/notification';
import { objectUri } from '../../worker/src/reconcile/notification';
import { analysisOf, reviewCell, verdictCell } from './export';
import { canonicalRow, daysOf, type Month, type MonthRow, monthDigest, type StoredRow } from './month';
import type { LedgerEntry } from './pipeline';

/**
 * The month-end close certificate (`npm run close`): what an auditor needs to rely on a month of
 * the local pipeline, computed from the table (the `documents` view), the local bucket and the
 * delivery ledger; rendered by ./certificate.ts. docs/month-end.md says where each figure comes from.
 */

/** A dead letter as the certificate lists it. */
export interface DeadLetterItem {
  messageId: string;
  object: string;
  deliveries: number | null;
}

/** One invoice found in several objects. */
export interface DuplicateGroup {
  invoiceNumber: string;
  supplier: string;
  total: number;
  /** The identifiers the objects share (`siren:…`, `vat:…`, `siret:…`), or `name:…`. */
  matchedOn: string[];
  objects: Array<{ object: string; format: string; day: string }>;
  /** The group holds an e-invoice and an analysed picture (or two syntaxes) of the same invoice. */
  acrossFormats: boolean;
}

export interface Certificate {
  kind: 'docline-close-certificate';
  version: 1;
  month: Month;
  generatedAt: string;
  dataDir: string;
  /** The month's rows and their digest (re-verified by `npm run close -- --verify`). */
  rows: {
    count: number;
    columns: string[];
    sha256: string;
    /** Each row's own digest by dedup key: `--verify` names the rows that changed. */
    rowDigests: Record<string, string>;
  };
  outcomes: { ok: number; rejected: number; eInvoices: number; analysed: number };
  /** Every object uploaded in the month against its rows. */
  reconcile: {
    objects: number;
    withOneRow: number;
    withoutRow: string[];
    withSeveralRows: Array<{ object: string; rows: number }>;
    /** Rows of the month whose object is no longer live (replaced by a later generation, or deleted). */
    rowsWithoutLiveObject: number;
  };
  /** Deliveries that wrote no row, from the ledger. */
  deliveries: {
    ledger: boolean;
    answers: number;
    redeliveriesAbsorbed: number;
    doubledAnnouncementsAbsorbed: number;
    /** Rows written by a delivery after failed attempts of the same message (`delivery_attempt` > 1). */
    recordedAfterRetries: number;
    failedAnswers: number;
  };
  /** Analyses paid more than once for one document. */
  paidTwice: {
    count: number;
    analysesPaid: number;
    tokens: number;
    items: Array<{ object: string; why: string }>;
  };
  rejected: Array<{ object: string; reason: string }>;
  deadLetters: { checked: boolean; note: string; items: DeadLetterItem[] };
  duplicates: DuplicateGroup[];
  review: {
    /** Whether the rows carry a review verdict at all (the `review` column of the documents view). */
    recorded: boolean;
    open: Array<{ object: string; reasons: string }>;
    /** Rows the documents view shows with corrections applied; null when the view shows none. */
    corrected: number | null;
  };
  validation: {
    checked: number;
    valid: number;
    invalid: number;
    unchecked: number;
    /** The invalid e-invoices and the rule ids that fired. */
    invalidItems: Array<{ object: string; failed: string[] }>;
  };
  perDay: Array<{ day: string; ok: number; review: number; rejected: number }>;
}

/** What the certificate is computed from. */
export interface CloseInputs {
  month: Month;
  dataDir: string;
  rows: MonthRow[];
  stored: StoredRow[];
  columns: string[];
  /** Every live object of the local buckets. */
  objects: ObjectResource[];
  /** The delivery ledger's entries, or undefined when there is no ledger. */
  ledger: LedgerEntry[] | undefined;
  deadLetters: { checked: boolean; note: string; items: DeadLetterItem[] };
  now: Date;
}

const objectLabel = (uri: string) => uri.replace(/^gs:\/\/[^/]+\//, '');
const label = (row: Pick<MonthRow, 'object_name' | 'dedup_key' | 'object_uri'>) =>
  (row.object_uri && objectLabel(row.object_uri)) ?? row.object_name ?? row.dedup_key;

/** The digest of one stored row (the certificate's `rowDigests`). */
export function rowDigest(row: StoredRow, columns: readonly string[]): string {
  return createHash('sha256').update(canonicalRow(row, columns), 'utf8').digest('hex');
}

/** Computes the certificate. */
export function closeCertificate(inputs: CloseInputs): Certificate {
  const { rows, month } = inputs;
  const ok = rows.filter((r) => r.status === 'ok');
  const isEInvoice = (r: MonthRow) => typeof r.model === 'string' && r.model.startsWith('e-invoice:');
  const hasReview = inputs.columns.includes('review');
  const openReview = (r: MonthRow) => hasReview && !['', 'none'].includes(reviewCell(r.review));
  return {
    kind: 'docline-close-certificate',
    version: 1,
    month,
    generatedAt: inputs.now.toISOString(),
    dataDir: inputs.dataDir,
    rows: {
      count: rows.length,
      columns: inputs.columns,
      sha256: monthDigest(inputs.stored, inputs.columns),
      rowDigests: Object.fromEntries(
        inputs.stored.map((r) => [String(r.dedup_key), rowDigest(r, inputs.columns)]),
      ),
    },
    outcomes: {
      ok: ok.length,
      rejected: rows.length - ok.length,
      eInvoices: ok.filter(isEInvoice).length,
      analysed: ok.filter((r) => !isEInvoice(r)).length,
    },
    reconcile: reconcileMonth(inputs),
    deliveries: deliveriesOf(inputs),
    paidTwice: paidTwice(inputs),
    rejected: rows
      .filter((r) => r.status !== 'ok')
      .map((r) => ({ object: label(r), reason: String(r.reason ?? '') })),
    deadLetters: inputs.deadLetters,
    duplicates: duplicateInvoices(ok),
    review: {
      recorded: hasReview,
      open: rows.filter(openReview).map((r) => ({ object: label(r), reasons: reviewCell(r.review) })),
      corrected: correctedRows(inputs),
    },
    validation: validationOf(ok),
    perDay: daysOf(month).map((day) => {
      const of = rows.filter((r) => r.day === day);
      const good = of.filter((r) => r.status === 'ok');
      return {
        day,
        ok: good.filter((r) => !openReview(r)).length,
        review: good.filter(openReview).length,
        rejected: of.length - good.length,
      };
    }),
  };
}

/** Objects created in the month (UTC) against the rows of their object URI. */
function reconcileMonth({ month, objects, rows }: CloseInputs): Certificate['reconcile'] {
  const rowsByObject = new Map<string, number>();
  for (const r of rows)
    if (r.object_uri) rowsByObject.set(r.object_uri, (rowsByObject.get(r.object_uri) ?? 0) + 1);
  const ofMonth = objects.filter((o) => o.timeCreated.startsWith(`${month}-`));
  const live = new Set(objects.map(objectUri));
  const withoutRow: string[] = [];
  const withSeveralRows: Array<{ object: string; rows: number }> = [];
  let withOneRow = 0;
  for (const o of ofMonth) {
    const uri = objectUri(o);
    const n = rowsByObject.get(uri) ?? 0;
    if (n === 0) withoutRow.push(objectLabel(uri));
    else if (n === 1) withOneRow += 1;
    else withSeveralRows.push({ object: objectLabel(uri), rows: n });
  }
  return {
    objects: ofMonth.length,
    withOneRow,
    withoutRow,
    withSeveralRows,
    rowsWithoutLiveObject: rows.filter((r) => r.object_uri && !live.has(r.object_uri)).length,
  };
}

/** Answers that wrote no row, for the month's keys: redeliveries and other announcements. */
function deliveriesOf({ rows, ledger }: CloseInputs): Certificate['deliveries'] {
  const recordedAfterRetries = rows.filter(
    (r) => typeof r.delivery_attempt === 'number' && r.delivery_attempt > 1,
  ).length;
  if (!ledger) {
    return {
      ledger: false,
      answers: 0,
      redeliveriesAbsorbed: 0,
      doubledAnnouncementsAbsorbed: 0,
      recordedAfterRetries,
      failedAnswers: 0,
    };
  }
  const winner = new Map(rows.map((r) => [r.dedup_key, r.message_id]));
  const mine = ledger.filter((e) => typeof e.dedupKey === 'string' && winner.has(e.dedupKey));
  const duplicates = mine.filter((e) => e.status === 'duplicate');
  // A duplicate answer to another message of the key is that message's first absorbed delivery
  // or a redelivery of it; one to the winning message is a redelivery.
  const others = new Set(
    duplicates
      .filter((e) => e.messageId !== winner.get(e.dedupKey as string))
      .map((e) => `${e.dedupKey} ${e.messageId}`),
  );
  // Failed answers carry no key: they are counted by the messages of the month's rows.
  const messages = new Set(rows.map((r) => r.message_id));
  const failed = ledger.filter(
    (e) => e.status === 'error' && typeof e.messageId === 'string' && messages.has(e.messageId),
  );
  return {
    ledger: true,
    answers: mine.length,
    redeliveriesAbsorbed: duplicates.length - others.size,
    doubledAnnouncementsAbsorbed: others.size,
    recordedAfterRetries,
    failedAnswers: failed.length,
  };
}

/**
 * Analyses paid more than once for one document: an object with more than one row that paid
 * tokens (message mode, a doubled notification), and a delivery that paid an analysis and then
 * found the row written (a duplicate answer with tokens, from the ledger).
 */
function paidTwice({ rows, ledger }: CloseInputs): Certificate['paidTwice'] {
  const paid = rows.filter((r) => typeof r.total_tokens === 'number' && r.total_tokens > 0);
  const items: Array<{ object: string; why: string }> = [];
  const byObject = new Map<string, MonthRow[]>();
  for (const r of paid)
    if (r.object_uri) byObject.set(r.object_uri, [...(byObject.get(r.object_uri) ?? []), r]);
  for (const [uri, of] of byObject)
    if (of.length > 1) items.push({ object: objectLabel(uri), why: `${of.length} rows paid tokens` });
  const keys = new Map(rows.map((r) => [r.dedup_key, r]));
  for (const e of ledger ?? []) {
    const row = typeof e.dedupKey === 'string' ? keys.get(e.dedupKey) : undefined;
    if (row && e.status === 'duplicate' && typeof e.tokens === 'number' && e.tokens > 0)
      items.push({
        object: label(row),
        why: `message ${String(e.messageId)} paid ${e.tokens} tokens, then found the row`,
      });
  }
  return {
    count: items.length,
    analysesPaid: paid.length,
    tokens: paid.reduce((sum, r) => sum + (r.total_tokens as number), 0),
    items,
  };
}

const normalisedNumber = (n: string | null | undefined) =>
  n?.replace(/[\s.\-/_]/g, '').toUpperCase() || undefined;
const normalisedName = (n: string | null | undefined) =>
  n?.toLowerCase().replace(/[\s.,\-']/g, '') || undefined;

/** Identifiers a supplier is known by: SIREN (from a SIREN, a SIRET or a French VAT id), SIRET, VAT. */
export function supplierIdentifiers(a: Partial<Analysis>): string[] {
  const ids = new Set<string>();
  const siren = normalisedNumber(a.supplier_siren);
  const siret = normalisedNumber(a.supplier_siret);
  const vat = normalisedNumber(a.supplier_vat_id);
  if (siren && /^\d{9}$/.test(siren)) ids.add(`siren:${siren}`);
  if (siret && /^\d{14}$/.test(siret)) {
    ids.add(`siret:${siret}`);
    ids.add(`siren:${siret.slice(0, 9)}`);
  }
  if (vat) {
    ids.add(`vat:${vat}`);
    const french = /^FR[0-9A-Z]{2}(\d{9})$/.exec(vat);
    if (french) ids.add(`siren:${french[1]}`);
  }
  return [...ids];
}

/** The format of a row's document: the e-invoice syntax it was read from, else its content type. */
export function formatOf(row: MonthRow): string {
  if (typeof row.model === 'string' && row.model.startsWith('e-invoice:')) return row.model;
  return `picture (${String(row.content_type ?? 'unknown')})`;
}

/**
 * One invoice in several objects: ok rows of different objects with the same normalised number
 * and total (to the cent) whose suppliers share an identifier (SIREN, SIRET or VAT id, a SIREN
 * read from a SIRET or a French VAT id too); two rows without any identifier match on the name.
 */
export function duplicateInvoices(rows: readonly MonthRow[]): DuplicateGroup[] {
  const candidates = rows.filter((r) => r.object_uri && normalisedNumber(analysisOf(r).invoice_number));
  const buckets = new Map<string, MonthRow[]>();
  for (const r of candidates) {
    const a = analysisOf(r);
    if (typeof a.total_amount !== 'number') continue;
    const key = `${normalisedNumber(a.invoice_number)}|${Math.round(a.total_amount * 100)}`;
    buckets.set(key, [...(buckets.get(key) ?? []), r]);
  }
  const groups: DuplicateGroup[] = [];
  for (const bucket of buckets.values()) {
    if (bucket.length < 2) continue;
    // Union-find over the rows of one number and total, joined by a shared identifier.
    const parent = bucket.map((_, i) => i);
    const find = (i: number): number => {
      let at = i;
      while (parent[at] !== at) at = parent[at]!;
      return at;
    };
    const keysOf = bucket.map((r) => {
      const ids = supplierIdentifiers(analysisOf(r));
      const name = normalisedName(analysisOf(r).supplier_name);
      return ids.length > 0 ? ids : name ? [`name:${name}`] : [];
    });
    const owner = new Map<string, number>();
    keysOf.forEach((keys, i) => {
      for (const k of keys) {
        const j = owner.get(k);
        if (j === undefined) owner.set(k, i);
        else parent[find(i)] = find(j);
      }
    });
    const sets = new Map<number, number[]>();
    for (let i = 0; i < bucket.length; i++) sets.set(find(i), [...(sets.get(find(i)) ?? []), i]);
    for (const members of sets.values()) {
      const objects = new Map<string, MonthRow>();
      for (const i of members)
        objects.set(bucket[i]!.object_uri!, objects.get(bucket[i]!.object_uri!) ?? bucket[i]!);
      if (objects.size < 2) continue;
      const counts = new Map<string, number>();
      for (const i of members) for (const k of keysOf[i]!) counts.set(k, (counts.get(k) ?? 0) + 1);
      const first = analysisOf(bucket[members[0]!]!);
      const listed = [...objects.values()].map((r) => ({
        object: label(r),
        format: formatOf(r),
        day: r.day,
      }));
      const formats = new Set(listed.map((o) => o.format));
      groups.push({
        invoiceNumber: String(first.invoice_number),
        supplier: String(first.supplier_name ?? ''),
        total: first.total_amount as number,
        matchedOn: [...counts].filter(([, n]) => n > 1).map(([k]) => k),
        objects: listed,
        acrossFormats: formats.size > 1,
      });
    }
  }
  return groups;
}

/**
 * How many rows the documents view shows corrected: a `corrections` column (a list, an object of
 * fields, or a count) or a `corrected_fields` column, when the view has one; null otherwise.
 */
function correctedRows({ rows, columns }: CloseInputs): number | null {
  const column = ['corrections', 'corrected_fields'].find((c) => columns.includes(c));
  if (!column) return null;
  const corrected = (v: unknown) =>
    Array.isArray(v)
      ? v.length > 0
      : typeof v === 'number'
        ? v > 0
        : v !== null && typeof v === 'object'
          ? Object.keys(v).length > 0
          : typeof v === 'string' && v !== '';
  return rows.filter((r) => corrected(r[column])).length;
}

function validationOf(rows: readonly MonthRow[]): Certificate['validation'] {
  const checked = rows.filter((r) => verdictCell(r) !== '');
  const invalid = checked.filter((r) => verdictCell(r) === 'invalid');
  return {
    checked: checked.length,
    valid: checked.filter((r) => verdictCell(r) === 'valid').length,
    invalid: invalid.length,
    unchecked: checked.filter((r) => verdictCell(r) === 'unchecked').length,
    invalidItems: invalid.map((r) => {
      const { failed } = r.e_invoice_validation as { failed?: unknown };
      return { object: label(r), failed: Array.isArray(failed) ? failed.map(String) : [] };
    }),
  };
}

/** Every live object of every local bucket under `root` (`<data-dir>/bucket`). */
export async function localObjects(root: string): Promise<ObjectResource[]> {
  const { LocalBucketLister } = await import('../../worker/src/reconcile/local-sources.js');
  if (!existsSync(root)) return [];
  const objects: ObjectResource[] = [];
  for (const bucket of readdirSync(root, { withFileTypes: true })) {
    if (!bucket.isDirectory()) continue;
    for await (const page of new LocalBucketLister(root, bucket.name).pages('')) objects.push(...page);
  }
  return objects;
}

/** The ledger's entries, or undefined when the pipeline never wrote one. A torn last line is skipped. */
export function readLedger(file: string): LedgerEntry[] | undefined {
  if (!existsSync(file)) return undefined;
  const entries: LedgerEntry[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      entries.push(JSON.parse(line) as LedgerEntry);
    } catch {
      // A line cut by a crash while it was written.
    }
  }
  return entries;
}

/** Where a month's certificate is written by default: `<data-dir>/close/<month>/`. */
export const certificateDir = (dataDir: string, month: Month) => path.join(dataDir, 'close', month);
