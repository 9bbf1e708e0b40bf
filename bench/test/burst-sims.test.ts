import { BigQuery } from '@google-cloud/bigquery';
import { type BigQueryServer, startBigQueryServer, staticTokenAuth } from '../../sim/bigquery-rest';
import { GeminiPortModel, TierQuota } from '../../sim/models/gemini';
import { PushSubscription } from '../../sim/pubsub';
import { SimTime, type SimTimer } from '../../sim/time';
import { BigQueryStore } from '../../worker/src/adapters/stores/bigquery-store';
import { Deadline } from '../../worker/src/core/deadline';
import { TransientError } from '../../worker/src/core/errors';
import { testRow } from '../../worker/test/support/builders';
import { statementPerDelivery } from '../burst/wiring';

const TABLE = 'docline-bench.docline.documents';

/** Simulated time in which every simulated delay waits until the test lets it go. */
class HeldTime extends SimTime {
  private readonly held: Array<() => void> = [];
  override sleep(): Promise<void> {
    return new Promise((resolve) => this.held.push(resolve));
  }
  override after(): SimTimer {
    // Never fires: jobs.query keeps waiting for the held job.
    return { cancel() {} };
  }
  get sleeping(): number {
    return this.held.length;
  }
}

/** Simulated time with no latency at all: only the limits in the window matter. */
class InstantTime extends SimTime {
  override sleep(): Promise<void> {
    return Promise.resolve();
  }
}

async function storeOn(sim: BigQueryServer, time: SimTime): Promise<BigQueryStore> {
  const bigquery = new BigQuery({
    projectId: sim.projectId,
    apiEndpoint: sim.url,
    authClient: (await staticTokenAuth()) as never,
    autoRetry: false,
  });
  return new BigQueryStore({ bigquery, table: TABLE, location: 'EU', clock: time.clock });
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}

describe('the BigQuery simulator', () => {
  let sim: BigQueryServer | undefined;
  afterEach(async () => {
    await sim?.stop();
    sim = undefined;
  });

  it('runs 2 mutating statements, queues 20, and refuses the 21st queued one with the documented error', async () => {
    const time = new HeldTime(1);
    sim = await startBigQueryServer({ projectId: 'docline-bench', simulated: { time } });
    const store = await storeOn(sim, time);
    const outcomes: Array<'pending' | unknown> = Array.from({ length: 23 }, () => 'pending');
    const records = Array.from({ length: 23 }, (_, i) =>
      statementPerDelivery(store)
        .record(testRow())
        .then(
          (v) => {
            outcomes[i] = v;
          },
          (e: unknown) => {
            outcomes[i] = e;
          },
        ),
    );
    await until(() => outcomes.filter((o) => o !== 'pending').length === 1 && time.sleeping === 2);
    expect(sim.outstanding(TABLE)).toEqual({ running: 2, queued: 20 });
    const refused = outcomes.find((o) => o !== 'pending');
    expect(refused).toBeInstanceOf(TransientError);
    expect((refused as TransientError).code).toBe('bigquery_dml_queue_full');
    expect((refused as Error).message).toMatch(
      /Too many DML statements outstanding against table docline-bench:docline\.documents, limit is 20/,
    );
    expect(sim.stats.refusedDmlQueue).toBe(1);
    void records;
  });

  it('runs a statement bounded by a delivery deadline (jobTimeoutMs: jobs.insert + getQueryResults) like any other', async () => {
    const time = new InstantTime(0.1);
    sim = await startBigQueryServer({ projectId: 'docline-bench', simulated: { time } });
    const store = await storeOn(sim, time);
    const deadline = new Deadline(time.clock.now().getTime() + 300_000, time.clock);
    const row = testRow();
    expect(await store.recordMany([row], deadline)).toEqual(new Set([row.dedup_key]));
    expect(await store.recordMany([{ ...row, message_id: 'again' }], deadline)).toEqual(new Set());
    expect(await statementPerDelivery(store).seen(row.dedup_key, deadline)).toBe(true);
    expect(sim.stats.mergeStatements).toBe(2);
    // None of them went through jobs.query.
    expect(sim.stats.queryCalls).toBe(0);
    // Two MERGEs, the winners query after the one that inserted nothing, the lookup.
    expect(sim.stats.jobInsertCalls).toBe(4);
  });

  it('refuses the 26th DML statement within 10 seconds, and bills each one that ran 10 MiB', async () => {
    // One real second is a tenth of a simulated one: 26 statements fit in the window however slow the machine.
    const time = new InstantTime(0.1);
    sim = await startBigQueryServer({ projectId: 'docline-bench', simulated: { time } });
    const store = await storeOn(sim, time);
    for (let i = 0; i < 25; i++) expect(await statementPerDelivery(store).record(testRow())).toBe(true);
    await expect(statementPerDelivery(store).record(testRow())).rejects.toMatchObject({
      code: 'bigquery_rate_limited',
    });
    expect(sim.stats.refusedDmlRate).toBe(1);
    expect(sim.stats.mergeStatements).toBe(25);
    expect(sim.stats.billedBytes).toBe(25 * 10 * 1024 * 1024);
  });

  it('refuses jobs.query calls above 100 a second for the user', async () => {
    const time = new InstantTime(0.01);
    sim = await startBigQueryServer({ projectId: 'docline-bench', simulated: { time } });
    const store = await storeOn(sim, time);
    for (let i = 0; i < 100; i++) expect(await statementPerDelivery(store).seen(`gs://b/n#${i}`)).toBe(false);
    await expect(statementPerDelivery(store).seen('gs://b/n#100')).rejects.toMatchObject({
      code: 'bigquery_rate_limited',
    });
    expect(sim.stats.refusedApiRate).toBe(1);
    expect(sim.stats.queryCalls).toBe(101);
  });

  it("executes the store's batched statements: lookup IN UNNEST(@keys), MERGE over UNNEST(@rows), winners only when the count is short", async () => {
    const time = new InstantTime(1);
    sim = await startBigQueryServer({ projectId: 'docline-bench', simulated: { time } });
    const store = await storeOn(sim, time);
    const existing = testRow();
    expect(await statementPerDelivery(store).record(existing)).toBe(true);
    const fresh = [testRow(), testRow()];
    expect(await store.recordMany(fresh)).toEqual(new Set(fresh.map((r) => r.dedup_key)));
    expect(sim.stats.selectStatements).toBe(0);
    // One row of this batch is already there: insertedRowCount is short, so the winners query runs.
    const again = testRow({ dedup_key: existing.dedup_key });
    const another = testRow();
    expect(await store.recordMany([again, another])).toEqual(new Set([another.dedup_key]));
    expect(sim.stats.selectStatements).toBe(1);
    expect(sim.stats.mergeStatements).toBe(3);
    const unknown = testRow().dedup_key;
    expect(await store.seenMany([existing.dedup_key, fresh[0]!.dedup_key, unknown])).toEqual(
      new Set([existing.dedup_key, fresh[0]!.dedup_key]),
    );
    expect(
      sim
        .viewRows(TABLE)
        .map((r) => r.dedup_key)
        .sort(),
    ).toEqual([existing, ...fresh, another].map((r) => r.dedup_key).sort());
  });
});

describe('the Pub/Sub push simulator', () => {
  const settings = {
    ackDeadlineSeconds: 120,
    minRetryBackoffSeconds: 10,
    maxRetryBackoffSeconds: 600,
    maxDeliveryAttempts: 5,
  };

  it('pauses the whole subscription longer after each nack, then dead-letters after the last attempt', async () => {
    const time = new SimTime(10_000);
    const attempts: number[] = [];
    const subscription = new PushSubscription({
      time,
      settings,
      endpoint: async (body) => {
        attempts.push((JSON.parse(body) as { deliveryAttempt: number }).deliveryAttempt);
        return 503;
      },
    });
    subscription.publish('{}', {});
    expect(await subscription.waitIdle(3_600_000)).toBe(true);
    subscription.close();
    expect(attempts).toEqual([1, 2, 3, 4, 5]);
    expect(subscription.stats.pushBackoffsMs).toEqual([100, 200, 400, 800, 1_600]);
    expect(subscription.stats.deadLetters).toBe(1);
  });

  it('waits the retry backoff, exponential per message, between deliveries of a nacked message', async () => {
    const time = new SimTime(1_000);
    const at: number[] = [];
    const subscription = new PushSubscription({
      time,
      settings: { ...settings, maxDeliveryAttempts: 4 },
      endpoint: async () => {
        at.push(time.nowMs());
        return 500;
      },
    });
    subscription.publish('{}', {});
    expect(await subscription.waitIdle(3_600_000)).toBe(true);
    subscription.close();
    // A real timer may fire up to a millisecond early: that is one simulated second here.
    const gaps = at.slice(1).map((t, i) => Math.round((t - at[i]!) / 1000));
    expect(gaps).toHaveLength(3);
    expect(gaps[0]).toBeGreaterThanOrEqual(9);
    expect(gaps[1]).toBeGreaterThanOrEqual(19);
    expect(gaps[2]).toBeGreaterThanOrEqual(39);
    expect(gaps[2]).toBeLessThan(80);
  });

  it('grows the push window on acks and halves it on a nack', async () => {
    const time = new SimTime(1_000);
    let answer = 200;
    const subscription = new PushSubscription({ time, settings, endpoint: async () => answer });
    expect(subscription.window).toBe(5);
    for (let i = 0; i < 10; i++) subscription.publish('{}', {});
    await subscription.waitIdle(60_000);
    expect(subscription.window).toBe(15);
    answer = 503;
    subscription.publish('{}', {});
    await until(() => subscription.stats.nacks === 1);
    subscription.close();
    expect(subscription.window).toBe(7);
  });

  it('takes a push that outlives the ack deadline as a nack', async () => {
    const time = new SimTime(1_000);
    const subscription = new PushSubscription({
      time,
      settings: { ...settings, ackDeadlineSeconds: 10 },
      endpoint: () => new Promise<number>(() => {}),
    });
    subscription.publish('{}', {});
    await until(() => subscription.stats.nacks === 1);
    subscription.close();
    expect(subscription.stats.deadlineExpired).toBe(1);
    expect(subscription.stats.acks).toBe(0);
  });
});

describe('the Gemini simulator', () => {
  it('answers 429 (the adapter’s analyzer_rate_limited) above the requests-per-minute quota, and counts only paid analyses', async () => {
    const time = new InstantTime(1);
    const gemini = new GeminiPortModel(
      time,
      new TierQuota(time, { requestsPerMinute: 3, tokensPerMinute: Number.POSITIVE_INFINITY }),
      { latency: () => 6_000, refusalLatency: () => 100 },
    );
    const analyzer = gemini.analyzer();
    const input = { bytes: Buffer.from('Facture'), contentType: 'text/plain', name: 'a.txt' };
    for (let i = 0; i < 3; i++) await expect(analyzer.analyze(input)).resolves.toHaveProperty('analysis');
    await expect(analyzer.analyze(input)).rejects.toMatchObject({ code: 'analyzer_rate_limited' });
    expect(gemini.paid).toBe(3);
    expect(gemini.refused).toBe(1);
  });
});
