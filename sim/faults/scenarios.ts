import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SqliteStore } from '../../worker/src/adapters/stores/sqlite-store';
import type { InvariantId, Verdict } from './invariants';
import type { RunRecord } from './run';
import { SIGTERM_GRACE_MS } from './run';
import { type DocumentPlan, type FaultSchedule, ROLLOUT_MODEL } from './schedule';

/**
 * Named scenarios: each a hand-written fault schedule (the same data a seed generates) that drives
 * the worker into one known-dangerous interleaving of deliveries, instances and faults, with the
 * invariants that break when the worker lets it happen. The first eight interleavings are the
 * classic ways exactly-once breaks (an ack with no row, good rows failed with a refused one, work
 * past the deadline, a lease shorter than the work, paid work paid again, an ack before a durable
 * commit, the view changing its answer, a scale-in cutting waiting deliveries). A
 * scenario passes when every invariant holds (and, for scale-in and durability, its own check). They stay as regression cases.
 */

export interface Scenario {
  name: string;
  /** The interleaving it reproduces (1–8, see above; 9 and up: hours-long outages and rollouts). */
  interleaving: number;
  title: string;
  /** The invariants that break when the interleaving happens. */
  breaks: Array<InvariantId | 'good-rows' | 'scale-in' | 'durability' | 'outage' | 'rollout'>;
  schedule?: FaultSchedule;
  /** A check of its own, beyond I1–I8: problems found (empty: it holds). */
  check?: (record: RunRecord | undefined) => string[];
  /**
   * Set while the worker still lets the interleaving happen: why. The suite then expects the
   * scenario to fail, and turns red once it passes, so that the mark is removed with the fix.
   */
  open?: string;
}

/** A schedule with no fault but the ones given: every call takes its ordinary time. */
function plain(
  seed: number,
  documents: Array<Partial<DocumentPlan>>,
  more: Partial<FaultSchedule> = {},
): FaultSchedule {
  return {
    seed,
    instances: 1,
    documents: documents.map((d, i) => ({
      index: i,
      name: `scenario/${seed}/${String(i).padStart(2, '0')}-invoice.txt`,
      kind: 'invoice',
      notifications: 1,
      publishAtMs: 0,
      analysisMs: 6_000,
      ...d,
    })),
    gemini: { calls: [], busy: [] },
    memo: { calls: [] },
    bigquery: { statements: [] },
    cloudRun: { stalls: [], signals: [] },
    pubsub: { redeliveries: [] },
    ...more,
  };
}

const ok = (latencyMs: number) => ({ latencyMs, draw: 1 });

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;

/** A document every `everyMs` for `forMs`, from t = 0 (a steady rate of uploads). */
function steady(everyMs: number, forMs: number): Array<Partial<DocumentPlan>> {
  return Array.from({ length: Math.floor(forMs / everyMs) }, (_, i) => ({ publishAtMs: i * everyMs }));
}

/** The outage the two long-outage scenarios share: from 10 minutes in, for six hours. */
export const LONG_OUTAGE = Object.freeze({ atMs: 10 * MINUTE_MS, forMs: 6 * HOUR_MS });

export const SCENARIOS: readonly Scenario[] = [
  {
    name: 'ack-with-no-row',
    interleaving: 1,
    title:
      'two deliveries of one message share one analysis and land in one batch; BigQuery refuses the row; the second must not be answered "already recorded"',
    breaks: ['I1'],
    // A good document shares the batch, so group commit isolates the refused row.
    schedule: plain(9_001, [{ kind: 'poison' }, {}], {
      gemini: { calls: [ok(6_000), ok(6_000)], busy: [] },
      pubsub: { redeliveries: [{ push: 0, afterMs: 1_000 }] },
    }),
  },
  {
    name: 'good-rows-dead-lettered',
    interleaving: 2,
    title:
      'two refused rows in different halves of one batch must not fail the good rows with them (which, batch after batch, dead-letters them)',
    breaks: ['I2', 'good-rows'],
    schedule: plain(9_002, [{ kind: 'poison' }, {}, { kind: 'poison' }, {}], {
      gemini: { calls: [ok(6_000), ok(6_000), ok(6_000), ok(6_000)], busy: [] },
    }),
    check: (record) => goodRowsProblems(record),
  },
  {
    name: 'handler-outlives-request',
    interleaving: 3,
    title:
      'an analysis that outlasts the request timeout: the handler must answer by the deadline, not run on after the 504',
    breaks: ['I6', 'I5'],
    schedule: plain(9_003, [{}], { cloudRun: { stalls: [{ delivery: 0, call: 'analyze' }], signals: [] } }),
  },
  {
    name: 'lease-shorter-than-work',
    interleaving: 4,
    title:
      'one upload announced twice, on two instances, analysed for 40 s: the second must wait for the first, not pay again',
    breaks: ['I5'],
    schedule: plain(9_004, [{ notifications: 2 }], {
      instances: 2,
      gemini: { calls: [ok(40_000), ok(40_000)], busy: [] },
    }),
  },
  {
    name: 'paid-work-paid-again',
    interleaving: 5,
    title:
      'a safety-blocked document (a paid refusal) whose write fails once with a concurrent update: the retry is not paid again',
    breaks: ['I5'],
    schedule: plain(9_005, [{ kind: 'safetyBlocked' }], {
      // Statement 0: the lookup; statement 1: the MERGE, refused as a concurrent update.
      bigquery: { statements: [{ latencyMs: 500 }, { latencyMs: 1_000, fault: 'concurrentUpdate' }] },
    }),
  },
  {
    name: 'paid-attempt-then-429',
    interleaving: 5,
    title:
      'a document Gemini answers outside the schema, whose second attempt meets 429s: the paid first attempt is not paid again',
    breaks: ['I5'],
    schedule: plain(9_015, [{ kind: 'unreadable' }], {
      gemini: {
        // Every call answers in 5 s, but the capacity is busy from 6.6 s to 9.6 s: the second
        // attempt (the first ends at about 6.7 s) meets 429s there.
        calls: Array.from({ length: 12 }, () => ({ latencyMs: 5_000, draw: 0 })),
        busy: [{ atMs: 6_600, forMs: 3_000, refuseShare: 1 }],
      },
    }),
  },
  {
    name: 'ack-before-durable-commit',
    interleaving: 6,
    title: 'SQLite answers 200 only for a commit that survives a power loss: WAL with synchronous = FULL',
    breaks: ['durability'],
    check: () => sqliteDurabilityProblems(),
  },
  {
    name: 'view-changes-its-answer',
    interleaving: 7,
    title:
      'one upload announced twice; both instances insert; the row committed later must not take the view’s place of the one already read',
    breaks: ['I4'],
    schedule: plain(9_007, [{ notifications: 2 }], {
      instances: 2,
      gemini: { calls: [ok(6_000), ok(6_000)], busy: [] },
      // Statements 0–1: the two lookups. Statement 2: the first MERGE, slow; statement 3: the second.
      bigquery: {
        statements: [
          { latencyMs: 500 },
          { latencyMs: 500 },
          { latencyMs: 20_000, fault: 'slow' },
          { latencyMs: 1_000 },
        ],
      },
    }),
  },
  {
    name: 'view-changes-both-leases-failed',
    interleaving: 7,
    title:
      'one upload announced twice; the memo refuses both analysis leases (503), so both instances analyse; their MERGEs must still not overlap (soak I4, seeds 70, 272)',
    breaks: ['I4'],
    schedule: plain(9_017, [{ notifications: 2 }], {
      instances: 2,
      gemini: { calls: [ok(6_000), ok(6_000)], busy: [] },
      // The lookups answer 0.25 s and 1 s in, so A's memo calls come first: A's read, A's lease
      // (503), B's read, B's lease (503); every later memo call answers.
      memo: {
        calls: [
          { latencyMs: 50 },
          { latencyMs: 50, fault: 'error' },
          { latencyMs: 50 },
          { latencyMs: 50, fault: 'error' },
        ],
      },
      // A's MERGE (statement 2) starts first and is slow; B's (statement 3) commits first.
      bigquery: {
        statements: [{ latencyMs: 500 }, { latencyMs: 2_000 }, { latencyMs: 5_000 }, { latencyMs: 1_000 }],
      },
    }),
  },
  {
    name: 'view-changes-statement-outlives-delivery',
    interleaving: 7,
    title:
      'a slow MERGE outlives its delivery (SIGTERM, then SIGKILL): the redelivery on another instance must not write until that statement can no longer commit (soak I4, seeds 339, 773)',
    breaks: ['I4'],
    // One upload announced twice: A analyses and writes, B shares A's analysis and waits its turn.
    schedule: plain(9_027, [{ notifications: 2 }], {
      instances: 2,
      gemini: { calls: [ok(6_000), ok(6_000)], busy: [] },
      // Statement 2: A's MERGE, 60 s long; A's instance is told to stop 10 s in.
      bigquery: {
        statements: [{ latencyMs: 500 }, { latencyMs: 500 }, { latencyMs: 60_000, fault: 'slow' }],
      },
      cloudRun: { stalls: [], signals: [{ atMs: 10_000, instance: 0, signal: 'SIGTERM' }] },
    }),
  },
  {
    name: 'scale-in',
    interleaving: 8,
    title:
      'SIGTERM while one delivery analyses and another waits its turn: the waiting one is answered within the grace period, not cut by SIGKILL',
    breaks: ['scale-in'],
    schedule: plain(9_008, [{}, { publishAtMs: 500 }], {
      env: { ANALYZER_MAX_IN_FLIGHT: '1' },
      gemini: { calls: [ok(30_000), ok(6_000), ok(6_000)], busy: [] },
      cloudRun: { stalls: [], signals: [{ atMs: 5_000, instance: 0, signal: 'SIGTERM' }] },
    }),
    check: (record) => scaleInProblems(record),
  },
  {
    name: 'gemini-outage-six-hours',
    interleaving: 9,
    title:
      'Gemini answers every call 503 for six hours while a document arrives every two minutes: no good document dead-lettered, each ok within an hour of the recovery, ≤ 1.01 paid analyses per document',
    breaks: ['I2', 'I7', 'outage'],
    schedule: plain(9_009, steady(2 * MINUTE_MS, 6 * HOUR_MS + 30 * MINUTE_MS), {
      instances: 3,
      gemini: { calls: [], busy: [], outages: [{ ...LONG_OUTAGE, status: 503 }] },
    }),
    check: (record) => outageProblems(record, LONG_OUTAGE.atMs + LONG_OUTAGE.forMs),
  },
  {
    name: 'gemini-incident-six-hours-doubled',
    interleaving: 9,
    title:
      'Gemini answers every call 400 "Unable to process input image. Please retry" for six hours while a document announced twice arrives every two minutes: every document ok, one raw row per key, ≤ 1.01 paid analyses per document (no rejection for a retry asked)',
    breaks: ['I2', 'I3', 'I7', 'outage'],
    schedule: plain(
      9_039,
      steady(2 * MINUTE_MS, 6 * HOUR_MS + 30 * MINUTE_MS).map((d) => ({ ...d, notifications: 2 })),
      {
        instances: 3,
        gemini: { calls: [], busy: [], outages: [{ ...LONG_OUTAGE, status: 400 }] },
      },
    ),
    check: (record) => outageProblems(record, LONG_OUTAGE.atMs + LONG_OUTAGE.forMs),
  },
  {
    name: 'gemini-incident-six-hours-aftermath',
    interleaving: 9,
    title:
      'Gemini answers every call 400 "Unable to process input image. Please retry" for six hours while a document announced twice arrives every two minutes (two of them poison); two minutes after the recovery an operator runs reconcile --apply, and once all is settled replays the dead letters: every good document ok, one raw row per key, ≤ 1.01 paid analyses per document, the poison ones dead-lettered again with no row',
    breaks: ['I2', 'I3', 'I5', 'I7', 'outage'],
    schedule: plain(
      9_049,
      steady(2 * MINUTE_MS, 6 * HOUR_MS + 30 * MINUTE_MS).map((d, i) => ({
        ...d,
        notifications: 2,
        ...(i === 3 || i === 150 ? { kind: 'poison' as const } : {}),
      })),
      {
        instances: 3,
        gemini: { calls: [], busy: [], outages: [{ ...LONG_OUTAGE, status: 400 }] },
        operator: {
          reconcileAtMs: [LONG_OUTAGE.atMs + LONG_OUTAGE.forMs + 2 * MINUTE_MS],
          olderThanMs: 0,
          replayDeadLetters: true,
        },
      },
    ),
    check: (record) => [
      ...outageProblems(record, LONG_OUTAGE.atMs + LONG_OUTAGE.forMs),
      ...operatorProblems(record),
    ],
  },
  {
    name: 'gemini-quota-storm-six-hours',
    interleaving: 9,
    title:
      'Gemini refuses every call 429 (quota) for six hours while a document arrives every two minutes: the quota gate waits inside the request, so the same promise holds',
    breaks: ['I2', 'I7', 'outage'],
    schedule: plain(9_029, steady(2 * MINUTE_MS, 6 * HOUR_MS + 30 * MINUTE_MS), {
      instances: 3,
      gemini: { calls: [], busy: [], outages: [{ ...LONG_OUTAGE, status: 429 }] },
    }),
    check: (record) => outageProblems(record, LONG_OUTAGE.atMs + LONG_OUTAGE.forMs),
  },
  {
    name: 'bigquery-outage-six-hours',
    interleaving: 9,
    title:
      'BigQuery fails every statement (503) for six hours while a document arrives every two minutes: no good document dead-lettered, each ok within an hour of the recovery, ≤ 1.01 paid analyses per document',
    breaks: ['I2', 'I5', 'outage'],
    schedule: plain(9_019, steady(2 * MINUTE_MS, 6 * HOUR_MS + 30 * MINUTE_MS), {
      instances: 3,
      bigquery: { statements: [], outages: [LONG_OUTAGE] },
    }),
    check: (record) => outageProblems(record, LONG_OUTAGE.atMs + LONG_OUTAGE.forMs),
  },
  {
    name: 'rollout-under-load',
    interleaving: 10,
    title:
      'a new analyzer version rolls out over three instances while 60 documents arrive, some announced twice and some pushed again after their ack: one raw row per key, no document paid twice',
    breaks: ['I3', 'I5', 'rollout'],
    schedule: plain(
      9_010,
      Array.from({ length: 60 }, (_, i) => ({ publishAtMs: i * 1_000, notifications: i % 4 === 0 ? 2 : 1 })),
      {
        instances: 3,
        pubsub: {
          redeliveries: [],
          afterAck: Array.from({ length: 30 }, (_, a) => ({ ack: 2 * a, afterMs: 20_000 + 1_000 * a })),
        },
        rollout: { stopsAtMs: [25_000, 35_000, 45_000], model: ROLLOUT_MODEL },
      },
    ),
    check: (record) => rolloutProblems(record),
  },
  {
    name: 'rollout-during-bigquery-outage',
    interleaving: 10,
    title:
      'a new analyzer version rolls out while BigQuery is out: the analyses the old revision paid for and could not write are written by the new one, not paid again (soak I5, seeds 47, 101, 222)',
    breaks: ['I5', 'rollout'],
    // Documents are analysed and kept by the old revision while every write fails; the old
    // instances are replaced during the outage, so the new revision writes every one of them.
    schedule: plain(
      9_030,
      Array.from({ length: 12 }, (_, i) => ({ publishAtMs: i * 2_000 })),
      {
        instances: 2,
        bigquery: { statements: [], outages: [{ atMs: 0, forMs: 20 * MINUTE_MS }] },
        rollout: { stopsAtMs: [5 * MINUTE_MS, 6 * MINUTE_MS], model: ROLLOUT_MODEL },
      },
    ),
    check: (record) => rolloutProblems(record),
  },
];

/**
 * A long outage kept: every document ends `ok` (by the view), within an hour of the recovery; no
 * good document is dead-lettered; at most 1.01 paid analyses per document.
 */
export function outageProblems(record: RunRecord | undefined, recoveredAtMs: number): string[] {
  if (!record) return ['no run'];
  const problems: string[] = [];
  const byId = new Map(record.rawRows.map((r) => [r.id, r]));
  // A poison document is refused by BigQuery whatever happens: I7 holds it to no row, dead-lettered.
  for (const d of record.documents.filter((x) => x.kind !== 'poison')) {
    const id = record.viewAtEnd[d.key];
    const row = id === undefined ? undefined : byId.get(id);
    if (row?.status !== 'ok')
      problems.push(`${d.name} ends ${row ? `${row.status} ${row.reason ?? ''}` : 'with no row'}, not ok`);
    else if (row.committedAtMs > recoveredAtMs + HOUR_MS)
      problems.push(
        `${d.name} got its ok row ${Math.round((row.committedAtMs - recoveredAtMs) / MINUTE_MS)} minutes after the recovery (more than an hour)`,
      );
    for (const m of d.messageIds)
      if (record.messageStates[m] === 'dead') problems.push(`${d.name} (message ${m}) was dead-lettered`);
  }
  const paid = Object.values(record.paidAnalysesByDocument).reduce((a, b) => a + b, 0);
  const perDocument = paid / Math.max(1, record.documents.length);
  if (perDocument > 1.01)
    problems.push(`${perDocument.toFixed(3)} paid analyses per document (at most 1.01)`);
  return problems;
}

/**
 * An operator's reconcile and dead-letter replay took part: some document was announced more often
 * than its notifications (the reconcile found work still going on), and every poison document's
 * replayed copy was dead-lettered again.
 */
export function operatorProblems(record: RunRecord | undefined): string[] {
  if (!record) return ['no run'];
  const problems: string[] = [];
  const poison = record.documents.filter((d) => d.kind === 'poison');
  for (const d of poison) {
    const dead = d.messageIds.filter((m) => record.messageStates[m] === 'dead');
    if (dead.length < 4)
      problems.push(
        `${d.name}: ${dead.length} dead letters, not its two notifications and one replay of each`,
      );
  }
  if (!record.documents.some((d) => d.kind !== 'poison' && d.messageIds.length > 2))
    problems.push('the reconcile announced no document again: it found nothing without a row');
  return problems;
}

/** A rollout kept: one raw row per key, and no document paid twice (whatever the faults). */
export function rolloutProblems(record: RunRecord | undefined): string[] {
  if (!record) return ['no run'];
  const rows = new Map<string, number>();
  for (const r of record.rawRows) rows.set(r.key, (rows.get(r.key) ?? 0) + 1);
  return [
    ...[...rows].filter(([, n]) => n > 1).map(([key, n]) => `${key} has ${n} raw rows`),
    ...Object.entries(record.paidAnalysesByDocument)
      .filter(([, n]) => n > 1)
      .map(([name, n]) => `${name} was paid ${n} times`),
  ];
}

/**
 * Good rows: with no fault but refused rows, every other document is acked on its first delivery
 * (a refused row fails only its own delivery).
 */
export function goodRowsProblems(record: RunRecord | undefined): string[] {
  if (!record) return ['no run'];
  return record.documents
    .filter((d) => d.kind !== 'poison')
    .flatMap((d) => d.messageIds)
    .filter((id) => ![200, 204].includes(record.answers[id]?.[0]?.status ?? 0))
    .map(
      (id) =>
        `message ${id} of a good document was answered ${record.answers[id]?.[0]?.status} on its first delivery, in a batch with refused rows`,
    );
}

/**
 * Scale-in: every request open when its instance was told to stop is answered before the SIGKILL,
 * unless it was inside an analysis then (paid work in flight cannot be answered early).
 */
export function scaleInProblems(record: RunRecord | undefined): string[] {
  if (!record) return ['no run'];
  const problems: string[] = [];
  for (const r of record.requests) {
    if (r.sigtermAtMs === undefined || r.killedAtMs === undefined) continue;
    const kill = r.killedAtMs;
    const analysing = r.calls.some(
      (c) => c.port === 'analyze' && c.startMs <= kill && (c.endMs === undefined || c.endMs > kill),
    );
    if (!analysing)
      problems.push(
        `request ${r.id} (message ${r.messageId}) was open at SIGTERM and cut by SIGKILL ${SIGTERM_GRACE_MS} ms later without an answer, while it was only waiting`,
      );
  }
  return problems;
}

/** Interleaving 6: the SQLite store must run WAL with synchronous FULL (or EXTRA), so a 200 is durable. */
export function sqliteDurabilityProblems(): string[] {
  const dir = mkdtempSync(path.join(tmpdir(), 'docline-durability-'));
  const store = new SqliteStore({ path: path.join(dir, 'documents.sqlite') });
  try {
    // What the store's own connection runs with: the setting is per connection.
    const { journalMode, synchronous } = store.durability();
    return journalMode === 'wal' && (synchronous === 'FULL' || synchronous === 'EXTRA')
      ? []
      : [
          `SqliteStore runs journal_mode = ${journalMode}, synchronous = ${synchronous}: a commit acknowledged with 200 may not survive a power loss`,
        ];
  } finally {
    void store.close?.().finally(() => rmSync(dir, { recursive: true, force: true }));
  }
}

/** Problems of a scenario run: its broken invariants, then its own check. */
export function scenarioProblems(
  scenario: Scenario,
  verdict: Verdict | undefined,
  record: RunRecord | undefined,
): string[] {
  const problems = verdict
    ? Object.entries(verdict.violations).flatMap(([id, list]) => list.map((v) => `${id}: ${v}`))
    : [];
  return [...problems, ...(scenario.check?.(record) ?? [])];
}
