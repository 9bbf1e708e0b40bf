import { BATCH_MAX_BYTES, GroupCommitStore, rowBytes } from '../src/adapters/stores/group-commit-store';
import type { Row } from '../src/contract/row';
import { mergeIntervalForLatencyMs } from '../src/contract/settings';
import { Deadline, DeadlineError } from '../src/core/deadline';
import { ConfigurationError, OutcomeUnknownError, RowRefusalError, TransientError } from '../src/core/errors';
import type { BatchStore } from '../src/core/ports';
import { testRow } from './support/builders';
import { MemoryLogger } from './support/fakes';

/**
 * A BatchStore in memory that records every call, can hold a call open, fail the next one, or refuse
 * any batch holding a given key (as BigQuery refuses a whole statement for one bad value).
 */
class RecordingBatchStore implements BatchStore {
  readonly rows = new Map<string, Row>();
  readonly writes: Row[][] = [];
  readonly lookups: string[][] = [];
  private held: Array<() => void> = [];
  holding = false;
  failNext: Error | undefined;
  /** Keys the store refuses: a batch holding any of them is refused as a whole. */
  readonly refuseKeys = new Set<string>();
  /** Refuse every statement for one row's content (a refusal the search can never finish). */
  refuseAll = false;
  /** Refuse every statement for itself (its byte estimate, access, a missing table): not a row's fault. */
  refuseStatement: ConfigurationError | undefined;

  async seen(key: string) {
    return (await this.seenMany([key])).has(key);
  }
  async record(row: Row) {
    return (await this.recordMany([row])).has(row.dedup_key);
  }
  async ping() {}

  async seenMany(keys: readonly string[]) {
    this.lookups.push([...keys]);
    await this.gate();
    return new Set(keys.filter((k) => this.rows.has(k)));
  }

  async recordMany(rows: readonly Row[]) {
    this.writes.push([...rows]);
    await this.gate();
    const failure = this.failNext;
    this.failNext = undefined;
    if (failure) throw failure;
    if (this.refuseStatement) throw this.refuseStatement;
    if (this.refuseAll || rows.some((r) => this.refuseKeys.has(r.dedup_key)))
      throw new RowRefusalError('bigquery_rejected_row', 'Bad int64 value: twelve');
    const inserted = new Set<string>();
    for (const row of rows) {
      if (this.rows.has(row.dedup_key)) continue;
      this.rows.set(row.dedup_key, row);
      inserted.add(row.dedup_key);
    }
    return inserted;
  }

  /** Opens every held call. */
  release() {
    this.holding = false;
    for (const open of this.held.splice(0)) open();
  }

  private gate(): Promise<void> {
    if (!this.holding) return Promise.resolve();
    return new Promise((resolve) => this.held.push(resolve));
  }
}

describe('GroupCommitStore', () => {
  let inner: RecordingBatchStore;
  beforeEach(() => {
    jest.useFakeTimers();
    inner = new RecordingBatchStore();
  });
  afterEach(() => jest.useRealTimers());

  const store = (options: Partial<ConstructorParameters<typeof GroupCommitStore>[1]> = {}) =>
    new GroupCommitStore(inner, { maxRows: 3, maxWaitMs: 1_000, minIntervalMs: 0, ...options });
  /** Records `rows` through `s`, moves the timers by `ms`, and answers how each delivery settled. */
  const recordAll = async (s: GroupCommitStore, rows: Row[], ms = 10_000) => {
    const results = Promise.allSettled(rows.map((r) => s.record(r)));
    await jest.advanceTimersByTimeAsync(ms);
    return results;
  };

  describe('a statement that may still commit', () => {
    it("sends no other row of its key before the statement's bound, and answers it as unknown (sim: seed 56 of a world of slow statements and lost answers)", async () => {
      const s = store({ maxRows: 1, maxWaitMs: 0 });
      const row = testRow();
      inner.failNext = new OutcomeUnknownError('bigquery_outcome_unknown', 'the answer of the job was lost');
      const first = s.record(row, Deadline.after(60_000)).catch((e: unknown) => e);
      await jest.advanceTimersByTimeAsync(0);
      expect(await first).toBeInstanceOf(OutcomeUnknownError);
      // The twin delivery of the same upload, on this instance, sharing the key's write turn.
      const twin = { ...row, message_id: 'twin' };
      const second = s.record(twin, Deadline.after(120_000)).catch((e: unknown) => e);
      await jest.advanceTimersByTimeAsync(0);
      expect(await second).toBeInstanceOf(OutcomeUnknownError);
      expect(inner.writes).toHaveLength(1);
      // Another key is written meanwhile.
      const other = s.record(testRow(), Deadline.after(120_000));
      await jest.advanceTimersByTimeAsync(0);
      expect(await other).toBe(true);
      // Past the first statement's bound, its row is sent.
      await jest.advanceTimersByTimeAsync(60_001);
      const third = s.record(twin, Deadline.after(120_000));
      await jest.advanceTimersByTimeAsync(0);
      expect(await third).toBe(true);
      expect(inner.writes.map((w) => w[0]!.message_id)).toEqual([row.message_id, expect.any(String), 'twin']);
    });
  });

  describe('batch boundaries', () => {
    it('closes a batch as soon as it holds maxRows rows, without waiting for the timer', async () => {
      const s = store({ maxRows: 3 });
      const answers = Promise.all([testRow(), testRow(), testRow()].map((r) => s.record(r)));
      await jest.advanceTimersByTimeAsync(0);
      expect(inner.writes.map((w) => w.length)).toEqual([3]);
      expect(await answers).toEqual([true, true, true]);
    });

    it('with no gathering wait (SQLite), takes every row of one turn of the event loop into one batch', async () => {
      // A synchronous store blocks the loop while it commits: nothing could join a batch in flight,
      // so without this every row would be a commit (and an fsync) of its own.
      jest.useRealTimers();
      const s = store({ maxRows: 10, maxWaitMs: 0 });
      const answers = await Promise.all([testRow(), testRow(), testRow()].map((r) => s.record(r)));
      expect(inner.writes.map((w) => w.length)).toEqual([3]);
      expect(answers).toEqual([true, true, true]);
      const later = await s.record(testRow());
      expect(later).toBe(true);
      expect(inner.writes.map((w) => w.length)).toEqual([3, 1]);
    });

    it('closes a partial batch maxWaitMs after its first row, and not before', async () => {
      const s = store({ maxRows: 10, maxWaitMs: 1_000 });
      const answers = Promise.all([s.record(testRow()), s.record(testRow())]);
      await jest.advanceTimersByTimeAsync(999);
      expect(inner.writes).toHaveLength(0);
      await jest.advanceTimersByTimeAsync(1);
      expect(inner.writes.map((w) => w.length)).toEqual([2]);
      expect(await answers).toEqual([true, true]);
    });

    it('splits more rows than maxRows into several batches, in arrival order', async () => {
      const rows = Array.from({ length: 7 }, () => testRow());
      const s = store({ maxRows: 3 });
      const answers = Promise.all(rows.map((r) => s.record(r)));
      await jest.advanceTimersByTimeAsync(1_000);
      expect(await answers).toEqual(rows.map(() => true));
      expect(inner.writes.map((w) => w.map((r) => r.dedup_key))).toEqual([
        rows.slice(0, 3).map((r) => r.dedup_key),
        rows.slice(3, 6).map((r) => r.dedup_key),
        rows.slice(6).map((r) => r.dedup_key),
      ]);
    });

    it('keeps one write in flight at a time and minIntervalMs between the starts of two', async () => {
      const s = store({ maxRows: 1, minIntervalMs: 5_000 });
      inner.holding = true;
      const first = s.record(testRow());
      const second = s.record(testRow());
      await jest.advanceTimersByTimeAsync(10_000);
      // The first write is still open: the second waits for it, whatever the interval says.
      expect(inner.writes).toHaveLength(1);
      inner.release();
      await first;
      await jest.advanceTimersByTimeAsync(0);
      // 10 s have passed since the first started, so the second goes at once.
      expect(inner.writes).toHaveLength(2);
      await second;

      // The MERGEs took 10 s and no time: the pace is their running average, 8.75 s (see the next test).
      const third = s.record(testRow());
      await jest.advanceTimersByTimeAsync(8_749);
      expect(inner.writes).toHaveLength(2);
      await jest.advanceTimersByTimeAsync(1);
      expect(inner.writes).toHaveLength(3);
      await third;
    });

    it("paces the writes by the MERGE latency it observes, BigQuery's queue included, so the deployment's MERGEs fit its 2 running slots", async () => {
      // 5 s is the pace derived for 10 instances. A MERGE that takes 8 s (queued behind other
      // writers) sets the pace to 8 s; the next, answered at once, brings its average to 7 s, and the
      // third waits until 7 s after the second started, though nothing is in flight.
      const s = store({ maxRows: 1, maxWaitMs: 0, minIntervalMs: 5_000 });
      expect(s.writeIntervalMs).toBe(5_000);
      inner.holding = true;
      const first = s.record(testRow());
      await jest.advanceTimersByTimeAsync(8_000);
      inner.release();
      await first;
      expect(s.writeIntervalMs).toBe(8_000);
      inner.holding = false;
      await s.record(testRow());
      expect(inner.writes).toHaveLength(2);
      expect(s.writeIntervalMs).toBe(7_000);
      const third = s.record(testRow());
      await jest.advanceTimersByTimeAsync(6_999);
      expect(inner.writes).toHaveLength(2);
      await jest.advanceTimersByTimeAsync(1);
      expect(inner.writes).toHaveLength(3);
      await third;
      // Lookups are not DML: they keep the plain pace.
      await s.seen('gs://b/a#1');
      const lookup = s.seen('gs://b/b#1');
      await jest.advanceTimersByTimeAsync(5_000);
      await lookup;
      expect(inner.lookups).toHaveLength(2);
    });

    it('paces by the MERGE latency: never under one writer’s share nor over 3 × minIntervalMs, none without a pace', () => {
      // Derived for 10 instances (5 s each): one writer's share of the budget is 0.5 s.
      expect(mergeIntervalForLatencyMs(5_000, 200)).toBe(500);
      // A few instances writing: 2 s MERGEs, a MERGE every 2 s (not the 10 s ten writers would need).
      expect(mergeIntervalForLatencyMs(5_000, 2_000)).toBe(2_000);
      // More writers than BigQuery's 2 running slots take: MERGEs wait in its queue, and the pace follows.
      expect(mergeIntervalForLatencyMs(5_000, 7_500)).toBe(7_500);
      // Never past three times the pace: a slow MERGE must not take a delivery's time.
      expect(mergeIntervalForLatencyMs(5_000, 60_000)).toBe(15_000);
      // 20 instances (10 s each): 2 s MERGEs ask for 2 s, up to 30 s.
      expect(mergeIntervalForLatencyMs(10_000, 2_000)).toBe(2_000);
      expect(mergeIntervalForLatencyMs(10_000, 20_000)).toBe(20_000);
      expect(mergeIntervalForLatencyMs(10_000, 60_000)).toBe(30_000);
      // SQLite: no pace at all, whatever its commits take; before any MERGE: the plain pace.
      expect(mergeIntervalForLatencyMs(0, 2_000)).toBe(0);
      expect(mergeIntervalForLatencyMs(5_000, 0)).toBe(5_000);
    });

    it('spaces the writes by the instances writing: at least writers × 1.5 s, within the cap; one writer paces by latency alone', () => {
      // One writer (or a store that cannot count): the latency decides, as above.
      expect(mergeIntervalForLatencyMs(5_000, 2_000, 1)).toBe(2_000);
      // Ten instances writing, each seeing 2 s MERGEs: 15 s each, so the fleet sends one every 1.5 s
      // instead of filling BigQuery's queue (a latency-only pace sees a lone writer's latency there).
      expect(mergeIntervalForLatencyMs(5_000, 2_000, 10)).toBe(15_000);
      // Three: 4.5 s. A slower latency still wins.
      expect(mergeIntervalForLatencyMs(5_000, 2_000, 3)).toBe(4_500);
      expect(mergeIntervalForLatencyMs(5_000, 6_000, 3)).toBe(6_000);
      // Never past the cap, whatever the count.
      expect(mergeIntervalForLatencyMs(5_000, 2_000, 40)).toBe(15_000);
      // In shares of one writer's budget, so a pace given in other units scales with it (the burst
      // runs its knobs ÷ 100): a 50 ms pace derived for 10 instances spaces ten writers 150 ms apart.
      expect(mergeIntervalForLatencyMs(50, 20, 10)).toBe(150);
      // The prod stack: 20 instances at 10 s, 1.5 s a writer, twenty fit the cap (30 s).
      expect(mergeIntervalForLatencyMs(10_000, 2_000, 20)).toBe(30_000);
    });

    it('asks the store how many instances write, at most every two paces (10 s), and paces by the answer; a failed count paces as one', async () => {
      let writers = 10;
      let fail = false;
      let calls = 0;
      const counting = Object.assign(inner, {
        writers: async () => {
          calls += 1;
          if (fail) throw new TransientError('bigquery_unavailable', 'jobs.list: 503');
          return writers;
        },
      });
      const s = new GroupCommitStore(counting, { maxRows: 1, maxWaitMs: 0, minIntervalMs: 5_000 });
      inner.holding = true;
      const first = s.record(testRow());
      await jest.advanceTimersByTimeAsync(200);
      inner.release();
      await first;
      inner.holding = false;
      await jest.advanceTimersByTimeAsync(0);
      expect(calls).toBe(1);
      // A 200 ms MERGE alone would ask for 0.5 s (one writer's share); ten writers ask for 15 s.
      expect(s.writeIntervalMs).toBe(15_000);
      const second = s.record(testRow());
      writers = 2;
      await jest.advanceTimersByTimeAsync(14_799);
      expect(inner.writes).toHaveLength(1);
      await jest.advanceTimersByTimeAsync(1);
      await second;
      expect(inner.writes).toHaveLength(2);
      // Counted again after the second MERGE (over 10 s later): two writers, 3 s; then a failed
      // count: one writer.
      await jest.advanceTimersByTimeAsync(0);
      expect(calls).toBe(2);
      expect(s.writeIntervalMs).toBe(3_000);
      fail = true;
      await jest.advanceTimersByTimeAsync(15_000);
      await s.record(testRow());
      await jest.advanceTimersByTimeAsync(0);
      expect(calls).toBe(3);
      expect(s.writeIntervalMs).toBe(500);
    });

    it('gathers the lookups of maxWaitMs into one, and those arriving while it runs into the next', async () => {
      const s = store({ maxRows: 10, maxWaitMs: 1_000 });
      inner.holding = true;
      const first = [s.seen('gs://b/a#1'), s.seen('gs://b/z#1')];
      await jest.advanceTimersByTimeAsync(999);
      expect(inner.lookups).toEqual([]);
      await jest.advanceTimersByTimeAsync(1);
      expect(inner.lookups).toEqual([['gs://b/a#1', 'gs://b/z#1']]);
      const later = [s.seen('gs://b/b#1'), s.seen('gs://b/c#1'), s.seen('gs://b/b#1')];
      inner.release();
      await Promise.all(first);
      await jest.advanceTimersByTimeAsync(1_000);
      await Promise.all(later);
      expect(inner.lookups).toEqual([
        ['gs://b/a#1', 'gs://b/z#1'],
        ['gs://b/b#1', 'gs://b/c#1'],
      ]);
    });

    it('paces lookups like writes: minIntervalMs between the starts of two', async () => {
      const s = store({ maxRows: 1, maxWaitMs: 0, minIntervalMs: 5_000 });
      await s.seen('gs://b/a#1');
      const second = s.seen('gs://b/b#1');
      await jest.advanceTimersByTimeAsync(4_999);
      expect(inner.lookups).toHaveLength(1);
      await jest.advanceTimersByTimeAsync(1);
      await second;
      expect(inner.lookups).toHaveLength(2);
    });
  });

  it('answers each lookup of a batch with its own key', async () => {
    const known = testRow();
    inner.rows.set(known.dedup_key, known);
    const s = store();
    const answers = Promise.all([s.seen('gs://b/none#1'), s.seen(known.dedup_key)]);
    await jest.advanceTimersByTimeAsync(1_000);
    expect(await answers).toEqual([false, true]);
  });

  it('writes the first row of a key in a batch and answers the later ones "not inserted"', async () => {
    const row = testRow();
    const s = store();
    const answers = Promise.all([
      s.record({ ...row, message_id: 'first' }),
      s.record({ ...row, message_id: 'second' }),
      s.record(testRow()),
    ]);
    await jest.advanceTimersByTimeAsync(0);
    expect(await answers).toEqual([true, false, true]);
    expect(inner.writes[0]!.map((r) => r.message_id)).toContain('first');
    expect(inner.writes[0]!.map((r) => r.message_id)).not.toContain('second');
    expect(inner.rows.get(row.dedup_key)?.message_id).toBe('first');
  });

  it('answers "not inserted" to a delivery whose key another batch recorded first', async () => {
    const row = testRow();
    inner.rows.set(row.dedup_key, { ...row, message_id: 'earlier' });
    const s = store({ maxRows: 1 });
    await expect(s.record(row)).resolves.toBe(false);
  });

  it('fails every delivery of a batch with the transient error of its write, and writes nothing twice', async () => {
    inner.failNext = new TransientError('bigquery_dml_queue_full', 'Too many DML statements outstanding');
    const s = store({ maxRows: 2 });
    const results = await Promise.allSettled([s.record(testRow()), s.record(testRow())]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(results.map((r) => (r as PromiseRejectedResult).reason.code)).toEqual([
      'bigquery_dml_queue_full',
      'bigquery_dml_queue_full',
    ]);
    expect(inner.writes).toHaveLength(1);
    expect(inner.rows.size).toBe(0);
  });

  describe('batches bounded by bytes', () => {
    /** A row whose analysis carries about `kib` KiB of text (a long invoice's line items). */
    const large = (kib: number) =>
      testRow({ analysis: { ...(testRow().analysis as object), notes: 'x'.repeat(kib * 1024) } as never });

    it('closes a batch at maxBytes of rows, not only at maxRows: a burst of large invoices is written in several statements', async () => {
      const rows = Array.from({ length: 10 }, () => large(512));
      const each = rowBytes(rows[0]!);
      const s = store({ maxRows: 500, maxBytes: 3 * each });
      const answers = Promise.all(rows.map((r) => s.record(r)));
      await jest.advanceTimersByTimeAsync(5_000);
      expect(await answers).toEqual(rows.map(() => true));
      expect(inner.writes.map((w) => w.length)).toEqual([3, 3, 3, 1]);
      for (const w of inner.writes)
        expect(w.reduce((n, r) => n + rowBytes(r), 0)).toBeLessThanOrEqual(3 * each);
    });

    it('closes a batch at once when its bytes are full, without waiting for maxWaitMs', async () => {
      const rows = [large(512), large(512)];
      const s = store({ maxRows: 500, maxWaitMs: 60_000, maxBytes: 2 * rowBytes(rows[0]!) });
      const answers = Promise.all(rows.map((r) => s.record(r)));
      await jest.advanceTimersByTimeAsync(0);
      expect(inner.writes.map((w) => w.length)).toEqual([2]);
      await answers;
    });

    it('keeps the default budget under BigQuery’s 10 MB request limit', () => {
      expect(BATCH_MAX_BYTES).toBeLessThan(10 * 1000 * 1000);
    });

    it('writes a key the store refused alone the next time: it fails alone, the rest of the batch goes in one statement', async () => {
      const bad = testRow();
      inner.refuseKeys.add(bad.dedup_key);
      const s = store({ maxRows: 8 });
      const first = Array.from({ length: 7 }, () => testRow());
      expect((await recordAll(s, [...first, bad])).filter((r) => r.status === 'rejected')).toHaveLength(1);
      inner.writes.length = 0;
      const second = Array.from({ length: 7 }, () => testRow());
      const again = [bad, ...second].map((r) => ({ ...r, message_id: `${r.message_id}-again` }));
      const settled = await recordAll(s, again);
      expect(settled.map((r) => r.status)).toEqual(['rejected', ...second.map(() => 'fulfilled')]);
      // One statement for the seven good rows, one for the refused row alone: no search again.
      expect(inner.writes.map((w) => w.length)).toEqual([7, 1]);
    });
  });

  it('isolates one row the store refuses: the others go in, only that delivery fails', async () => {
    const rows = Array.from({ length: 8 }, () => testRow());
    inner.refuseKeys.add(rows[5]!.dedup_key);
    const s = store({ maxRows: 8, minIntervalMs: 100 });
    const settled = await recordAll(s, rows);
    expect(settled.map((r) => r.status)).toEqual(rows.map((_, i) => (i === 5 ? 'rejected' : 'fulfilled')));
    expect((settled[5] as PromiseRejectedResult).reason).toBeInstanceOf(ConfigurationError);
    expect(inner.rows.size).toBe(7);
    // 8 → 4 + 4 → (2 + 2) → (1 + 1): the good rows are held back by one refusal per level at most.
    expect(inner.writes.map((w) => w.length)).toEqual([8, 4, 4, 2, 2, 1, 1]);
    expect(s.statements).toBe(7);
  });

  describe('a statement refused for itself is never a bad row', () => {
    const refusals: Array<[string, ConfigurationError]> = [
      [
        'its byte estimate',
        new ConfigurationError(
          'bigquery_bytes_billed_limit',
          'Query exceeded limit for bytes billed: 100000000. 1130000000 or higher required.',
        ),
      ],
      ['its access', new ConfigurationError('bigquery_access_denied', 'Access Denied: Table p:d.t')],
      ['a missing table', new ConfigurationError('bigquery_not_found', 'Not found: Table p:d.t')],
      ['its SQL', new ConfigurationError('bigquery_rejected_query', 'Syntax error at [1:1]')],
    ];

    it.each(refusals)(
      'fails the whole batch at once, in one statement, when refused for %s',
      async (_, refusal) => {
        const logger = new MemoryLogger();
        inner.refuseStatement = refusal;
        const rows = Array.from({ length: 8 }, () => testRow());
        const s = store({ maxRows: 8, minIntervalMs: 100, logger });
        const settled = await recordAll(s, rows);
        // One statement, no search: every delivery gets the configuration error itself (nacked,
        // replayable after the fix), none is singled out as a bad row and none is "undecided".
        expect(inner.writes.map((w) => w.length)).toEqual([8]);
        expect(s.statements).toBe(1);
        for (const r of settled) {
          expect(r.status).toBe('rejected');
          const reason = (r as PromiseRejectedResult).reason;
          expect(reason).toBe(refusal);
          expect(reason).not.toBeInstanceOf(RowRefusalError);
        }
        expect(inner.rows.size).toBe(0);
        // The alert-worthy line: one ERROR for the batch, with the refusal's code.
        const logged = logger.entries.filter((e) => e.severity === 'ERROR');
        expect(logged).toHaveLength(1);
        expect(logged[0]).toMatchObject({ code: refusal.code, rows: 8 });
      },
    );
  });

  it('stops searching at maxIsolationStatements: the rows not yet placed fail transiently', async () => {
    const rows = Array.from({ length: 8 }, () => testRow());
    // A store that says every half holds a bad row: the search is bounded.
    inner.refuseAll = true;
    const settled = await recordAll(store({ maxRows: 8, maxIsolationStatements: 4 }), rows, 1_000);
    expect(settled.every((r) => r.status === 'rejected')).toBe(true);
    // The batch, then 4 statements of the search: 8 → 4 + 4 → 2 + 2; the rest is left undecided.
    expect(inner.writes.map((w) => w.length)).toEqual([8, 4, 4, 2, 2]);
    const codes = settled.map((r) => (r as PromiseRejectedResult).reason.code);
    expect(codes.filter((c) => c === 'store_isolation_unfinished').length).toBeGreaterThan(0);
    expect(
      settled
        .filter((_, i) => codes[i] === 'store_isolation_unfinished')
        .every((r) => (r as PromiseRejectedResult).reason instanceof TransientError),
    ).toBe(true);
  });

  describe('interleaving 1: an ack with no row', () => {
    it("fails both deliveries of one key in one batch when the store refuses that key's row", async () => {
      // Two deliveries of one key (single flight: same analysis, same messageId) land in one batch.
      const row = testRow();
      const other = testRow();
      inner.refuseKeys.add(row.dedup_key);
      const s = store({ maxRows: 3 });
      const results = Promise.allSettled([s.record(row), s.record({ ...row }), s.record(other)]);
      await jest.advanceTimersByTimeAsync(1_000);
      const settled = await results;
      // Neither is answered "already recorded": no row went in, so neither may be acknowledged.
      expect(settled.map((r) => r.status)).toEqual(['rejected', 'rejected', 'fulfilled']);
      expect(inner.rows.has(row.dedup_key)).toBe(false);
      expect(inner.rows.has(other.dedup_key)).toBe(true);
    });

    it('fails the in-batch duplicate with the transient error of a failed batch', async () => {
      const row = testRow();
      inner.failNext = new TransientError('bigquery_concurrent_update', 'Could not serialize access');
      const s = store({ maxRows: 2 });
      const settled = await Promise.allSettled([s.record(row), s.record({ ...row, message_id: 'again' })]);
      expect(settled.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    });
  });

  describe('interleaving 2: good rows dead-lettered', () => {
    it('commits every good row when two refused rows sit in different halves', async () => {
      const rows = Array.from({ length: 8 }, () => testRow());
      inner.refuseKeys.add(rows[1]!.dedup_key);
      inner.refuseKeys.add(rows[6]!.dedup_key);
      const settled = await recordAll(store({ maxRows: 8, minIntervalMs: 100 }), rows);
      expect(settled.map((r) => r.status)).toEqual(
        rows.map((_, i) => (i === 1 || i === 6 ? 'rejected' : 'fulfilled')),
      );
      expect((settled[1] as PromiseRejectedResult).reason).toBeInstanceOf(ConfigurationError);
      expect([...inner.rows.keys()].sort()).toEqual(
        rows
          .filter((_, i) => i !== 1 && i !== 6)
          .map((r) => r.dedup_key)
          .sort(),
      );
      // 8 → 4 + 4 (both refused); the first 4 → 2 + 2 → 1 + 1, then the second 4 the same way.
      expect(inner.writes.map((w) => w.length)).toEqual([8, 4, 4, 2, 2, 1, 1, 2, 2, 1, 1]);
    });

    it('starts no statement of the search for deliveries whose deadline it could outlive', async () => {
      const rows = Array.from({ length: 4 }, () => testRow());
      inner.refuseKeys.add(rows[0]!.dedup_key);
      const s = store({ maxRows: 4, minIntervalMs: 1_000, minStatementMs: 2_000 });
      const long = Deadline.after(60_000);
      const short = Deadline.after(2_500);
      const results = Promise.allSettled(rows.map((r, i) => s.record(r, i < 2 ? long : short)));
      await jest.advanceTimersByTimeAsync(10_000);
      const settled = await results;
      expect(settled.map((r) => r.status)).toEqual(['rejected', 'fulfilled', 'rejected', 'rejected']);
      expect((settled[0] as PromiseRejectedResult).reason).toBeInstanceOf(ConfigurationError);
      // Their half would start 2 s in, with 0.5 s left: 503 instead of a statement past their deadline.
      expect((settled[2] as PromiseRejectedResult).reason).toBeInstanceOf(DeadlineError);
      expect((settled[3] as PromiseRejectedResult).reason).toBeInstanceOf(DeadlineError);
      expect(inner.writes.map((w) => w.length)).toEqual([4, 2, 1, 1]);
    });

    it('paces the search like any write: minIntervalMs before each statement', async () => {
      const rows = Array.from({ length: 4 }, () => testRow());
      inner.refuseKeys.add(rows[0]!.dedup_key);
      const s = store({ maxRows: 4, minIntervalMs: 1_000 });
      const results = Promise.allSettled(rows.map((r) => s.record(r)));
      await jest.advanceTimersByTimeAsync(0);
      expect(inner.writes).toHaveLength(1);
      await jest.advanceTimersByTimeAsync(999);
      expect(inner.writes).toHaveLength(1);
      await jest.advanceTimersByTimeAsync(1);
      expect(inner.writes).toHaveLength(2);
      await jest.advanceTimersByTimeAsync(10_000);
      expect((await results).map((r) => r.status)).toEqual([
        'rejected',
        'fulfilled',
        'fulfilled',
        'fulfilled',
      ]);
    });
  });

  describe('a hung statement does not wedge group commit (soak I2)', () => {
    it("gives up a hung MERGE at its rows' deadline, and the next batch is written", async () => {
      const s = store({ maxRows: 1, minStatementMs: 1_000 });
      inner.holding = true;
      const first = s.record(testRow(), Deadline.after(5_000));
      const firstSettled = Promise.allSettled([first]);
      await jest.advanceTimersByTimeAsync(0);
      inner.holding = false;
      const later = testRow();
      const second = Promise.allSettled([s.record(later, Deadline.after(30_000))]);
      await jest.advanceTimersByTimeAsync(5_000);
      const [hung] = await firstSettled;
      expect(hung!.status).toBe('rejected');
      expect((hung as PromiseRejectedResult).reason).toBeInstanceOf(DeadlineError);
      await jest.advanceTimersByTimeAsync(1_000);
      expect((await second).map((r) => r.status)).toEqual(['fulfilled']);
      expect(inner.rows.has(later.dedup_key)).toBe(true);
    });

    it('gives up a hung lookup at its deadline, and the next lookup is sent', async () => {
      const s = store({ maxRows: 1, minStatementMs: 1_000 });
      inner.holding = true;
      const first = Promise.allSettled([s.seen('k-hung', Deadline.after(5_000))]);
      await jest.advanceTimersByTimeAsync(0);
      inner.holding = false;
      const second = Promise.allSettled([s.seen('k-next', Deadline.after(30_000))]);
      await jest.advanceTimersByTimeAsync(5_000);
      expect((await first).map((r) => r.status)).toEqual(['rejected']);
      await jest.advanceTimersByTimeAsync(1_000);
      expect(await second).toEqual([{ status: 'fulfilled', value: false }]);
      expect(inner.lookups).toEqual([['k-hung'], ['k-next']]);
    });
  });

  it('lets queued writes finish before it closes', async () => {
    const s = store({ maxRows: 10, maxWaitMs: 1_000 });
    const answer = s.record(testRow());
    const closed = s.close();
    await jest.advanceTimersByTimeAsync(1_000);
    await closed;
    expect(await answer).toBe(true);
    expect(inner.rows.size).toBe(1);
  });
});
