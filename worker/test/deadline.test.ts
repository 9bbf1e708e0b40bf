import request from 'supertest';
import { QuotaGate } from '../src/adapters/quota-gate';
import { GroupCommitStore } from '../src/adapters/stores/group-commit-store';
import { SqliteStore } from '../src/adapters/stores/sqlite-store';
import { createApp } from '../src/app';
import { Deadline, DeadlineError, Deadlines, ShuttingDownError } from '../src/core/deadline';
import { parsePush } from '../src/core/event';
import { handle } from '../src/core/handle';
import { AnalysisMemo } from '../src/core/memo';
import type { MemoStore, ObjectRef, Reader } from '../src/core/ports';
import { pushBody, testRow } from './support/builders';
import { MemoryLogger } from './support/fakes';
import { handlerDeps } from './support/handler';
import { ManualTime, settle } from './support/manual-time';

const DAY_MS = 24 * 60 * 60 * 1000;
const INVOICE = 'FACTURE N° F-2026-0042\nTotal TTC : 1 234,56 €\n';

/** A reader whose reads never end (a stalled download); it tells when a read started. */
class HangingReader implements Reader {
  started = 0;
  read(_ref: ObjectRef): Promise<Buffer> {
    this.started += 1;
    return new Promise(() => {});
  }
}

/** A memo store whose every call hangs (Cloud Storage that stopped answering); `calls` names them. */
function hangingMemoStore(): MemoStore & { calls: string[] } {
  const calls: string[] = [];
  const hang = (name: string) => () => {
    calls.push(name);
    return new Promise<never>(() => {});
  };
  return { calls, get: hang('get'), create: hang('create'), lease: hang('lease'), renew: hang('renew') };
}

/**
 * Runs `promise` while the simulated clock moves in steps of `stepMs`, until it settles; reports
 * how much simulated time had passed when it did.
 */
async function runFor<T>(time: ManualTime, promise: Promise<T>, stepMs = 500, maxMs = 600_000) {
  const started = time.ms;
  let done = false;
  const outcome = promise.then(
    (value) => ({ value, error: undefined as unknown, elapsedMs: time.ms - started }),
    (error: unknown) => ({ value: undefined, error, elapsedMs: time.ms - started }),
  );
  void outcome.then(() => {
    done = true;
  });
  await settle();
  while (!done && time.ms - started < maxMs) await time.advance(stepMs);
  return outcome;
}

/** The clock and timers each test moves, and a deadline `ms` from now on them. */
let time: ManualTime;
beforeEach(() => {
  time = new ManualTime();
});
const deadlineIn = (ms: number) => Deadline.after(ms, time.clock, time);

describe('Deadline', () => {
  it('does not start a call that could outlive it', () => {
    const deadline = deadlineIn(10_000);
    expect(() => deadline.check('analysis', 10_000)).not.toThrow();
    time.ms += 1;
    expect(() => deadline.check('analysis', 10_000)).toThrow(DeadlineError);
    expect(() => deadline.check('analysis', 10_000)).toThrow(/not started: it may take 10000 ms/);
  });

  it('ends a call that is still running at the deadline with a transient error (503)', async () => {
    const outcome = runFor(time, deadlineIn(5_000).race('lookup', new Promise(() => {})));
    const { error, elapsedMs } = await outcome;
    expect(error).toBeInstanceOf(DeadlineError);
    expect((error as DeadlineError).answer.http).toBe(503);
    expect(elapsedMs).toBe(5_000);
  });

  it('gives the call its answer when it comes first, and caps one call shorter than the deadline', async () => {
    const deadline = deadlineIn(60_000);
    await expect(deadline.race('read', Promise.resolve('bytes'))).resolves.toBe('bytes');
    const { error, elapsedMs } = await runFor(
      time,
      deadline.race('memo read', new Promise(() => {}), { capMs: 5_000 }),
    );
    expect(error).toBeInstanceOf(DeadlineError);
    expect(elapsedMs).toBe(5_000);
  });

  it('at scale-in, ends waits at once and brings the work forward to the grace period', async () => {
    const deadlines = new Deadlines(500_000, time.clock, time);
    const deadline = deadlines.start();
    const wait = deadline.race('waiting for a lease', new Promise(() => {}), { wait: true });
    const analysis = deadline.race('analysis', new Promise(() => {}));
    deadlines.drain(8_000);
    const work = runFor(time, analysis);
    await expect(wait).rejects.toBeInstanceOf(ShuttingDownError);
    const { error, elapsedMs } = await work;
    expect(error).toBeInstanceOf(DeadlineError);
    expect(elapsedMs).toBe(8_000);
    // A delivery that starts while draining is already bounded by the grace period.
    expect(deadlines.start().remainingMs()).toBe(0);
  });
});

describe('interleaving 3: a handler that outlives its request', () => {
  function upload(deps: ReturnType<typeof handlerDeps>) {
    const body = pushBody('1', { size: Buffer.byteLength(INVOICE) });
    deps.reader.putAnnounced(body, INVOICE);
    return parsePush(body);
  }

  it('stops at the deadline when the read hangs: 503, no analysis, no row', async () => {
    const reader = new HangingReader();
    const setup = handlerDeps({ clock: time.clock, reader });
    const event = upload(setup);
    const { error, elapsedMs } = await runFor(time, handle(event, setup.deps, deadlineIn(30_000)));
    expect(reader.started).toBe(1);
    expect(error).toBeInstanceOf(DeadlineError);
    expect(elapsedMs).toBe(30_000);
    expect(setup.analyzer.calls).toHaveLength(0);
    expect(setup.store.documents()).toHaveLength(0);
  });

  it('passes by a memo that hangs after its call timeout, and still writes the row in time', async () => {
    const memoStore = hangingMemoStore();
    const setup = handlerDeps({
      clock: time.clock,
      memo: new AnalysisMemo(memoStore, { ttlMs: DAY_MS, clock: time.clock, sleep: time.sleep }),
    });
    const event = upload(setup);
    const { value, elapsedMs } = await runFor(time, handle(event, setup.deps, deadlineIn(60_000)));
    expect(value).toMatchObject({ status: 'ok', analysed: true });
    // Read (before the lookup), read again once admitted (the first failed), lease, keep, and the
    // write's lease (asked again: the analysis ran without one): each given up after 5 s, none
    // allowed to hold the delivery longer (the path counts the two reads).
    expect(memoStore.calls).toEqual(['get', 'get', 'lease', 'create', 'lease']);
    expect(elapsedMs).toBe(25_000);
    expect(setup.store.rowsFor(value!.dedupKey)).toHaveLength(1);
  });

  it("ends the wait for a turn at the analyzer at the delivery's deadline, before the gate's own limit", async () => {
    const gate = new QuotaGate({ maxInFlight: 1, maxWaitMs: 300_000, clock: time.clock, timers: time });
    const busy = gate.run(() => new Promise(() => {}));
    void busy;
    const { error, elapsedMs } = await runFor(
      time,
      gate.run(async () => 'admitted', deadlineIn(20_000)),
    );
    expect(error).toBeInstanceOf(DeadlineError);
    expect(elapsedMs).toBe(20_000);
    expect(gate.queued).toBe(0);
  });

  it('does not put a delivery in a statement that could outlive its deadline', async () => {
    const store = new GroupCommitStore(
      new SqliteStore({ path: ':memory:' }),
      { maxRows: 10, maxWaitMs: 0, minIntervalMs: 0, minStatementMs: 2_000 },
      () => time.ms,
    );
    const row = testRow();
    const late = store.record(row, deadlineIn(1_500));
    await expect(late).rejects.toBeInstanceOf(DeadlineError);
    expect(store.statements).toBe(0);
    await expect(store.record(testRow(), deadlineIn(60_000))).resolves.toBe(true);
    expect(store.statements).toBe(1);
  });

  it('answers 503 through the app when the delivery reaches its deadline, before Cloud Run would', async () => {
    const reader = new HangingReader();
    const setup = handlerDeps({ clock: time.clock, reader });
    const app = createApp({
      ...setup.deps,
      logger: new MemoryLogger(),
      pushBodyLimitBytes: 16 * 1024,
      deadlines: new Deadlines(498_000, time.clock, time),
    });
    const answer = request(app)
      .post('/push')
      .send(pushBody('7', { size: 40 }))
      .then((res) => res);
    while (reader.started === 0) await settle();
    await time.advance(498_000);
    const res = await answer;
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ error: 'transient', cause: 'deadline_exceeded' });
  });
});
