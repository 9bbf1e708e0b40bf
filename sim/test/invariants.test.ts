import { checkInvariants } from '../faults/invariants';
import type { RunRecord } from '../faults/run';

/** A run of one document and one message that kept every promise; each test breaks one. */
function kept(): RunRecord {
  return {
    seed: 1,
    documents: [{ name: 'a.txt', key: 'gs://b/a.txt#1', kind: 'invoice', messageIds: ['1'] }],
    answers: { '1': [200] },
    messageStates: { '1': 'acked' },
    rawRows: [
      {
        key: 'gs://b/a.txt#1',
        messageId: '1',
        status: 'ok',
        processedAt: '2026-11-30T08:00:07.000Z',
        committedAtMs: 8_000,
        statement: 1,
      },
    ],
    viewReads: { 'gs://b/a.txt#1': ['1'] },
    viewAtEnd: { 'gs://b/a.txt#1': '1' },
    paidAnalysesByDocument: { 'a.txt': 1 },
    paidCallsByDocument: { 'a.txt': 1 },
    refusedAnalyses: [],
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
    statements: [],
    end: 'drained (then quiet)',
    simulatedMs: 9_000,
  };
}

const broken = (record: RunRecord, entries: Parameters<typeof checkInvariants>[1]['entries'] = []) =>
  Object.entries(checkInvariants(record, { entries }).violations)
    .filter(([, list]) => list.length > 0)
    .map(([id]) => id);

describe('the invariants', () => {
  it('all hold for a run that kept the promise', () => {
    expect(broken(kept())).toEqual([]);
  });

  it('I1: an ack for a key with no row breaks it', () => {
    const r = kept();
    r.rawRows = [];
    r.viewReads = {};
    r.viewAtEnd = {};
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
    poison.answers = { '1': [500] };
    poison.messageStates = { '1': 'dead' };
    poison.rawRows = [];
    expect(broken(poison)).toEqual([]);
  });

  it('I3: a second raw row that no injected fault explains breaks it; one that a fault explains is listed', () => {
    const r = kept();
    r.rawRows.push({ ...r.rawRows[0]!, messageId: '2', committedAtMs: 9_000, statement: 2 });
    expect(broken(r)).toEqual(['I3']);
    const verdict = checkInvariants(r, {
      entries: [{ atMs: 1, kind: 'pubsub.doubledNotification', keys: ['gs://b/a.txt#1'], detail: 'twice' }],
    });
    expect(verdict.violations.I3).toEqual([]);
    expect(verdict.extraRawRows).toEqual([
      { key: 'gs://b/a.txt#1', messageId: '2', causes: ['pubsub.doubledNotification at 1 ms: twice'] },
    ]);
  });

  it('I4: a view that returned one row and ends with another breaks it', () => {
    const r = kept();
    r.viewReads = { 'gs://b/a.txt#1': ['2', '1'] };
    expect(broken(r)).toEqual(['I4']);
  });

  it('I5: a document paid twice with no refused analysis breaks it; a refused one is allowed one more', () => {
    const r = kept();
    r.paidAnalysesByDocument = { 'a.txt': 2 };
    expect(broken(r)).toEqual(['I5']);
    r.refusedAnalyses = ['a.txt'];
    expect(broken(r)).toEqual([]);
  });

  it('I5 counts analyses, not calls: an analysis whose first answer missed the schema paid two calls, once', () => {
    const r = kept();
    r.paidCallsByDocument = { 'a.txt': 2 };
    expect(broken(r)).toEqual([]);
  });

  it('I5: each analysis a fault refused allows one more, and no more than that', () => {
    const r = kept();
    r.paidAnalysesByDocument = { 'a.txt': 3 };
    r.refusedAnalyses = ['a.txt'];
    expect(broken(r)).toEqual(['I5']);
    r.refusedAnalyses = ['a.txt', 'a.txt'];
    expect(broken(r)).toEqual([]);
  });

  it('I6: a handler that answers after its deadline, starts a call after it, or never answers breaks it', () => {
    const late = kept();
    late.requests[0]!.endMs = 500_001;
    expect(broken(late)).toEqual(['I6']);
    const call = kept();
    call.requests[0]!.calls.push({ port: 'store', startMs: 500_500 });
    expect(broken(call)).toEqual(['I6']);
    const running = kept();
    delete running.requests[0]!.endMs;
    expect(broken(running)).toEqual(['I6']);
    const killed = kept();
    delete killed.requests[0]!.endMs;
    killed.requests[0]!.killedAtMs = 3_000;
    expect(broken(killed)).toEqual([]);
  });
});
