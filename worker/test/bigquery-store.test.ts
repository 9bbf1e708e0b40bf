import type { BigQuery } from '@google-cloud/bigquery';
import {
  type BigQueryFailure,
  type BigQueryServer,
  localBigQuery,
  type StoredRow,
  startBigQueryServer,
} from '../../sim/bigquery-rest';
import {
  BigQueryStore,
  batchLookupSql,
  batchMergeSql,
  bigQueryError,
  keyDayGroups,
  lookupSinceDay,
  winnersSql,
} from '../src/adapters/stores/bigquery-store';
import { GroupCommitStore } from '../src/adapters/stores/group-commit-store';
import { COLUMN_NAMES, COLUMNS, keyDay, type Row } from '../src/contract/row';
import { DELIVERY_DEFAULTS } from '../src/contract/settings';
import { Deadline, DeadlineError } from '../src/core/deadline';
import {
  ConfigurationError,
  OutcomeUnknownError,
  RejectionError,
  RowRefusalError,
  TransientError,
} from '../src/core/errors';
import { writeMayStillCommit } from '../src/core/handle';
import type { Clock } from '../src/core/ports';
import { testRow } from './support/builders';
import { MemoryLogger } from './support/fakes';
import { describeBatchStoreContract, describeStoreContract } from './support/store-contract';

/*
 * BigQueryStore runs through @google-cloud/bigquery against sim/bigquery-rest.ts, a local server that
 * answers the REST calls the library makes (jobs.query) with the documented shapes and errors.
 *
 * Not covered here, and why:
 * - Two concurrent MERGEs of one key: BigQuery may let both insert (an insert-only MERGE takes no
 *   conflicting lock); the fake runs them one after the other, so the contract case would pass for
 *   the wrong reason. It is listed as unsupported; the `documents` view absorbs the duplicate.
 * - Partition pruning and the real pre-run estimate: the fake reports whatever estimate a test sets.
 * - Real SQL execution: the fake recognises the two statements by their parameters; the SQL text is
 *   checked here by shape (key-day filters, no literals). The bigquery-emulator suite runs the SQL.
 */

const TABLE = 'acme-dev.docline.rows';
// Four hours after the test rows' events (2026-11-30 00:00): inside the lookup's horizon.
const NOW = new Date('2026-11-30T04:00:00.000Z');
const clock: Clock = { now: () => NOW };

/** A Row back from the fake's REST representation (strings), typed as the worker built it. */
function fromStored(stored: StoredRow): Row {
  const row: Record<string, unknown> = {};
  for (const column of COLUMNS) {
    const value = stored[column.name];
    if (value === null) row[column.name] = null;
    else if (column.type === 'INT64') row[column.name] = Number(value);
    else if (column.type === 'JSON') row[column.name] = JSON.parse(value);
    else if (column.type === 'TIMESTAMP') row[column.name] = new Date(value).toISOString();
    else row[column.name] = value;
  }
  return row as unknown as Row;
}

const client = (fake: BigQueryServer): Promise<BigQuery> => localBigQuery(fake.url, fake.projectId);

async function storeOn(
  fake: BigQueryServer,
  extra: Partial<ConstructorParameters<typeof BigQueryStore>[0]> = {},
) {
  return new BigQueryStore({
    bigquery: await client(fake),
    table: TABLE,
    location: 'EU',
    clock,
    ...extra,
  });
}

/** One key's lookup, as group commit sends it for a lone delivery. */
async function seenOne(store: BigQueryStore, key: string, deadline?: Deadline): Promise<boolean> {
  return (await store.seenMany([key], deadline)).has(key);
}

/** One row's MERGE, as group commit sends it for a lone delivery: true when it inserted the row. */
async function recordOne(store: BigQueryStore, row: Row, deadline?: Deadline): Promise<boolean> {
  return (await store.recordMany([row], deadline)).has(row.dedup_key);
}

/** A BigQueryStore on a fresh fake, with the contract suites' read-back and cleanup. */
async function harnessOnFake() {
  const fake = await startBigQueryServer({ projectId: 'acme-dev' });
  // On NOW: the contract's rows (events of 2026-11-30 00:00) are inside the lookup's horizon.
  const store = await storeOn(fake);
  return {
    store,
    rowsFor: async (key: string) =>
      fake
        .rows()
        .filter((r) => r.dedup_key === key)
        .map(fromStored),
    cleanup: () => fake.stop(),
  };
}

/** The contract holds for the store as the worker composes it: group commit over BigQueryStore. */
async function composedOnFake() {
  const h = await harnessOnFake();
  const store = new GroupCommitStore(h.store, { maxRows: 500, maxWaitMs: 0, minIntervalMs: 0 });
  return { ...h, store };
}

describeStoreContract('group commit over BigQueryStore on sim/bigquery-rest.ts', composedOnFake, {
  unsupported: {
    'lets exactly one of two concurrent records of one key insert':
      'BigQuery does not promise it (two insert-only MERGEs may both insert) and the fake serialises requests; the documents view deduplicates instead',
  },
});

describeBatchStoreContract('BigQueryStore on sim/bigquery-rest.ts', harnessOnFake);

describe('BigQueryStore', () => {
  let fake: BigQueryServer;
  let logger: MemoryLogger;
  let store: BigQueryStore;

  beforeEach(async () => {
    fake = await startBigQueryServer({ projectId: 'acme-dev' });
    logger = new MemoryLogger();
    store = await storeOn(fake, { logger, labels: { env: 'test' } });
  });
  afterEach(() => fake.stop());

  const queryBodies = () =>
    fake.requests
      .filter((r) => r.method === 'POST' && r.path.endsWith('/queries'))
      .map((r) => r.body as Record<string, unknown>);
  /** The named parameters of a jobs.query body, as the library sends them. */
  const paramsOf = (body: Record<string, unknown>) =>
    body.queryParameters as Array<{
      name: string;
      parameterType: Record<string, unknown>;
      parameterValue: {
        value?: string;
        arrayValues?: Array<{ structValues: Record<string, { value?: unknown }> }>;
      };
    }>;
  const paramOf = (body: Record<string, unknown>, name: string) =>
    paramsOf(body).find((p) => p.name === name)!;
  /** The jobs.insert bodies: statements bounded by a deadline (jobTimeoutMs) go that way. */
  const jobBodies = (server = fake) =>
    server.requests
      .filter((r) => r.method === 'POST' && r.path.endsWith('/jobs'))
      .map((r) => r.body as { configuration: { jobTimeoutMs?: string; query: { query: string } } });
  const jobIds = (server = fake) =>
    jobBodies(server).map((b) => (b as unknown as { jobReference: { jobId: string } }).jobReference.jobId);

  describe('the requests it sends', () => {
    const hostile = 'gs://b/\'; DROP TABLE x; --"`\\#1';

    it('never puts a key, a name or a bucket in the SQL text, even hostile ones', async () => {
      const row = testRow({
        dedup_key: hostile,
        bucket: "bucket'); DELETE FROM t; --",
        object_name: "'; DROP TABLE x; --",
        message_id: "m'1",
      });
      await seenOne(store, hostile);
      await recordOne(store, row);
      const statements = fake.statements();
      expect(statements).toHaveLength(2);
      for (const sql of statements) {
        for (const literal of [
          'DROP TABLE',
          'DELETE FROM',
          "m'1",
          "bucket'",
          'acme-invoices-dev',
          '2026/11',
        ]) {
          expect(sql).not.toContain(literal);
        }
        expect(sql).not.toMatch(/'/); // no string literal of any kind
      }
      expect(statements).toEqual([batchLookupSql(TABLE), batchMergeSql(TABLE)]);
    });

    /** The values of the first row of the first MERGE's `@rows`, by column (the REST representation). */
    const firstRowValues = () => {
      const struct = paramOf(queryBodies()[0]!, 'rows').parameterValue.arrayValues![0]!.structValues;
      return Object.fromEntries(Object.entries(struct).map(([name, v]) => [name, v.value ?? null]));
    };

    it('binds every value as a typed named parameter, nulls included', async () => {
      await recordOne(store, testRow({ reason: null, delivery_attempt: null, analysis: null }));
      expect(queryBodies()[0]!.parameterMode).toBe('named');
      const byName = firstRowValues();
      expect(Object.keys(byName).sort()).toEqual([...COLUMN_NAMES, 'key_day'].sort());
      for (const value of Object.values(byName))
        expect(value === null || typeof value === 'string').toBe(true);
      expect(byName.reason).toBeNull();
      expect(byName.analysis).toBeNull();
      expect(byName.delivery_attempt).toBeNull();
    });

    it('sends generations and INT64 values as decimal strings and the analysis as JSON text', async () => {
      const analysis = { supplier_name: 'Société Générale', total_amount: 1234.56, line_items: [] };
      await recordOne(store, testRow({ generation: '9223372036854775807', size_bytes: 120, analysis }));
      const byName = firstRowValues();
      expect(byName.generation).toBe('9223372036854775807');
      expect(byName.size_bytes).toBe('120');
      expect(JSON.parse(byName.analysis as string)).toEqual(analysis);
    });

    it('caps bytes billed, labels the job, runs in the dataset location and uses GoogleSQL', async () => {
      await seenOne(store, 'gs://b/o#1');
      await recordOne(store, testRow());
      const bodies = queryBodies();
      expect(bodies).toHaveLength(2);
      for (const body of bodies) {
        expect(body.maximumBytesBilled).toBe(String(DELIVERY_DEFAULTS.maximumBytesBilled));
        expect(body.useLegacySql).toBe(false);
        expect(body.location).toBe('EU');
      }
      expect(bodies.map((b) => b.labels)).toEqual([
        { app: 'docline', env: 'test', op: 'seen' },
        { app: 'docline', env: 'test', op: 'record' },
      ]);
    });

    it('authenticates with the client credentials', async () => {
      await seenOne(store, 'gs://b/o#1');
      expect(fake.requests[0]!.headers.authorization).toBe('Bearer fake-token');
    });

    it('interleaving 7: stamps processed_at in the MERGE itself, with the statement time', async () => {
      const merge = batchMergeSql(TABLE);
      const [columns, values] = merge.split('WHEN NOT MATCHED THEN INSERT')[1]!.split(' VALUES ');
      const names = columns!.trim().slice(1, -1).split(', ');
      const inserted = values!.trim().slice(1, -1).split(', ');
      expect(inserted[names.indexOf('processed_at')]).toBe('CURRENT_TIMESTAMP()');
      expect(inserted.filter((v) => v !== 'CURRENT_TIMESTAMP()')).toEqual(
        names.filter((n) => n !== 'processed_at').map((n) => `S.${n}`),
      );
    });

    it('interleaving 3: starts no statement for a delivery with too little time left', async () => {
      await store.recordMany([testRow()], new Deadline(NOW.getTime() + 45_000, clock));
      expect(jobBodies()).toHaveLength(1);
      const late = new Deadline(NOW.getTime() + 1_500, clock);
      await expect(seenOne(store, 'gs://b/o#1', late)).rejects.toBeInstanceOf(DeadlineError);
      await expect(recordOne(store, testRow(), late)).rejects.toMatchObject({ code: 'deadline_exceeded' });
      await expect(store.recordMany([testRow()], late)).rejects.toBeInstanceOf(DeadlineError);
      expect(jobBodies()).toHaveLength(1);
      expect(queryBodies()).toHaveLength(0);
    });

    it('soak I4: bounds every statement of a delivery by its deadline (jobTimeoutMs), so none commits after its 503', async () => {
      const deadline = new Deadline(NOW.getTime() + 45_000, clock);
      const row = testRow();
      expect(await store.recordMany([row], deadline)).toEqual(new Set([row.dedup_key]));
      expect(await seenOne(store, row.dedup_key, deadline)).toBe(true);
      expect(jobBodies().map((b) => [b.configuration.query.query, b.configuration.jobTimeoutMs])).toEqual([
        // The time left, less what a jobs.insert may take to reach BigQuery (its timeout runs from there).
        [batchMergeSql(TABLE), '44000'],
        [batchLookupSql(TABLE), '44000'],
      ]);
      // Without a deadline (tools, tests) a statement is not bounded and keeps jobs.query.
      await seenOne(store, row.dedup_key);
      expect(queryBodies()).toHaveLength(1);
      expect(jobBodies()).toHaveLength(2);
    });

    it("asks for a bounded statement's results again while the job is still queued, instead of answering 503", async () => {
      // A MERGE can wait longer in the table's DML queue than one getQueryResults call waits.
      fake.deferResultsNext(2);
      const row = testRow();
      const deadline = new Deadline(NOW.getTime() + 45_000, clock);
      expect(await store.recordMany([row], deadline)).toEqual(new Set([row.dedup_key]));
      const polls = fake.requests.filter((r) => r.method === 'GET' && /\/queries\/[^/]+$/.test(r.path));
      expect(polls).toHaveLength(3);
      expect(jobBodies()).toHaveLength(1);
    });

    it('prunes every statement to key-day partitions with DATE parameters', async () => {
      expect(batchLookupSql(TABLE)).toMatch(
        /WHERE dedup_key IN UNNEST\(@keys\) AND key_day >= @lookup_since$/,
      );
      expect(batchMergeSql(TABLE, 2)).toContain(
        'ON T.dedup_key = S.dedup_key AND T.key_day = S.key_day AND T.key_day IN (@key_day_0, @key_day_1)',
      );
      expect(winnersSql(TABLE, 1)).toMatch(/AND key_day IN \(@key_day_0\)$/);
      for (const sql of [batchMergeSql(TABLE, 1), batchMergeSql(TABLE, 2)]) {
        expect(sql).toContain('WHEN NOT MATCHED THEN INSERT');
        expect(sql).not.toContain('WHEN MATCHED');
        expect(sql).not.toContain('processed_at >=');
      }

      await seenOne(store, 'gs://b/o#1');
      const since = paramOf(queryBodies()[0]!, 'lookup_since');
      expect(since.parameterType).toEqual({ type: 'DATE' });
      // NOW is 04:00 UTC: six hours back is yesterday, so the lookup reads yesterday's partition too…
      expect(since.parameterValue.value).toBe('2026-11-29');
      // …and from 06:00 on, today's only.
      expect(lookupSinceDay(new Date('2026-11-30T06:00:00Z'))).toBe('2026-11-30');
    });

    it('uses a configured byte cap', async () => {
      const custom = await storeOn(fake, { maximumBytesBilled: 50_000_000 });
      await seenOne(custom, 'gs://b/o#1');
      expect(queryBodies()[0]!.maximumBytesBilled).toBe('50000000');
    });
  });

  describe('the key-day layout', () => {
    it("finds an old event's key in its own day: seen() does not look that far back, the MERGE does", async () => {
      const old = testRow({
        event_time: '2026-11-01T09:00:00.000Z',
        processed_at: '2026-11-01T09:00:05.000Z',
      });
      expect(await recordOne(store, old)).toBe(true);
      expect(fake.rows()[0]!.key_day).toBe('2026-11-01');
      // A month later: the lookup reads the last hours' key days only (a shortcut, not the guarantee)…
      expect(await seenOne(store, old.dedup_key)).toBe(false);
      // …and the MERGE reads the key's own day, whatever its age: no second row.
      expect(await recordOne(store, { ...old, message_id: '77' })).toBe(false);
      expect(await store.recordMany([{ ...old, message_id: '78' }])).toEqual(new Set());
      expect(fake.rows().filter((r) => r.dedup_key === old.dedup_key)).toHaveLength(1);
    });

    it('dates a key by its event, else its publish time, the same on every delivery', () => {
      const now = new Date('2026-12-01T12:00:00Z');
      expect(
        keyDay({ event_time: '2026-11-30T23:59:59.999Z', publish_time: '2026-12-01T00:00:01Z' }, now),
      ).toBe('2026-11-30');
      expect(keyDay({ event_time: null, publish_time: '2026-11-29T10:00:00Z' }, now)).toBe('2026-11-29');
      expect(keyDay({ event_time: null, publish_time: null }, now)).toBe('2026-12-01');
    });

    it('writes a batch of many key days in statements of at most two days, each pruned to its own', async () => {
      const rows = ['2026-12-01', '2026-11-20', '2026-11-30'].map((day) =>
        testRow({ event_time: `${day}T08:00:00.000Z` }),
      );
      const inserted = await store.recordMany(rows);
      expect(inserted).toEqual(new Set(rows.map((r) => r.dedup_key)));
      const merges = queryBodies().filter((b) => String(b.query).startsWith('MERGE'));
      expect(merges.map((b) => b.query)).toEqual([batchMergeSql(TABLE, 2), batchMergeSql(TABLE, 1)]);
      const days = merges.map((b) =>
        paramsOf(b)
          .filter((p) => p.name.startsWith('key_day_'))
          .map((p) => p.parameterValue.value),
      );
      expect(days).toEqual([['2026-12-01', '2026-11-30'], ['2026-11-20']]);
      expect(keyDayGroups(['a', 'b', 'c', 'd'], (x) => ({ a: '3', b: '1', c: '3', d: '2' })[x]!)).toEqual([
        { days: ['3', '2'], rows: ['a', 'c', 'd'] },
        { days: ['1'], rows: ['b'] },
      ]);
    });
  });

  describe('the MERGE outcome', () => {
    it('reads numDmlAffectedRows when the job completes after jobs.query returned', async () => {
      fake.deferNext(2);
      const row = testRow();
      expect(await recordOne(store, row)).toBe(true);
      expect(await recordOne(store, { ...row, message_id: '2' })).toBe(false);
      expect(fake.requests.filter((r) => r.method === 'GET' && r.path.includes('/queries/'))).toHaveLength(2);
    });
  });

  describe('a MERGE whose answer is lost (its outcome is read by its job id)', () => {
    /** A store whose clock moves only when it waits: its deadline comes after that many polls. */
    async function timed() {
      let nowMs = NOW.getTime();
      const moving: Clock = { now: () => new Date(nowMs) };
      const waits: number[] = [];
      const timedStore = await storeOn(fake, {
        logger,
        clock: moving,
        outcomePollMs: 1_000,
        sleep: async (ms) => {
          waits.push(ms);
          nowMs += ms;
        },
      });
      return { store: timedStore, deadline: new Deadline(nowMs + 10_000, moving), waits };
    }
    const jobGets = () => fake.requests.filter((r) => r.method === 'GET' && /\/jobs\/[^/]+$/.test(r.path));

    it.each([
      ['insert', 'reset'],
      ['insert', 503],
      ['results', 'reset'],
      ['results', 503],
    ] as const)(
      'reads the outcome of a MERGE that committed but whose %s answer was lost (%s): inserted, and no second statement',
      async (where, how) => {
        const { store: s, deadline } = await timed();
        const row = testRow();
        fake.loseAnswerNext(1, where, how);
        expect(await s.recordMany([row], deadline)).toEqual(new Set([row.dedup_key]));
        expect(fake.rows()).toHaveLength(1);
        expect(jobBodies()).toHaveLength(1);
        // The id asked for is the one the statement was created with (chosen before jobs.insert).
        const inserted = jobIds()[0];
        expect(jobGets().map((r) => decodeURIComponent(r.path.split('/').pop()!))).toEqual([inserted]);
        // Retried after that, the key is there: the retry answers duplicate instead of a second row.
        expect(await s.recordMany([{ ...row, message_id: 'm-2' }], deadline)).toEqual(new Set());
        expect(fake.rows()).toHaveLength(1);
      },
    );

    it('inserts the statement again under its own id when jobs.get does not find the job after a lost jobs.insert answer: a 409 says it exists, and its outcome is read', async () => {
      const { store: s, deadline } = await timed();
      const row = testRow();
      fake.loseAnswerNext(1, 'insert', 'reset');
      // The job ran, but jobs.get does not see it yet.
      fake.jobGetNext(1, 404);
      expect(await s.recordMany([row], deadline)).toEqual(new Set([row.dedup_key]));
      expect(fake.rows()).toHaveLength(1);
      const ids = jobIds();
      expect(ids).toHaveLength(2);
      expect(ids[1]).toBe(ids[0]);
    });

    it('creates the job itself, under the same id, when the lost jobs.insert never reached BigQuery', async () => {
      const { store: s, deadline } = await timed();
      const row = testRow();
      fake.dropInsertNext(1);
      expect(await s.recordMany([row], deadline)).toEqual(new Set([row.dedup_key]));
      expect(fake.rows()).toHaveLength(1);
    });

    it('keeps the outcome unknown (the lease to its bound) while jobs.get keeps answering 404 and the id cannot be inserted again', async () => {
      const { store: s, deadline } = await timed();
      fake.loseAnswerNext(1, 'insert', 503);
      fake.jobGetNext(100, 404);
      const error = await s.recordMany([testRow()], deadline).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OutcomeUnknownError);
      expect(writeMayStillCommit(error)).toBe(true);
    });

    it('reads the outcome by the job id when a poll of a created job is rate-limited, instead of a 503 that ends the lease while the MERGE may run', async () => {
      const { store: s, deadline } = await timed();
      const row = testRow();
      fake.loseAnswerNext(1, 'results', 429);
      expect(await s.recordMany([row], deadline)).toEqual(new Set([row.dedup_key]));
      expect(jobGets()).toHaveLength(1);
      expect(jobBodies()).toHaveLength(1);
    });

    it("asks the winners query again when its answer is lost, never reading it as a job outcome (no rows: every key 'duplicate')", async () => {
      const { store: s, deadline } = await timed();
      const old = testRow({ message_id: 'earlier' });
      await recordOne(s, old);
      const fresh = testRow();
      fake.loseWinnersNext(1);
      const inserted = await s.recordMany([{ ...old, message_id: 'later' }, fresh], deadline);
      expect([...inserted]).toEqual([fresh.dedup_key]);
    });

    it('asks again while jobs.get fails or the job runs, then reads the outcome', async () => {
      const { store: s, deadline, waits } = await timed();
      fake.loseAnswerNext(1, 'results', 'reset');
      fake.jobGetNext(1, 503);
      fake.jobGetNext(1, 'RUNNING');
      const row = testRow();
      expect(await s.recordMany([row], deadline)).toEqual(new Set([row.dedup_key]));
      expect(jobGets()).toHaveLength(3);
      expect(waits).toEqual([1_000, 1_000]);
    });

    it('answers OutcomeUnknownError (503) when the outcome cannot be read before the deadline: the job may still commit', async () => {
      const { store: s, deadline } = await timed();
      fake.loseAnswerNext(1, 'results', 503);
      fake.jobGetNext(100, 503);
      const error = await s.recordMany([testRow()], deadline).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OutcomeUnknownError);
      expect(error).toMatchObject({ code: 'bigquery_outcome_unknown' });
      expect(writeMayStillCommit(error)).toBe(true);
      // Asked every second from the lost answer until one poll before the deadline (10 s), never past it.
      expect(jobGets().length).toBe(10);
      expect(logger.entries.some((e) => e.message.includes('outcome of a BigQuery MERGE is unknown'))).toBe(
        true,
      );
    });

    it('does not read a lookup whose answer was lost: nothing can commit, it is only transient', async () => {
      const { store: s, deadline } = await timed();
      fake.loseAnswerNext(1, 'results', 503);
      await expect(seenOne(s, 'gs://b/o#1', deadline)).rejects.toMatchObject({
        code: 'bigquery_unavailable',
      });
      expect(jobGets()).toHaveLength(0);
    });
  });

  describe('error mapping', () => {
    /** A 400 as BigQuery answers it: one error of `reason`, its message the answer's. */
    const refusal = (reason: string, message: string) => ({
      code: 400,
      errors: [{ reason, message }],
      message,
    });
    const cases: Array<[BigQueryFailure, typeof TransientError | typeof ConfigurationError, string]> = [
      ['concurrentUpdate', TransientError, 'bigquery_concurrent_update'],
      ['tooManyDml', TransientError, 'bigquery_dml_queue_full'],
      ['rateLimit', TransientError, 'bigquery_rate_limited'],
      ['internalError', TransientError, 'bigquery_unavailable'],
      ['backendError', TransientError, 'bigquery_unavailable'],
      ['bytesBilledLimit', ConfigurationError, 'bigquery_bytes_billed_limit'],
      ['accessDenied', ConfigurationError, 'bigquery_access_denied'],
      ['notFound', ConfigurationError, 'bigquery_not_found'],
    ];

    it('maps a job stopped at its jobTimeoutMs (nothing committed) to a transient error, not a dead letter', () => {
      const stopped = bigQueryError(refusal('timeout', 'Job timed out after 45 sec'), 'record');
      expect(stopped).toBeInstanceOf(TransientError);
      expect((stopped as TransientError).code).toBe('bigquery_timeout');
    });

    it.each(cases)('maps %s on record() to %p (%s)', async (failure, kind, code) => {
      fake.failNext(1, failure);
      const error = await recordOne(store, testRow()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(kind);
      expect(error).not.toBeInstanceOf(RejectionError);
      expect((error as TransientError).code).toBe(code);
      expect(fake.rows()).toHaveLength(0);
      // One request: the library does not retry, Pub/Sub does.
      expect(queryBodies()).toHaveLength(1);
    });

    it.each(cases)('maps %s on seen() to %p (%s)', async (failure, kind, code) => {
      fake.failNext(1, failure);
      const error = await seenOne(store, 'gs://b/o#1').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(kind);
      expect((error as TransientError).code).toBe(code);
    });

    it('succeeds on the delivery after a transient failure', async () => {
      fake.failNext(1, 'concurrentUpdate');
      const row = testRow();
      await expect(recordOne(store, row)).rejects.toBeInstanceOf(TransientError);
      await expect(recordOne(store, row)).resolves.toBe(true);
    });

    it('logs a byte-cap refusal at ERROR with what to change, and does not acknowledge it', async () => {
      fake.setEstimatedBytes(200_000_000);
      const error = await recordOne(store, testRow()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigurationError);
      expect((error as Error).message).toContain('200000000 or higher required');
      expect((error as Error).message).toContain('MAXIMUM_BYTES_BILLED');
      const entry = logger.entries.find((e) => e.severity === 'ERROR');
      expect(entry?.message).toContain('MAXIMUM_BYTES_BILLED');
      expect(entry).toMatchObject({ code: 'bigquery_bytes_billed_limit', operation: 'record' });
    });

    it('fails a batch refused for its byte estimate at once: one statement, no row refused as bad', async () => {
      fake.setEstimatedBytes(200_000_000);
      const batched = new GroupCommitStore(store, { maxRows: 6, maxWaitMs: 0, minIntervalMs: 0 });
      const rows = Array.from({ length: 6 }, () => testRow());
      const settled = await Promise.allSettled(rows.map((r) => batched.record(r)));
      for (const r of settled) {
        expect(r.status).toBe('rejected');
        const reason = (r as PromiseRejectedResult).reason;
        expect(reason).toBeInstanceOf(ConfigurationError);
        expect(reason).not.toBeInstanceOf(RowRefusalError);
        expect(reason.code).toBe('bigquery_bytes_billed_limit');
      }
      expect(batched.statements).toBe(1);
      expect(queryBodies()).toHaveLength(1);
      expect(fake.rows()).toHaveLength(0);
    });

    it('maps a request over the size limit to a row refusal: group commit halves the batch, a row too large alone fails alone', () => {
      for (const failure of [
        refusal('badRequest', 'Request payload size exceeds the limit: 10485760 bytes.'),
        { code: 413, message: 'Request Entity Too Large' },
      ]) {
        const error = bigQueryError(failure, 'record');
        expect(error).toBeInstanceOf(RowRefusalError);
        expect(error).toMatchObject({ code: 'bigquery_request_too_large' });
      }
    });

    it('maps a value a column cannot take to a row refusal, and a refusal of the SQL to a statement refusal', () => {
      const row = bigQueryError(refusal('invalidQuery', 'Bad int64 value: twelve'), 'record');
      expect(row).toBeInstanceOf(RowRefusalError);
      const statement = bigQueryError(
        refusal('invalidQuery', 'Unrecognized name: key_day at [1:80]'),
        'record',
      );
      expect(statement).toBeInstanceOf(ConfigurationError);
      expect(statement).not.toBeInstanceOf(RowRefusalError);
    });

    it('treats an unreachable BigQuery as transient', async () => {
      await fake.stop();
      await expect(seenOne(store, 'gs://b/o#1')).rejects.toBeInstanceOf(TransientError);
      fake = await startBigQueryServer(); // for afterEach
    });
  });

  describe('ping', () => {
    it('reads the table metadata', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
      expect(fake.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
        'GET /bigquery/v2/projects/acme-dev/datasets/docline/tables/rows',
      ]);
    });

    it('fails when the table is missing', async () => {
      fake.failNext(1, 'notFound');
      await expect(store.ping()).rejects.toBeInstanceOf(ConfigurationError);
    });
  });

  describe('configuration', () => {
    it.each([
      ['a table that is not project.dataset.table', { table: 'rows`; DROP TABLE x; --' }],
      ['a byte cap under 10 MiB, which fails every query', { maximumBytesBilled: 1_000_000 }],
    ])('refuses %s', async (_, wrong) => {
      await expect(storeOn(fake, wrong)).rejects.toBeInstanceOf(ConfigurationError);
    });
  });

  describe('batched statements (group commit)', () => {
    const hostile = 'gs://b/\'; DROP TABLE x; --"`\\#1';

    it('sends a whole batch as one MERGE over UNNEST(@rows), every value a typed parameter', async () => {
      const rows = [testRow({ dedup_key: hostile, object_name: "'; DROP TABLE x; --" }), testRow()];
      await store.recordMany(rows);
      const [body] = queryBodies();
      expect(body!.query).toBe(batchMergeSql(TABLE));
      expect(paramOf(body!, 'rows').parameterType).toEqual({
        type: 'ARRAY',
        arrayType: {
          type: 'STRUCT',
          structTypes: [
            ...COLUMNS.map((c) => ({ name: c.name, type: { type: c.type } })),
            { name: 'key_day', type: { type: 'DATE' } },
          ],
        },
      });
      for (const literal of ['DROP TABLE', hostile, rows[1]!.message_id]) {
        expect(String(body!.query)).not.toContain(literal);
      }
      expect(paramOf(body!, 'key_day_0').parameterType).toEqual({ type: 'DATE' });
    });

    it('looks many keys up in one query with the key-day filter', async () => {
      await store.recordMany([testRow({ dedup_key: hostile })]);
      const found = await store.seenMany([hostile, 'gs://b/other#1']);
      expect([...found]).toEqual([hostile]);
      const lookup = queryBodies().at(-1)!;
      expect(lookup.query).toBe(batchLookupSql(TABLE));
      expect(String(lookup.query)).not.toContain('DROP');
    });

    it('asks who won only when BigQuery inserted fewer rows than the batch held', async () => {
      const old = testRow({ message_id: 'earlier' });
      await recordOne(store, old);
      const all = [testRow(), testRow()];
      await store.recordMany(all);
      // Every row went in: no follow-up.
      expect(fake.statements()).toEqual([batchMergeSql(TABLE), batchMergeSql(TABLE)]);
      const fresh = testRow();
      const inserted = await store.recordMany([{ ...old, message_id: 'later' }, fresh]);
      expect([...inserted]).toEqual([fresh.dedup_key]);
      expect(fake.statements().slice(2)).toEqual([batchMergeSql(TABLE), winnersSql(TABLE)]);
    });

    it('names its MERGE jobs by writer, and counts the instances that wrote in the last minute with jobs.list', async () => {
      let nowMs = NOW.getTime();
      const own = await startBigQueryServer({ projectId: 'acme-dev', now: () => new Date(nowMs) });
      try {
        const at = { now: () => new Date(nowMs) };
        const [a, b, idle] = await Promise.all([0, 1, 2].map(() => storeOn(own, { clock: at })));
        const deadline = () => new Deadline(nowMs + 45_000, at);
        await a!.recordMany([testRow()], deadline());
        await a!.recordMany([testRow()], deadline());
        await b!.recordMany([testRow()], deadline());
        const ids = jobIds(own);
        expect(ids).toHaveLength(3);
        for (const id of ids) expect(id).toMatch(/^docline_w_[0-9a-f]+_/);
        expect(new Set(ids.map((id) => id.split('_')[2])).size).toBe(2);
        // a and b wrote; the idle store counts itself too.
        expect(await a!.writers(deadline())).toBe(2);
        expect(await idle!.writers(deadline())).toBe(3);
        const list = own.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/jobs')).at(-1)!;
        expect(list.query).toMatchObject({ projection: 'minimal', minCreationTime: String(nowMs - 60_000) });
        // A minute later, only b writes again: a counts b and itself.
        nowMs += 61_000;
        await b!.recordMany([testRow()], deadline());
        expect(await a!.writers(deadline())).toBe(2);
        expect(await idle!.writers(deadline())).toBe(2);
        // A lookup is not a write: it names no job.
        await idle!.seenMany(['gs://b/x#1'], deadline());
        expect(await a!.writers(deadline())).toBe(2);
      } finally {
        await own.stop();
      }
    });

    it('maps a refused batch to the same errors as a single MERGE', async () => {
      fake.failNext(1, 'tooManyDml');
      await expect(store.recordMany([testRow()])).rejects.toMatchObject({ code: 'bigquery_dml_queue_full' });
      await expect(
        store.recordMany([testRow({ size_bytes: 'twelve' as unknown as number }), testRow()]),
      ).rejects.toBeInstanceOf(ConfigurationError);
      expect(fake.rows()).toHaveLength(0);
    });
  });
});
