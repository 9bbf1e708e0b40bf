import { REFUSED_TOO_LARGE } from '../models/warehouse';
import type { RunRecord } from './run';

/**
 * The promise, checked at the end of every run from the simulated world's ground truth only: the
 * answers Pub/Sub got and when, the raw table with each row's identity, content and commit time,
 * what the `documents` view returned, Gemini's bill call by call, the memo bucket's and the
 * instances' histories, and each request's calls and statements against the worker's own
 * deadline. No check reads a claim or flag of the worker (an outcome, a `resume`, a `memo: hit`).
 * The fault log is not read at all: an extra raw row is excused only by a named cause that can
 * produce one, found in the ground truth and listed with it.
 */

export const INVARIANTS = {
  I1: 'ack ⇒ row: every message answered 2xx has a row for its key committed at or before that answer',
  I2: 'nothing stuck, nothing wrongly dead-lettered: every message is acked or dead-lettered, and only a poison document is dead-lettered',
  I3: 'one raw row per key: an extra row needs a named cause that can produce one, between the two rows (each listed)',
  I4: 'the view never changes its answer: the row (by identity) the documents view returned for a key is the one it returns at the end (unless the memo failed a lease call of the key; each listed)',
  I5: "paid once: per document, paid analyses on Gemini's bill ≤ 1 + the faults that lost that document's paid answer, and none for an e-invoice",
  I6: "no work past the deadline: every request answered by the worker's own deadline (brought forward at SIGTERM), no call started after Cloud Run's (the request timeout, SIGTERM + the grace), no Gemini call or BigQuery statement of it still running past the worker's",
  I7: 'the right outcome: an invoice ends `ok` with an analysis Gemini gave for it (an e-invoice with the one its XML states), a refused document `rejected` with its reason, a generation gone before its read and before any analysis of it was kept `rejected` `object_gone`, a poison one dead-lettered with no row',
  I8: 'no batch refused for its size: every MERGE BigQuery refused as a request over its 10 MB limit carried one row (a row too large on its own), never a batch that a byte budget would have split',
} as const;

export type InvariantId = keyof typeof INVARIANTS;

/** A fault that may excuse what it can cause, dated from when it began, and said in words. */
export interface DatedCause {
  atMs: number;
  what: string;
}
export const INVARIANT_IDS = Object.keys(INVARIANTS) as InvariantId[];

export interface Verdict {
  /** What broke, per invariant (empty: it held). */
  violations: Record<InvariantId, string[]>;
  /** Raw rows beyond the first of their key, each with the named causes found for it (empty: a violation). */
  extraRawRows: Array<{ key: string; messageId: string; causes: string[] }>;
  /** Changes of the view's answer that a named cause excused (the memo failed a lease call of the key). */
  viewChanges: Array<{ key: string; change: string; causes: string[] }>;
  analysesPerDocument: number;
}

/** Simulated timers fire on fractional milliseconds: an answer within this of the deadline is on time. */
const TIMER_RESOLUTION_MS = 1;

const isAck = (status: number) => [102, 200, 201, 202, 204].includes(status);

/** The reason a document of each refused kind must end with. */
const REFUSAL_REASON: Partial<Record<RunRecord['documents'][number]['kind'], string>> = {
  safetyBlocked: 'safety_blocked',
  unreadable: 'analysis_failed',
};

export function checkInvariants(record: RunRecord): Verdict {
  const violations = Object.fromEntries(
    (Object.keys(INVARIANTS) as InvariantId[]).map((id) => [id, [] as string[]]),
  ) as Record<InvariantId, string[]>;
  const keyOf = new Map<string, string>();
  const poison = new Set<string>();
  for (const d of record.documents) {
    for (const id of d.messageIds) keyOf.set(id, d.key);
    if (d.kind === 'poison') poison.add(d.key);
  }
  const rowsByKey = new Map<string, RunRecord['rawRows']>();
  for (const r of record.rawRows) rowsByKey.set(r.key, [...(rowsByKey.get(r.key) ?? []), r]);
  const rowById = new Map(record.rawRows.map((r) => [r.id, r]));

  // I1: an ack is a promise that the row is there now: a row of the key committed by then.
  for (const [id, answers] of Object.entries(record.answers)) {
    const key = keyOf.get(id);
    if (!key) continue;
    const firstCommitMs = Math.min(...(rowsByKey.get(key) ?? []).map((r) => r.committedAtMs));
    for (const a of answers.filter((x) => isAck(x.status))) {
      if (firstCommitMs <= a.atMs) continue;
      violations.I1.push(
        Number.isFinite(firstCommitMs)
          ? `message ${id} answered ${a.status} at ${a.atMs} ms, before ${key} had a row (first committed at ${firstCommitMs} ms)`
          : `message ${id} answered ${a.status} at ${a.atMs} ms, and ${key} never has a row`,
      );
    }
  }

  // I2: every message settled; only poison is dead-lettered.
  for (const [id, state] of Object.entries(record.messageStates)) {
    const key = keyOf.get(id) ?? id;
    if (state !== 'acked' && state !== 'dead') violations.I2.push(`message ${id} (${key}) is still ${state}`);
    if (state === 'dead' && !poison.has(key))
      violations.I2.push(`message ${id} (${key}) was dead-lettered, and it is not a poison document`);
  }

  // I3: one raw row per key. An extra one is excused only by a cause that can produce one: the
  // memo failed a lease call of the key (its writers could not exclude each other: a lease that
  // cannot be had never stops the work), and only one that lies between the two rows' stories:
  // begun once a request for either row's message had arrived, and before the extra row committed.
  // Each is listed.
  const requestStarts = new Map<string, number>();
  for (const r of record.requests)
    requestStarts.set(r.messageId, Math.min(requestStarts.get(r.messageId) ?? Infinity, r.startMs));
  const leaseFailuresWithin = (key: string, messageIds: string[], untilMs: number) => {
    const fromMs = Math.min(...messageIds.map((id) => requestStarts.get(id) ?? Infinity));
    return (record.leaseFailures[key] ?? [])
      .filter((f) => f.atMs >= fromMs && f.atMs <= untilMs)
      .map((f) => `the memo failed a lease call: ${f.what}`);
  };
  const extraRawRows: Verdict['extraRawRows'] = [];
  for (const [key, rows] of rowsByKey) {
    const first = rows.reduce((a, b) => (b.committedAtMs < a.committedAtMs ? b : a));
    for (const extra of rows.filter((r) => r !== first)) {
      const causes = leaseFailuresWithin(key, [first.messageId, extra.messageId], extra.committedAtMs);
      extraRawRows.push({ key, messageId: extra.messageId, causes });
      if (causes.length === 0)
        violations.I3.push(
          `${key} has ${rows.length} raw rows (rows ${rows.map((r) => r.id).join(', ')}), and nothing that can produce an extra one happened between them`,
        );
    }
  }

  // I4: whatever row the view returned for a key is the row it returns at the end. A change is
  // excused only when the memo failed a lease call of the key while its rows were being made (its
  // writers could not exclude each other; listed).
  const viewChanges: Verdict['viewChanges'] = [];
  for (const [key, seen] of Object.entries(record.viewReads)) {
    const final = record.viewAtEnd[key];
    const changed = seen.filter((id) => id !== final);
    if (changed.length > 0) {
      const show = (id: number | undefined) => {
        const r = id === undefined ? undefined : rowById.get(id);
        return r
          ? `row ${r.id} (message ${r.messageId}, ${r.status} ${r.invoiceNumber ?? r.reason ?? ''})`
          : 'none';
      };
      const change = `the view returned ${changed.map(show).join(', ')} for ${key}, and returns ${show(final)} at the end`;
      const rows = rowsByKey.get(key) ?? [];
      const causes = leaseFailuresWithin(
        key,
        rows.map((r) => r.messageId),
        Math.max(...rows.map((r) => r.committedAtMs)),
      );
      if (causes.length > 0) viewChanges.push({ key, change, causes });
      else violations.I4.push(change);
    }
  }

  // I5: per document, from Gemini's bill: one paid analysis, plus one per fault that lost its paid answer.
  const firstCommitMs = new Map<string, number>();
  for (const r of record.rawRows)
    firstCommitMs.set(r.key, Math.min(firstCommitMs.get(r.key) ?? Infinity, r.committedAtMs));
  const requestById = new Map(record.requests.map((r) => [r.id, r]));
  let paid = 0;
  for (const d of record.documents) {
    const n = record.paidAnalysesByDocument[d.name] ?? 0;
    paid += n;
    // An e-invoice states its data: reading it is free, and nothing of it is ever paid for.
    const billed = record.paidCallsByDocument[d.name] ?? 0;
    if (d.statedNumber !== undefined && billed > 0)
      violations.I5.push(
        `${d.name} is an e-invoice (${d.format}), and Gemini was paid ${billed} call(s) for it`,
      );
    const losses = record.answerLosses[d.name] ?? [];
    const said = (list: DatedCause[]) => (list.length > 0 ? ` (${list.map((l) => l.what).join('; ')})` : '');
    if (n > 1 + losses.length)
      violations.I5.push(
        `${d.name} paid ${n} analyses, with ${losses.length} lost answer${losses.length === 1 ? '' : 's'}${said(losses)}`,
      );
    else {
      // Each paid analysis beyond the first needs a loss of its own begun before it: the k-th
      // extra one is begun after at least k of them.
      const newPaid = record.geminiCalls
        .filter((c) => c.document === d.name && c.paid && c.newAnalysis)
        .sort((a, b) => a.startMs - b.startMs);
      newPaid.slice(1).forEach((c, k) => {
        const before = losses.filter((l) => l.atMs <= c.startMs);
        if (before.length < k + 1)
          violations.I5.push(
            `${d.name}: Gemini call ${c.index} (paid analysis ${k + 2} of ${n}, begun at ${c.startMs} ms) follows only ${before.length} lost answer${before.length === 1 ? '' : 's'}${said(before)}`,
          );
      });
    }
    // A lost answer excuses paying again only while the document has no row: a delivery that
    // arrives once its row is committed, while the memo shows the key was worked on, must find the
    // row (the store's lookup) and pay nothing, whatever the memo lost.
    const writtenAtMs = firstCommitMs.get(d.key);
    const workedOnMs = record.memoWorkedOnSinceMs?.[d.key];
    if (writtenAtMs === undefined || workedOnMs === undefined) continue;
    for (const c of record.geminiCalls) {
      if (c.document !== d.name || !c.paid || !c.newAnalysis) continue;
      const r = c.request === undefined ? undefined : requestById.get(c.request);
      if (r && r.startMs > writtenAtMs && r.startMs > workedOnMs)
        violations.I5.push(
          `${d.name}: request ${r.id} arrived at ${r.startMs} ms, after its row was committed (${writtenAtMs} ms), and paid Gemini call ${c.index}`,
        );
    }
  }
  const analysesPerDocument = paid / Math.max(1, record.documents.length);

  // I6: the worker's own deadline (its budget from the request's arrival, brought forward at
  // SIGTERM); work started before SIGTERM keeps the bound it started under.
  const openOn = new Map<string, RunRecord['requests']>();
  for (const r of record.requests) {
    const key = keyOf.get(r.messageId) ?? r.messageId;
    openOn.set(key, [...(openOn.get(key) ?? []), r]);
  }
  const ownDeadline = (r: RunRecord['requests'][number]) =>
    r.startMs + record.budget.deliveryMs + TIMER_RESOLUTION_MS;
  // A request that reaches its instance only after the drain's deadline (it waited in Cloud Run,
  // pending, while the instance was told to stop) can only be answered at once, with no work: its
  // deadline is its arrival.
  const deadlineOf = (r: RunRecord['requests'][number]) =>
    Math.max(
      r.startMs,
      Math.min(
        ownDeadline(r),
        r.sigtermAtMs === undefined ? Infinity : r.sigtermAtMs + record.budget.drainMs,
      ),
    ) + TIMER_RESOLUTION_MS;
  const boundAt = (r: RunRecord['requests'][number], atMs: number) =>
    r.sigtermAtMs !== undefined && atMs >= r.sigtermAtMs ? deadlineOf(r) : ownDeadline(r);
  for (const r of record.requests) {
    const deadline = deadlineOf(r);
    const cutAt = r.killedAtMs ?? Number.POSITIVE_INFINITY;
    const at = (ms: number) => `+${ms - r.startMs} ms`;
    // Calls are held to Cloud Run's deadline (the worker's plus the answer margin: the request
    // timeout, or SIGTERM + the grace): before it the message is not Pub/Sub's again, and a paid
    // answer that comes in the margin may still be kept in the memo.
    const cloudRun = deadline + (record.budget.answerMarginMs ?? 0);
    const late = r.calls.filter((c) => c.startMs > cloudRun && c.startMs < cutAt);
    if (late.length > 0)
      violations.I6.push(
        `request ${r.id} (message ${r.messageId}) started ${late.map((c) => `${c.port} at ${at(c.startMs)}`).join(', ')} after Cloud Run's deadline (${at(cloudRun)})`,
      );
    if (r.endMs === undefined && r.killedAtMs === undefined)
      violations.I6.push(`request ${r.id} (message ${r.messageId}) never answered`);
    else if (r.endMs !== undefined && r.endMs > deadline)
      violations.I6.push(
        `request ${r.id} (message ${r.messageId}) answered at ${at(r.endMs)}, after its deadline (${at(deadline)})`,
      );
    for (const c of record.geminiCalls.filter((x) => x.request === r.id)) {
      const bound = boundAt(r, c.startMs);
      if ((c.endMs ?? Number.POSITIVE_INFINITY) > bound && cutAt > bound)
        violations.I6.push(
          `request ${r.id} (message ${r.messageId}): Gemini call ${c.index} ${c.endMs === undefined ? 'still runs' : `ran to ${at(c.endMs)}`}, past its deadline (${at(bound)})`,
        );
    }
  }
  for (const s of record.statements) {
    for (const key of new Set(s.keys)) {
      const open = (openOn.get(key) ?? []).filter(
        (r) =>
          r.instance === s.instance &&
          r.startMs <= s.startedAtMs &&
          s.startedAtMs <= (r.endMs ?? r.killedAtMs ?? Number.POSITIVE_INFINITY),
      );
      if (open.length === 0) continue;
      const bound = Math.max(...open.map((r) => boundAt(r, s.startedAtMs)));
      // One still running when the record ends is past its bound only if the run went past it.
      const ended = s.endedAtMs ?? Number.POSITIVE_INFINITY;
      if (ended > bound && (s.endedAtMs !== undefined || record.simulatedMs > bound))
        violations.I6.push(
          `statement ${s.index} (${s.kind} of ${key}) ${s.endedAtMs === undefined ? 'still runs' : `ended at ${s.endedAtMs} ms`}, past the deadline of its deliveries (${bound} ms)`,
        );
    }
  }

  // I7: each document's end state, by what it is.
  for (const d of record.documents) {
    const id = record.viewAtEnd[d.key];
    const row = id === undefined ? undefined : rowById.get(id);
    if (d.kind === 'poison') {
      if (row)
        violations.I7.push(`${d.name} (poison) has a row (${row.status}); BigQuery refuses every row of it`);
      continue;
    }
    if (!row) {
      violations.I7.push(`${d.name} (${d.kind}) ends with no row`);
      continue;
    }
    // A generation deleted or overwritten may be gone before it is read: then `rejected`
    // `object_gone`, written after it went (a row that says so before is a wrong answer).
    if (row.status === 'rejected' && row.reason === 'object_gone') {
      if (d.goneAtMs === undefined || row.committedAtMs < d.goneAtMs)
        violations.I7.push(
          `${d.name} ends rejected object_gone (committed at ${row.committedAtMs} ms), and its generation ${d.goneAtMs === undefined ? 'never went' : `went only at ${d.goneAtMs} ms`}`,
        );
      // An analysis paid for and kept is the document's answer, whether or not its generation can
      // still be read: only a failure of the memo's calls for the key (from the keep on) or of a
      // lease call (two holders) can hide it from the delivery that wrote this row.
      const keptAtMs = record.keptAtMs?.[d.key];
      if (keptAtMs !== undefined && keptAtMs < row.committedAtMs) {
        const hidden = [
          ...(record.answerLosses[d.name] ?? []).filter((l) => l.atMs >= keptAtMs),
          ...(record.leaseFailures[d.key] ?? []),
        ].filter((l) => l.atMs <= row.committedAtMs);
        if (hidden.length === 0)
          violations.I7.push(
            `${d.name} ends rejected object_gone (committed at ${row.committedAtMs} ms), though its analysis was kept at ${keptAtMs} ms and no memo call of it failed since`,
          );
      }
      continue;
    }
    const reason = REFUSAL_REASON[d.kind];
    if (reason) {
      if (row.status !== 'rejected' || row.reason !== reason)
        violations.I7.push(
          `${d.name} (${d.kind}) ends ${row.status} ${row.reason ?? ''}, not rejected ${reason}`,
        );
      continue;
    }
    const answered = d.statedNumber !== undefined ? [d.statedNumber] : (record.geminiAnswers[d.name] ?? []);
    if (row.status !== 'ok')
      violations.I7.push(`${d.name} (an invoice) ends ${row.status} ${row.reason ?? ''}, not ok`);
    else if (row.invoiceNumber === null || !answered.includes(row.invoiceNumber))
      violations.I7.push(
        d.statedNumber !== undefined
          ? `${d.name} ends ok with analysis ${row.invoiceNumber ?? 'none'}, not the one its XML states (${d.statedNumber})`
          : `${d.name} ends ok with analysis ${row.invoiceNumber ?? 'none'}, which Gemini never gave for it (it gave ${answered.join(', ') || 'none'})`,
      );
  }

  // I8: a refused request costs a statement and its deliveries' time: group commit closes a batch
  // before its MERGE would pass the limit, so only a row over the limit on its own may be refused.
  for (const st of record.statements) {
    if (st.outcome === REFUSED_TOO_LARGE && st.keys.length > 1)
      violations.I8.push(
        `statement ${st.index} (instance ${st.instance}, at ${st.startedAtMs} ms): a MERGE of ${st.keys.length} rows refused as a request over 10 MB`,
      );
  }

  return { violations, extraRawRows, viewChanges, analysesPerDocument };
}
