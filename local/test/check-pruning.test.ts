/**
 * The post-deploy pruning check (local/lib/pruning-check.ts) against sim/bigquery-rest.ts, whose dry runs
 * estimate the partitions a statement's key-day filter names (the whole table without one): the
 * worker's statements pass on a month-old table, a MERGE without its key-day filter fails, a young
 * table is said to be too young to tell, and what is dry-run is what the store sends.
 */
import type { BigQuery } from '@google-cloud/bigquery';
import {
  type BigQueryServer,
  localBigQuery,
  type StoredRow,
  startBigQueryServer,
  storedRow,
} from '../../sim/bigquery-rest';
import { BigQueryStore, lookupSinceDay } from '../../worker/src/adapters/stores/bigquery-store';
import { testRow } from '../../worker/test/support/builders';
import { checkPruning, type PruningStatement, pruningStatements } from '../lib/pruning-check';

const NOW = new Date('2026-12-03T15:00:00.000Z');
const DAY_MS = 86_400_000;
const TABLE = 'acme-dev.docline.rows';
const PER_DAY = 20;

const dayOf = (daysAgo: number) => new Date(NOW.getTime() - daysAgo * DAY_MS).toISOString().slice(0, 10);
/** What the fake's dry run counts per row: `dedup_key` (2 + its bytes) + `key_day` (8). */
const keyBytes = (rows: StoredRow[]) =>
  rows.reduce((n, r) => n + 2 + Buffer.byteLength(r.dedup_key ?? '', 'utf8') + 8, 0);

let fake: BigQueryServer | undefined;
afterEach(async () => {
  await fake?.stop();
  fake = undefined;
});

/** A fake table `days` days old holding {@link PER_DAY} rows in each of its key days. */
async function tableOf(days: number): Promise<{ fake: BigQueryServer; bigquery: BigQuery }> {
  fake = await startBigQueryServer({
    projectId: 'acme-dev',
    now: () => NOW,
    tableCreatedAt: new Date(NOW.getTime() - days * DAY_MS),
  });
  for (let d = 0; d < days; d++)
    for (let i = 0; i < PER_DAY; i++)
      fake.addRow(TABLE, {
        ...storedRow(testRow({ dedup_key: `gs://b/${dayOf(d)}/invoice-${i}.pdf#1` })),
        key_day: dayOf(d),
      });
  const bigquery = await localBigQuery(fake.url, fake.projectId);
  return { fake, bigquery };
}

/** The check of {@link TABLE} at {@link NOW}, on these statements (by default the worker's). */
const check = (bigquery: BigQuery, statements?: PruningStatement[]) =>
  checkPruning({ bigquery, table: TABLE, now: NOW, statements });

/** The check's statements with the batched MERGE's key-day filter dropped (the target then reads every partition). */
function withoutMergeFilter(bigquery: BigQuery): PruningStatement[] {
  return pruningStatements(bigquery, TABLE, NOW).map((s) => {
    if (s.name !== 'batched MERGE (group commit)') return s;
    const query = String(s.statement.query).replace(/ AND T\.key_day IN \([^)]*\)/, '');
    expect(query).not.toBe(s.statement.query);
    return { ...s, statement: { ...s.statement, query } };
  });
}

describe('checkPruning', () => {
  it('passes on a month-old table, each statement estimated at only the key days it names', async () => {
    const { fake, bigquery } = await tableOf(30);
    const verdict = await check(bigquery);
    const today = keyBytes(fake.rows().filter((r) => r.key_day === dayOf(0)));
    const sinceLookup = keyBytes(fake.rows().filter((r) => r.key_day! >= lookupSinceDay(NOW)));
    expect(verdict.results.map((r) => [r.name, r.estimateBytes, r.conclusive])).toEqual([
      ['batched lookup (group commit)', sinceLookup, true],
      ['batched MERGE (group commit)', today, true],
    ]);
    expect(verdict.ok).toBe(true);
    expect(verdict.lines.join('\n')).not.toMatch(/FAILED|inconclusive/);
  });

  it('fails, naming the statement, when the MERGE has no key-day filter (it reads the whole table)', async () => {
    const { fake, bigquery } = await tableOf(30);
    const verdict = await check(bigquery, withoutMergeFilter(bigquery));
    const merge = verdict.results.find((r) => r.name === 'batched MERGE (group commit)')!;
    expect(merge.estimateBytes).toBe(keyBytes(fake.rows()));
    expect(merge.estimateBytes).toBeGreaterThan(merge.predictedBytes);
    expect(verdict.ok).toBe(false);
    expect(verdict.lines.at(-1)).toMatch(
      /^check-pruning FAILED: batched MERGE \(group commit\) \(\d+ > \d+ bytes\): .* does not prune .*key_day parameters/,
    );
  });

  it('passes a table too young to tell a pruned statement from an unpruned one, and says so', async () => {
    const { bigquery } = await tableOf(2);
    const verdict = await check(bigquery, withoutMergeFilter(bigquery));
    expect(verdict.ok).toBe(true);
    expect(verdict.results.every((r) => !r.conclusive)).toBe(true);
    expect(verdict.lines[1]).toMatch(/inconclusive: the table is too young .* more than 3 days of rows/);
  });

  it("fails with BigQuery's words when a statement does not fit the table", async () => {
    const { bigquery } = await tableOf(30);
    const [lookup] = pruningStatements(bigquery, TABLE, NOW);
    const broken = {
      ...lookup!,
      statement: { ...lookup!.statement, types: { keys: ['STRING'], lookup_since: 'STRING' } },
    };
    const verdict = await check(bigquery, [broken]);
    expect(verdict.ok).toBe(false);
    expect(verdict.lines).toEqual([
      expect.stringMatching(
        /^check-pruning FAILED: BigQuery refused the dry run of the batched lookup \(group commit\) on acme-dev\.docline\.rows: .*lookup_since/,
      ),
    ]);
  });
});

describe('pruningStatements', () => {
  it('are the statements the store sends: same SQL, same parameter names and types', async () => {
    const { fake, bigquery } = await tableOf(3);
    const store = new BigQueryStore({ bigquery, table: TABLE, clock: { now: () => NOW } });
    const row = testRow({ event_time: NOW.toISOString() });
    await store.seenMany([row.dedup_key]);
    await store.recordMany([row]);
    await check(bigquery);
    const shape = (q: {
      query?: unknown;
      queryParameters?: Array<{ name: string; parameterType: unknown }>;
    }) => ({
      query: q.query,
      parameters: (q.queryParameters ?? []).map((p) => [p.name, p.parameterType]),
    });
    const sent = fake.requests
      .filter((r) => r.method === 'POST' && r.path.endsWith('/queries'))
      .map((r) => shape(r.body as never));
    const dryRuns = fake.requests
      .filter((r) => (r.body as { configuration?: { dryRun?: boolean } })?.configuration?.dryRun === true)
      .map((r) => shape((r.body as { configuration: { query: never } }).configuration.query))
      .slice(1); // the first dry run measures the whole table's keys
    expect(sent).toHaveLength(2);
    expect(dryRuns).toEqual(sent);
  });
});
