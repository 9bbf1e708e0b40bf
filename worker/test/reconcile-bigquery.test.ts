import type { BigQuery } from '@google-cloud/bigquery';
import { type BigQueryServer, localBigQuery, startBigQueryServer, storedRow } from '../../sim/bigquery-rest';
import { BigQueryLineIndex, reconcileSql } from '../src/reconcile/cloud-sources';
import { RECONCILE_EXIT } from '../src/reconcile/reconcile';
import { runReconcile } from '../src/reconcile/run';
import { testRow } from './support/builders';
import { clock, MemoryLister, object, options } from './support/reconcile-fakes';

/*
 * The reconcile query through @google-cloud/bigquery against sim/bigquery-rest.ts: what the library sends
 * (typed parameters, the partition filter, the byte cap, labels, location) and how the answers and
 * errors come back. The fake recognises the query by its parameters and runs its meaning.
 */

const TABLE = 'acme-dev.docline.rows';
const SINCE = new Date('2026-11-30T10:00:00.000Z');

const rowOf = (
  bucket: string,
  name: string,
  generation: string,
  processedAt: string,
  status: 'ok' | 'rejected' = 'ok',
) =>
  storedRow(
    testRow({
      bucket,
      object_name: name,
      generation,
      object_uri: `gs://${bucket}/${name}#${generation}`,
      dedup_key: `gs://${bucket}/${name}#${generation}`,
      status,
      // An object's row carries its creation as the event time, hence its key day.
      event_time: processedAt,
      processed_at: processedAt,
    }),
  );

describe('the reconcile query on BigQuery', () => {
  let fake: BigQueryServer;
  let bigquery: BigQuery;

  beforeEach(async () => {
    fake = await startBigQueryServer();
    bigquery = await localBigQuery(fake.url, fake.projectId);
  });
  afterEach(() => fake.stop());

  const index = (maximumBytesBilled = 100_000_000) =>
    new BigQueryLineIndex({
      bigquery,
      table: TABLE,
      location: 'EU',
      maximumBytesBilled,
      raiseCapHint: '--maximum-bytes-billed N',
    });

  it('reads only the partitions since the oldest object, with every value a typed parameter', () => {
    const sql = reconcileSql(TABLE);
    expect(sql).toBe(
      'SELECT DISTINCT object_uri FROM `acme-dev.docline.rows` WHERE key_day >= DATE(@since) AND bucket = @bucket AND STARTS_WITH(object_name, @prefix)',
    );
    expect(sql).not.toMatch(/'|"|\d{4}-/);
    expect(reconcileSql(TABLE, { bounded: true })).toBe(
      'SELECT DISTINCT object_uri FROM `acme-dev.docline.rows` WHERE key_day >= DATE(@since) AND key_day < DATE(@until) AND bucket = @bucket AND STARTS_WITH(object_name, @prefix)',
    );
  });

  it('sends the parameters, the byte cap, the labels and the location, and returns the URIs of rows of any status', async () => {
    fake.addRow(TABLE, rowOf('acme', 'in/a.pdf', '1', '2026-11-30T11:00:00.000Z'));
    fake.addRow(TABLE, rowOf('acme', 'in/b.pdf', '1', '2026-11-30T11:00:00.000Z', 'rejected'));
    // Partitions are days: a row of the day before the oldest object's day is not read.
    fake.addRow(TABLE, rowOf('acme', 'in/old.pdf', '1', '2026-11-29T23:59:59.999Z'));
    fake.addRow(TABLE, rowOf('other', 'in/c.pdf', '1', '2026-11-30T11:00:00.000Z'));
    fake.addRow(TABLE, rowOf('acme', 'out/d.pdf', '1', '2026-11-30T11:00:00.000Z'));

    const uris = await index(50_000_000).objectUris({ bucket: 'acme', prefix: 'in/', since: SINCE });

    expect([...uris].sort()).toEqual(['gs://acme/in/a.pdf#1', 'gs://acme/in/b.pdf#1']);
    const request = fake.requests.find((r) => r.method === 'POST')!.body as Record<string, unknown>;
    expect(request).toMatchObject({
      query: reconcileSql(TABLE),
      useLegacySql: false,
      maximumBytesBilled: '50000000',
      labels: { app: 'docline', op: 'reconcile' },
      location: 'EU',
    });
    const params = (
      request.queryParameters as Array<{
        name: string;
        parameterType: { type: string };
        parameterValue: { value: string };
      }>
    )
      .map((p) => [p.name, p.parameterType.type, p.parameterValue.value])
      .sort();
    expect(params).toEqual([
      ['bucket', 'STRING', 'acme'],
      ['prefix', 'STRING', 'in/'],
      ['since', 'TIMESTAMP', expect.stringMatching(/^2026-11-30[T ]10:00:00(\.000)?/)],
    ]);
  });

  /** Runs reconcile over `in/` with a 20,000-byte cap, listing these objects. */
  const runUnderSmallCap = (objects: ReturnType<typeof object>[], lines: string[] = []) =>
    runReconcile(options({ prefix: 'in/', olderThanMs: 0, maximumBytesBilled: 20_000 }), {
      lister: new MemoryLister(objects),
      index: index(20_000),
      clock,
      print: (line) => lines.push(line),
    });
  const posts = (dryRun: boolean) =>
    fake.requests
      .filter(
        (r) =>
          r.method === 'POST' &&
          Boolean((r.body as { configuration?: { dryRun?: boolean } }).configuration?.dryRun) === dryRun,
      )
      .map((r) => r.body as Record<string, unknown>);
  /** 30 days of rows under other prefixes, 50 a day: an old object under in/ makes a statement read them. */
  const addMonthOfOtherRows = () => {
    for (let d = 0; d < 30; d++)
      for (let i = 0; i < 50; i++)
        fake.addRow(
          TABLE,
          rowOf(
            'acme',
            `2026/${d}/${i}.pdf`,
            '1',
            new Date(Date.parse('2026-11-30T11:00:00.000Z') - d * 86_400_000).toISOString(),
          ),
        );
  };

  it("splits a comparison whose dry run is over the cap (other prefixes' rows included) into statements by key day, each under it, and finds the rows of every day", async () => {
    addMonthOfOtherRows();
    // Listed objects under in/ across the month: every third has its row, on its creation day.
    const listed = Array.from({ length: 30 }, (_, d) => object(`in/${d}.pdf`, d * 24 * 60 + 60));
    listed.forEach((o, d) => {
      if (d % 3 === 0) fake.addRow(TABLE, rowOf('acme', o.name, o.generation, o.timeCreated));
    });
    // The fake checks a statement that runs against the estimate a test sets: one under this small cap.
    fake.setEstimatedBytes(1);
    const whole = await index(20_000).estimateBytes({
      bucket: 'acme',
      prefix: 'in/',
      since: new Date(listed.at(-1)!.timeCreated),
    });
    expect(whole).toBeGreaterThan(20_000);
    fake.requests.length = 0;

    const lines: string[] = [];
    const result = await runUnderSmallCap(listed, lines);

    expect(result.error).toBeUndefined();
    expect(result.report).toMatchObject({ listed: 30, withLine: 10, missing: 20, orphanRows: 0 });
    const ran = posts(false);
    expect(ran.length).toBe(result.report!.comparisonQueries);
    expect(ran.length).toBeGreaterThanOrEqual(Math.ceil(whole / 20_000));
    // What ran is what was dry-run and found under the cap, the statements side by side by key day.
    let estimated = 0;
    for (const statement of ran) {
      const params = Object.fromEntries(
        (statement.queryParameters as Array<{ name: string; parameterValue: { value: string } }>).map((p) => [
          p.name,
          p.parameterValue.value,
        ]),
      );
      const bounded = params.until !== undefined;
      expect(statement.query).toBe(reconcileSql(TABLE, { bounded }));
      const estimate = await index(20_000).estimateBytes({
        bucket: 'acme',
        prefix: 'in/',
        since: new Date(params.since!),
        ...(bounded ? { until: new Date(params.until!) } : {}),
      });
      expect(estimate).toBeLessThanOrEqual(20_000);
      estimated += estimate;
    }
    expect(estimated).toBe(whole);
    expect(result.report!.comparisonEstimateBytes).toBe(whole);
    expect(lines[1]).toMatch(
      new RegExp(
        `^the comparison ran as ${ran.length} queries by key day, each under the byte cap, estimated at ${whole} bytes together \\(dry runs\\)$`,
      ),
    );
  });

  it('runs one statement when the dry run is under the cap', async () => {
    addMonthOfOtherRows();
    fake.setEstimatedBytes(1);
    const lines: string[] = [];
    const recent = await runUnderSmallCap([object('in/a.pdf', 10)], lines);
    expect(recent.error).toBeUndefined();
    expect(recent.report?.comparisonEstimateBytes).toBeGreaterThan(0);
    expect(recent.report?.comparisonEstimateBytes).toBeLessThanOrEqual(20_000);
    expect(posts(false)).toHaveLength(1);
    expect(posts(false)[0]!.query).toBe(reconcileSql(TABLE));
    expect(lines[1]).toBe(
      `the comparison query was estimated at ${recent.report?.comparisonEstimateBytes} bytes (a dry run)`,
    );
  });

  it('refuses, before running any statement, a run in which one key day alone is over the cap, and says to raise the cap', async () => {
    // 400 rows of other prefixes on 2026-11-20: that day's partition alone is over 20,000 bytes.
    for (let i = 0; i < 400; i++)
      fake.addRow(TABLE, rowOf('acme', `2026/11/20/${i}.pdf`, '1', '2026-11-20T09:00:00.000Z'));
    const result = await runUnderSmallCap([object('in/a.pdf', 14 * 24 * 60)]);
    expect(result.error?.code).toBe('bytes_billed_limit');
    expect(result.error?.message).toMatch(
      /^the comparison of key day 2026-11-20 alone is estimated at \d+ bytes \(a dry run: that day's rows, whatever the prefix\), over the byte cap of 20000 bytes: BigQuery would refuse it\. .*raise the cap for this run \(--maximum-bytes-billed; MAXIMUM_BYTES_BILLED for the job\)/,
    );
    expect(posts(false)).toEqual([]);
  });

  it('fails with one line naming the flag that raises the byte cap', async () => {
    fake.setEstimatedBytes(300_000_000);
    const lines: string[] = [];
    const result = await runReconcile(options({ olderThanMs: 0 }), {
      lister: new MemoryLister([object('a.pdf', 120)]),
      index: index(100_000_000),
      clock,
      print: (line) => lines.push(line),
    });
    expect(result.code).toBe(RECONCILE_EXIT.error);
    expect(result.error?.code).toBe('bytes_billed_limit');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^ERROR: BigQuery refused the reconcile query: .*byte cap of 100000000 bytes.*Raise it with --maximum-bytes-billed N/,
    );
    expect(lines[0]).toMatch(/300000000 or higher required/);
    expect(lines[0]).not.toContain('\n');
  });

  it('turns a permission error into one line', async () => {
    fake.failNext(1, 'accessDenied');
    await expect(index().objectUris({ bucket: 'acme', prefix: '', since: SINCE })).rejects.toMatchObject({
      code: 'query_failed',
      message: expect.stringMatching(
        /^BigQuery denied the reconcile query \(Access Denied: .*\): grant .*roles\/bigquery\.dataViewer .*roles\/bigquery\.jobUser/,
      ),
    });
  });
});
