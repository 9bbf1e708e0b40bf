import type { RunRecord } from './run';
import type { FaultLog } from './schedule';

/**
 * The promise, checked at the end of every run from the observable record only: the answers
 * Pub/Sub got, the raw table, what the `documents` view returned, Gemini's bill, and each request's
 * handler activity against its deadline. The checks know nothing of the faults; the fault log is
 * read only to list the cause of an extra raw row (I3), never to excuse anything else.
 */

export const INVARIANTS = {
  I1: 'ack ⇒ row: every message answered 2xx has a row for its key',
  I2: 'nothing stuck, nothing wrongly dead-lettered: every message is acked or dead-lettered, and only a poison document is dead-lettered',
  I3: 'one raw row per key: any extra row is traced to a cause the run injected (goal: none)',
  I4: 'the view never changes its answer: a row the documents view returned is the one it returns at the end',
  I5: 'paid once: paid analyses per document ≤ 1 + the share of documents whose analysis was refused by a fault',
  I6: 'no work past the deadline: no handler is still running after its request’s deadline',
} as const;

export type InvariantId = keyof typeof INVARIANTS;
export const INVARIANT_IDS = Object.keys(INVARIANTS) as InvariantId[];

export interface Verdict {
  /** What broke, per invariant (empty: it held). */
  violations: Record<InvariantId, string[]>;
  /** Raw rows beyond the first of their key, each with the injected causes that touched that key. */
  extraRawRows: Array<{ key: string; messageId: string; causes: string[] }>;
  analysesPerDocument: number;
}

const isAck = (status: number) => [102, 200, 201, 202, 204].includes(status);

export function checkInvariants(record: RunRecord, faults: Pick<FaultLog, 'entries'>): Verdict {
  const violations: Record<InvariantId, string[]> = { I1: [], I2: [], I3: [], I4: [], I5: [], I6: [] };
  const keyOf = new Map<string, string>();
  const poison = new Set<string>();
  for (const d of record.documents) {
    for (const id of d.messageIds) keyOf.set(id, d.key);
    if (d.kind === 'poison') poison.add(d.key);
  }
  const rowsByKey = new Map<string, RunRecord['rawRows']>();
  for (const r of record.rawRows) rowsByKey.set(r.key, [...(rowsByKey.get(r.key) ?? []), r]);

  // I1: an ack with no row is a lost document.
  for (const [id, statuses] of Object.entries(record.answers)) {
    const key = keyOf.get(id);
    if (statuses.some(isAck) && key && !rowsByKey.has(key))
      violations.I1.push(`message ${id} answered ${statuses.filter(isAck)[0]} but ${key} has no row`);
  }

  // I2: every message settled; only poison is dead-lettered.
  for (const [id, state] of Object.entries(record.messageStates)) {
    const key = keyOf.get(id) ?? id;
    if (state !== 'acked' && state !== 'dead') violations.I2.push(`message ${id} (${key}) is still ${state}`);
    if (state === 'dead' && !poison.has(key))
      violations.I2.push(`message ${id} (${key}) was dead-lettered, and it is not a poison document`);
  }

  // I3: one raw row per key. An extra one is listed with the injected faults that touched its key
  // (two notifications of one upload whose MERGEs overlap both insert, as BigQuery allows); one
  // that no injected fault explains is a violation.
  const extraRawRows: Verdict['extraRawRows'] = [];
  for (const [key, rows] of rowsByKey) {
    for (const extra of rows.slice(1)) {
      const causes = faults.entries
        .filter((e) => e.keys.includes(key))
        .map((e) => `${e.kind} at ${e.atMs} ms: ${e.detail}`);
      extraRawRows.push({ key, messageId: extra.messageId, causes });
      if (causes.length === 0)
        violations.I3.push(`${key} has ${rows.length} raw rows and no injected fault explains the extra one`);
    }
  }

  // I4: whatever the view returned for a key is what it returns at the end.
  for (const [key, seen] of Object.entries(record.viewReads)) {
    const final = record.viewAtEnd[key];
    const changed = seen.filter((m) => m !== final);
    if (changed.length > 0)
      violations.I4.push(
        `the view returned ${changed.join(', ')} for ${key}, and returns ${final} at the end`,
      );
  }

  // I5: paid analyses per document ≤ 1 + the share of documents whose analysis a fault refused
  // (counted per refused analysis: a document whose answer a fault took away twice may pay thrice).
  const documents = Math.max(1, record.documents.length);
  const paid = Object.values(record.paidAnalysesByDocument).reduce((a, b) => a + b, 0);
  const analysesPerDocument = paid / documents;
  const allowed = 1 + record.refusedAnalyses.length / documents;
  if (analysesPerDocument > allowed + 1e-9) {
    const refusals = (name: string) => record.refusedAnalyses.filter((n) => n === name).length;
    const over = Object.entries(record.paidAnalysesByDocument)
      .filter(([name, n]) => n > 1 + refusals(name))
      .map(([name, n]) => `${name} paid ${n}× (${refusals(name)} refused by a fault)`);
    violations.I5.push(
      `${paid} paid analyses for ${record.documents.length} documents (${analysesPerDocument.toFixed(2)} per document, allowed ${allowed.toFixed(2)}): ${over.join(', ')}`,
    );
  }

  // I6: every handler answered by its request's deadline, and started nothing after it.
  for (const r of record.requests) {
    const cutAt = r.killedAtMs ?? Number.POSITIVE_INFINITY;
    const late = r.calls.filter((c) => c.startMs > r.deadlineMs && c.startMs < cutAt);
    if (late.length > 0)
      violations.I6.push(
        `request ${r.id} (message ${r.messageId}) started ${late.map((c) => `${c.port} at +${c.startMs - r.startMs} ms`).join(', ')} after its deadline (+${r.deadlineMs - r.startMs} ms)`,
      );
    if (r.endMs === undefined && r.killedAtMs === undefined)
      violations.I6.push(
        `request ${r.id} (message ${r.messageId}) never answered: its handler is still running past its deadline`,
      );
    else if (r.endMs !== undefined && r.endMs > r.deadlineMs)
      violations.I6.push(
        `request ${r.id} (message ${r.messageId}) answered at +${r.endMs - r.startMs} ms, after its deadline (+${r.deadlineMs - r.startMs} ms)`,
      );
  }

  return { violations, extraRawRows, analysesPerDocument };
}
