import { checkInvariants, INVARIANT_IDS } from '../faults/invariants';
import type { RunRecord } from '../faults/run';
import { REFUSED_TOO_LARGE } from '../models/warehouse';

const KEY = 'gs://b/a.txt#1';

/** A run of one invoice and one message that kept every promise; each test breaks one thing. */
function kept(): RunRecord {
  return {
    seed: 1,
    documents: [{ name: 'a.txt', key: KEY, kind: 'invoice', messageIds: ['1'] }],
    answers: { '1': [{ status: 200, atMs: 8_000 }] },
    messageStates: { '1': 'acked' },
    rawRows: [
      {
        id: 0,
        key: KEY,
        messageId: '1',
        status: 'ok',
        reason: null,
        invoiceNumber: 'SIM-0',
        processedAt: '2026-11-30T08:00:07.000Z',
        committedAtMs: 7_900,
        statement: 1,
      },
    ],
    viewReads: { [KEY]: [0] },
    viewAtEnd: { [KEY]: 0 },
    geminiAnswers: { 'a.txt': ['SIM-0'] },
    paidAnalysesByDocument: { 'a.txt': 1 },
    paidCallsByDocument: { 'a.txt': 1 },
    answerLosses: { 'a.txt': [] },
    memoWorkedOnSinceMs: {},
    keptAtMs: {},
    geminiCalls: [
      {
        index: 0,
        document: 'a.txt',
        request: 0,
        instance: 0,
        startMs: 100,
        endMs: 6_100,
        paid: true,
        newAnalysis: true,
        outcome: 'answered',
        invoiceNumber: 'SIM-0',
      },
    ],
    requests: [
      {
        id: 0,
        instance: 0,
        messageId: '1',
        delivery: 0,
        startMs: 0,
        deadlineMs: 500_000,
        endMs: 8_000,
        status: 200,
        answer: 200,
        calls: [{ port: 'analyze', startMs: 100, endMs: 6_100 }],
      },
    ],
    statements: [
      { index: 0, kind: 'lookup', instance: 0, keys: [KEY], startedAtMs: 50, endedAtMs: 90, outcome: 'ok' },
      {
        index: 1,
        kind: 'merge',
        instance: 0,
        keys: [KEY],
        startedAtMs: 6_200,
        endedAtMs: 7_900,
        outcome: 'inserted 1',
      },
    ],
    leaseFailures: {},
    budget: { deliveryMs: 498_000, drainMs: 8_000 },
    end: 'drained (then quiet)',
    simulatedMs: 9_000,
  };
}

const broken = (record: RunRecord) =>
  Object.entries(checkInvariants(record).violations)
    .filter(([, list]) => list.length > 0)
    .map(([id]) => id);

/** A second raw row of the key (another message's), committed later. */
const secondRow = (r: RunRecord) => ({
  ...r.rawRows[0]!,
  id: 1,
  messageId: '2',
  invoiceNumber: 'SIM-1',
  committedAtMs: 9_000,
  statement: 2,
});

describe('the invariants', () => {
  it('all hold for a run that kept the promise', () => {
    expect(broken(kept())).toEqual([]);
  });

  it('are eight, each shown to fail on its own below', () => {
    expect(INVARIANT_IDS).toEqual(['I1', 'I2', 'I3', 'I4', 'I5', 'I6', 'I7', 'I8']);
  });

  it('I1: an ack given before its row committed breaks it, even when the row comes later', () => {
    const r = kept();
    r.answers = { '1': [{ status: 200, atMs: 7_000 }] };
    expect(broken(r)).toEqual(['I1']);
    // A later redelivery acked after the commit does not rescue the early ack.
    r.answers['1']!.push({ status: 204, atMs: 20_000 });
    expect(broken(r)).toEqual(['I1']);
  });

  it('I1: an ack for a poison key that never gets a row breaks it', () => {
    const r = kept();
    r.documents[0]!.kind = 'poison';
    r.rawRows = [];
    r.viewReads = {};
    r.viewAtEnd = {};
    r.messageStates = { '1': 'dead' };
    r.answers = {
      '1': [
        { status: 500, atMs: 5_000 },
        { status: 204, atMs: 9_000 },
      ],
    };
    expect(broken(r)).toEqual(['I1']);
  });

  it('I2: a message neither acked nor dead-lettered, or a good document dead-lettered, breaks it', () => {
    const stuck = kept();
    stuck.messageStates = { '1': 'backoff' };
    expect(broken(stuck)).toEqual(['I2']);
    const dead = kept();
    dead.messageStates = { '1': 'dead' };
    expect(broken(dead)).toEqual(['I2']);
    const poison = kept();
    poison.documents[0]!.kind = 'poison';
    poison.answers = { '1': [{ status: 500, atMs: 8_000 }] };
    poison.messageStates = { '1': 'dead' };
    poison.rawRows = [];
    poison.viewReads = {};
    poison.viewAtEnd = {};
    expect(broken(poison)).toEqual([]);
  });

  it('I3: a second raw row breaks it with no excuse but a named cause (a doubled notification is none)', () => {
    const r = kept();
    r.rawRows.push(secondRow(r));
    expect(broken(r)).toEqual(['I3']);
    expect(checkInvariants(r).extraRawRows).toEqual([{ key: KEY, messageId: '2', causes: [] }]);
  });

  it('I3: a failed lease call of the key is named and listed with the row', () => {
    const r = kept();
    r.rawRows.push(secondRow(r));
    r.leaseFailures = { [KEY]: [{ atMs: 300, what: 'memo.error on lease at 300 ms' }] };
    const verdict = checkInvariants(r);
    expect(verdict.violations.I3).toEqual([]);
    expect(verdict.extraRawRows).toEqual([
      { key: KEY, messageId: '2', causes: ['the memo failed a lease call: memo.error on lease at 300 ms'] },
    ]);
  });

  it('I3 and I4: a failed lease call excuses only when it lies between the two rows (before both messages arrived, or after the extra row committed, it excuses nothing)', () => {
    const at = (atMs: number) => {
      const r = kept();
      r.requests[0]!.startMs = 1_000;
      r.rawRows.push({ ...secondRow(r), messageId: '1' });
      r.viewReads = { [KEY]: [1, 0] };
      r.leaseFailures = { [KEY]: [{ atMs, what: `memo lease failed at ${atMs} ms` }] };
      return r;
    };
    expect(broken(at(1_500))).toEqual([]);
    expect(checkInvariants(at(1_500)).extraRawRows[0]!.causes).toHaveLength(1);
    // Before any request of either row's message, or after the extra row (committed at 9 s).
    expect(broken(at(500))).toEqual(['I3', 'I4']);
    expect(broken(at(9_500))).toEqual(['I3', 'I4']);
  });

  it('I5: each extra paid analysis needs a loss begun before it (a loss that comes after the payment excuses nothing)', () => {
    const paidTwice = (lossAtMs: number) => {
      const r = kept();
      r.requests.push({ ...r.requests[0]!, id: 1, delivery: 1, startMs: 2_000, endMs: 7_000, calls: [] });
      r.geminiCalls.push({ ...r.geminiCalls[0]!, index: 1, request: 1, startMs: 2_100, endMs: 6_900 });
      r.paidAnalysesByDocument['a.txt'] = 2;
      r.paidCallsByDocument['a.txt'] = 2;
      r.answerLosses['a.txt'] = [{ atMs: lossAtMs, what: `memo lease failed at ${lossAtMs} ms` }];
      return r;
    };
    expect(broken(paidTwice(1_000))).toEqual([]);
    expect(broken(paidTwice(3_000))).toEqual(['I5']);
    expect(checkInvariants(paidTwice(3_000)).violations.I5[0]).toMatch(
      /Gemini call 1 .*follows only 0 lost answers/,
    );
  });

  it('I4: the view switching between two rows of the same message breaks it (rows by identity)', () => {
    const r = kept();
    r.rawRows.push({ ...secondRow(r), messageId: '1' });
    r.viewReads = { [KEY]: [1, 0] };
    // The second raw row itself has no cause either (I3).
    expect(broken(r)).toEqual(['I3', 'I4']);
  });

  it('I4: a switch under a failed lease call of the key is excused, and listed with its cause', () => {
    const r = kept();
    r.rawRows.push({ ...secondRow(r), messageId: '1' });
    r.viewReads = { [KEY]: [1, 0] };
    r.leaseFailures = { [KEY]: [{ atMs: 300, what: 'memo lease failed at 300 ms' }] };
    const verdict = checkInvariants(r);
    expect(verdict.violations.I4).toEqual([]);
    expect(verdict.viewChanges).toEqual([
      expect.objectContaining({
        key: KEY,
        causes: ['the memo failed a lease call: memo lease failed at 300 ms'],
      }),
    ]);
  });

  it('I5: a delivery arriving after the row, while the memo shows the key was worked on, pays nothing, whatever the memo lost', () => {
    /** A redelivery at 20 s (the row was committed at 7.9 s) that paid again; the memo lost the keep. */
    const paidAfterRow = (workedOnSinceMs?: number) => {
      const r = kept();
      r.requests.push({ ...r.requests[0]!, id: 1, delivery: 1, startMs: 20_000, endMs: 28_000, calls: [] });
      r.geminiCalls.push({ ...r.geminiCalls[0]!, index: 1, request: 1, startMs: 20_100, endMs: 26_100 });
      r.paidAnalysesByDocument['a.txt'] = 2;
      r.paidCallsByDocument['a.txt'] = 2;
      r.answerLosses['a.txt'] = [
        { atMs: 6_100, what: 'memo create failed at 6100 ms: the analysis was not kept' },
      ];
      if (workedOnSinceMs !== undefined) r.memoWorkedOnSinceMs[KEY] = workedOnSinceMs;
      return r;
    };
    // The key's lease was in the bucket from 0 s: the store's lookup had to be asked.
    expect(broken(paidAfterRow(0))).toEqual(['I5']);
    // The memo held neither its analysis nor a lease: skipping the lookup then is by design.
    expect(broken(paidAfterRow())).toEqual([]);
  });

  it('I5: a document paid twice with no lost answer breaks it; a lost answer of that document allows one more', () => {
    const r = kept();
    r.paidAnalysesByDocument = { 'a.txt': 2 };
    expect(broken(r)).toEqual(['I5']);
    r.answerLosses = {
      'a.txt': [{ atMs: 100, what: 'Gemini call 0 was paid and its answer reached no live process' }],
    };
    expect(broken(r)).toEqual([]);
    r.paidAnalysesByDocument = { 'a.txt': 3 };
    expect(broken(r)).toEqual(['I5']);
  });

  it("I5 is per document: another document's lost answer is no allowance", () => {
    const r = kept();
    r.documents.push({ name: 'b.txt', key: 'gs://b/b.txt#1', kind: 'invoice', messageIds: ['2'] });
    r.answers['2'] = [{ status: 200, atMs: 8_000 }];
    r.messageStates['2'] = 'acked';
    r.rawRows.push({
      ...r.rawRows[0]!,
      id: 1,
      key: 'gs://b/b.txt#1',
      messageId: '2',
      invoiceNumber: 'SIM-1',
    });
    r.viewAtEnd['gs://b/b.txt#1'] = 1;
    r.geminiAnswers['b.txt'] = ['SIM-1'];
    r.paidAnalysesByDocument = { 'a.txt': 2, 'b.txt': 0 };
    r.answerLosses = {
      'a.txt': [],
      'b.txt': [{ atMs: 6_100, what: 'memo.error on create: the analysis was not kept' }],
    };
    expect(broken(r)).toEqual(['I5']);
  });

  it("I6: an answer past the worker's own deadline (not Cloud Run's) breaks it", () => {
    const late = kept();
    late.requests[0]!.endMs = 499_000;
    expect(broken(late)).toEqual(['I6']);
    const drained = kept();
    drained.requests[0]!.sigtermAtMs = 1_000;
    drained.requests[0]!.endMs = 9_500;
    expect(broken(drained)).toEqual(['I6']);
  });

  it('I6: a request reaching its instance after the drain deadline must be answered at once, with no work (soak I6, seed 466)', () => {
    const arrivedLate = (change: (r: RunRecord['requests'][number]) => void = () => {}) => {
      const r = kept();
      const late = { ...r.requests[0]!, id: 1, delivery: 1, startMs: 30_000, sigtermAtMs: 10_000, calls: [] };
      Object.assign(late, { endMs: 30_000, status: 503, answer: 503 });
      change(late);
      r.requests.push(late);
      return r;
    };
    expect(broken(arrivedLate())).toEqual([]);
    expect(broken(arrivedLate((x) => Object.assign(x, { endMs: 31_000 })))).toEqual(['I6']);
    expect(
      broken(arrivedLate((x) => x.calls.push({ port: 'memo', startMs: 30_500, endMs: 30_600 }))),
    ).toEqual(['I6']);
  });

  it("I6: a call started in the answer margin (after the worker's deadline, before Cloud Run's) is allowed, one after Cloud Run's breaks it (a late paid answer may still be kept in the memo)", () => {
    const inMargin = kept();
    inMargin.budget = { ...inMargin.budget, answerMarginMs: 2_000 };
    inMargin.requests[0]!.calls.push({ port: 'memo', startMs: 499_000 });
    expect(broken(inMargin)).toEqual([]);
    const after = kept();
    after.budget = { ...after.budget, answerMarginMs: 2_000 };
    after.requests[0]!.calls.push({ port: 'memo', startMs: 500_500 });
    expect(broken(after)).toEqual(['I6']);
  });

  it('I6: a call started after the deadline, a handler that never answers, breaks it; a killed one does not', () => {
    const call = kept();
    call.requests[0]!.calls.push({ port: 'store', startMs: 498_500 });
    expect(broken(call)).toEqual(['I6']);
    const running = kept();
    delete running.requests[0]!.endMs;
    expect(broken(running)).toEqual(['I6']);
    const killed = kept();
    delete killed.requests[0]!.endMs;
    killed.requests[0]!.killedAtMs = 3_000;
    expect(broken(killed)).toEqual([]);
  });

  it('I6: a Gemini call or a BigQuery statement of the request still running past its deadline breaks it', () => {
    const gemini = kept();
    gemini.geminiCalls[0]!.endMs = 600_000;
    expect(broken(gemini)).toEqual(['I6']);
    const statement = kept();
    statement.requests[0]!.endMs = 400_000;
    statement.statements[1]!.endedAtMs = 520_000;
    statement.rawRows[0]!.committedAtMs = 520_000;
    statement.answers = {
      '1': [
        { status: 503, atMs: 400_000 },
        { status: 204, atMs: 600_000 },
      ],
    };
    expect(broken(statement)).toEqual(['I6']);
  });

  it('I6: a statement still running when the record ends breaks it only if the run went past its deadline (a run cut by its bound, soak of the key-day-from-clock world, seed 19)', () => {
    const open = kept();
    open.statements.push({ index: 2, kind: 'lookup', instance: 0, keys: [KEY], startedAtMs: 7_950 });
    expect(broken(open)).toEqual([]);
    open.simulatedMs = 600_000;
    expect(broken(open)).toEqual(['I6']);
  });

  it('I7: rejected object_gone is right only when written after its generation went', () => {
    const gone = (goneAtMs?: number) => {
      const r = kept();
      Object.assign(r.rawRows[0]!, { status: 'rejected', reason: 'object_gone', invoiceNumber: null });
      if (goneAtMs !== undefined) r.documents[0]!.goneAtMs = goneAtMs;
      return r;
    };
    expect(broken(gone(5_000))).toEqual([]);
    // The row (committed at 7.9 s) said gone before the generation went, or it never went.
    expect(broken(gone(8_500))).toEqual(['I7']);
    expect(broken(gone())).toEqual(['I7']);
  });

  it('I7: rejected object_gone is wrong once an analysis of it was kept, unless a memo call of the key failed since', () => {
    const keptThenGone = (keptAtMs: number, failure?: { atMs: number; lease?: boolean }) => {
      const r = kept();
      Object.assign(r.rawRows[0]!, { status: 'rejected', reason: 'object_gone', invoiceNumber: null });
      r.documents[0]!.goneAtMs = 5_000;
      r.keptAtMs = { [KEY]: keptAtMs };
      const cause = { atMs: failure?.atMs ?? 0, what: 'memo get failed' };
      if (failure && !failure.lease) r.answerLosses['a.txt'] = [cause];
      if (failure?.lease) r.leaseFailures[KEY] = [cause];
      return r;
    };
    // Kept at 6.5 s, the row (7.9 s) threw the paid analysis away.
    expect(broken(keptThenGone(6_500))).toEqual(['I7']);
    // Kept only after the row was written: the delivery could not have found it.
    expect(broken(keptThenGone(8_000))).toEqual([]);
    // A memo call that failed after the keep, or a lease call that failed, hid it.
    expect(broken(keptThenGone(6_500, { atMs: 7_000 }))).toEqual([]);
    expect(broken(keptThenGone(6_500, { atMs: 1_000, lease: true }))).toEqual([]);
    // A failure before the keep hid nothing.
    expect(broken(keptThenGone(6_500, { atMs: 6_000 }))).toEqual(['I7']);
  });

  it('I5 and I7: an e-invoice is never paid for, and ends ok with the number its XML states', () => {
    const eInvoice = (rowNumber: string, paidCalls: number) => {
      const r = kept();
      Object.assign(r.documents[0]!, { format: 'cii', statedNumber: '471102' });
      r.rawRows[0]!.invoiceNumber = rowNumber;
      r.paidCallsByDocument['a.txt'] = paidCalls;
      r.paidAnalysesByDocument['a.txt'] = paidCalls;
      if (paidCalls === 0) r.geminiCalls = [];
      return r;
    };
    expect(broken(eInvoice('471102', 0))).toEqual([]);
    expect(broken(eInvoice('SIM-0', 0))).toEqual(['I7']);
    expect(broken(eInvoice('471102', 1))).toEqual(['I5']);
  });

  it('I8: a MERGE of several rows refused for its size breaks it; a single row too large on its own does not', () => {
    const refused = (keys: string[]) => {
      const r = kept();
      r.statements.splice(1, 0, {
        index: 1,
        kind: 'merge',
        instance: 0,
        keys,
        startedAtMs: 6_150,
        endedAtMs: 6_150,
        outcome: REFUSED_TOO_LARGE,
      });
      return r;
    };
    expect(broken(refused([KEY, 'sim/other.pdf#2']))).toEqual(['I8']);
    expect(broken(refused([KEY]))).toEqual([]);
  });

  it('I7: a rejected row for a good invoice breaks it', () => {
    const r = kept();
    r.rawRows[0] = { ...r.rawRows[0]!, status: 'rejected', reason: 'analysis_failed', invoiceNumber: null };
    expect(broken(r)).toEqual(['I7']);
  });

  it('I7: an ok row carrying an analysis Gemini never gave for that document breaks it', () => {
    const r = kept();
    r.rawRows[0]!.invoiceNumber = 'SIM-9';
    expect(broken(r)).toEqual(['I7']);
  });

  it('I7: a refused document must end rejected with its reason, and a poison one with no row', () => {
    const blocked = kept();
    blocked.documents[0]!.kind = 'safetyBlocked';
    expect(broken(blocked)).toEqual(['I7']);
    blocked.rawRows[0] = {
      ...blocked.rawRows[0]!,
      status: 'rejected',
      reason: 'safety_blocked',
      invoiceNumber: null,
    };
    expect(broken(blocked)).toEqual([]);
    blocked.documents[0]!.kind = 'unreadable';
    expect(broken(blocked)).toEqual(['I7']);
    const poison = kept();
    poison.documents[0]!.kind = 'poison';
    expect(broken(poison)).toEqual(['I7']);
  });
});
