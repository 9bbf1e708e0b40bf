import { derivedMaximumBytesBilled } from '../src/contract/cost-model';
import { parsePush } from '../src/core/event';
import { jobLogLine, main as jobMain } from '../src/reconcile/main';
import { type ObjectResource, objectUri, RECONCILE_ATTRIBUTE } from '../src/reconcile/notification';
import {
  APPLY_CONFIRM_THRESHOLD,
  type ComparisonQuery,
  comparisonLeastBytes,
  estimateCost,
  findMissing,
  type LineIndex,
  type ObjectLister,
  PUBLISH_BATCH,
  parseDuration,
  RECONCILE_EXIT,
} from '../src/reconcile/reconcile';
import { type RunOptions, runReconcile } from '../src/reconcile/run';
import {
  clock,
  DryRunIndex,
  MemoryIndex,
  MemoryLister,
  NOW,
  object,
  options,
  RecordingPublisher,
} from './support/reconcile-fakes';

const HOUR_MS = 60 * 60 * 1000;
const uri = (name: string, generation = '1764460800123456') => `gs://acme/${name}#${generation}`;

async function run(
  objects: ReturnType<typeof object>[],
  rows: Array<{ uri: string; processedAt: Date }>,
  over: Partial<RunOptions> = {},
  lister: ObjectLister = new MemoryLister(objects),
) {
  const lines: string[] = [];
  const publisher = new RecordingPublisher();
  const index = new MemoryIndex(rows);
  const result = await runReconcile(options(over), {
    lister,
    index,
    publisher,
    clock,
    print: (line) => lines.push(line),
  });
  return { result, lines, publisher, index };
}

describe('findMissing', () => {
  /** The report over the whole bucket, these objects listed, these rows in the table. */
  const missingIn = (objects: ObjectResource[], rows: Array<{ uri: string; processedAt: Date }> = []) =>
    findMissing(
      { prefix: '', olderThanMs: HOUR_MS },
      { lister: new MemoryLister(objects), index: new MemoryIndex(rows), clock },
    );

  it('counts an object with a row of any status as having its line, on the exact object URI', async () => {
    const objects = [object('a.pdf', 120), object('b.pdf', 120), object('c.pdf', 120, '2')];
    // c.pdf has a row for another generation only: that is not its line.
    const rows = [
      { uri: uri('a.pdf'), processedAt: NOW },
      { uri: uri('c.pdf', '1'), processedAt: NOW },
    ];
    const report = await missingIn(objects, rows);
    expect(report).toMatchObject({ listed: 3, withLine: 1, missing: 2, tooYoung: 0, orphanRows: 1 });
    expect(report.missingObjects.map((o) => o.name)).toEqual(['b.pdf', 'c.pdf']);
  });

  it('leaves objects younger than --older-than to judge later', async () => {
    const report = await missingIn([object('old.pdf', 61), object('new.pdf', 59)]);
    expect(report).toMatchObject({ listed: 2, missing: 1, tooYoung: 1 });
  });

  it('asks for rows since the oldest listed object only, of that bucket and prefix, across every page', async () => {
    const lister = new MemoryLister([
      object('in/x.pdf', 30),
      object('in/y.pdf', 300),
      object('in/z.pdf', 90),
      object('out.pdf', 900),
    ]);
    const index = new MemoryIndex([]);
    const report = await findMissing({ prefix: 'in/', olderThanMs: HOUR_MS }, { lister, index, clock });
    expect(report.listed).toBe(3);
    expect(lister.pagesServed).toBe(2);
    expect(index.queries).toEqual([
      { bucket: 'acme', prefix: 'in/', since: new Date(NOW.getTime() - 300 * 60_000) },
    ]);
  });
});

describe('runReconcile', () => {
  it('exits 0 when every document has its line and 1 when one is missing', async () => {
    const done = await run([object('a.pdf', 120)], [{ uri: uri('a.pdf'), processedAt: NOW }]);
    expect(done.result.code).toBe(RECONCILE_EXIT.ok);
    const missing = await run(
      [object('a.pdf', 120), object('b.pdf', 120)],
      [{ uri: uri('a.pdf'), processedAt: NOW }],
    );
    expect(missing.result.code).toBe(RECONCILE_EXIT.missing);
    expect(missing.lines[0]).toBe(
      'reconcile gs://acme/: 2 objects listed, 1 with a line, 1 missing, 0 too young to judge, 0 rows whose object is gone (for information)',
    );
    expect(missing.lines).toContain(
      `missing  ${uri('b.pdf')}  (created ${object('b.pdf', 120).timeCreated})`,
    );
    expect(missing.publisher.messages).toHaveLength(0);
  });

  it('exits 2 with one line when the listing fails', async () => {
    const failing: ObjectLister = {
      bucket: 'acme',
      // biome-ignore lint/correctness/useYield: a listing that fails before its first page
      async *pages() {
        throw new Error(
          '403 Forbidden: reconcile@p.iam.gserviceaccount.com has no storage.objects.list\nmore',
        );
      },
    };
    const { result, lines } = await run([], [], {}, failing);
    expect(result.code).toBe(RECONCILE_EXIT.error);
    expect(lines).toEqual([
      'ERROR: cannot list gs://acme/: 403 Forbidden: reconcile@p.iam.gserviceaccount.com has no storage.objects.list',
    ]);
  });

  it('announces each missing object with the exact OBJECT_FINALIZE notification plus the reconcile attribute', async () => {
    const b = object('b.pdf', 120);
    const { result, publisher, lines } = await run([b], [], { apply: true });
    expect(result.code).toBe(RECONCILE_EXIT.ok);
    const [message] = publisher.messages;
    expect(message!.attributes).toEqual({
      notificationConfig: 'projects/_/buckets/acme/notificationConfigs/1',
      eventType: 'OBJECT_FINALIZE',
      payloadFormat: 'JSON_API_V1',
      bucketId: 'acme',
      objectId: 'b.pdf',
      objectGeneration: b.generation,
      eventTime: b.timeCreated,
      [RECONCILE_ATTRIBUTE]: NOW.toISOString(),
    });
    expect(JSON.parse(message!.data.toString())).toEqual(b);
    // The worker parses it as the same document, keyed by the object.
    const event = parsePush({
      message: {
        data: message!.data.toString('base64'),
        attributes: message!.attributes,
        messageId: '99',
        publishTime: NOW.toISOString(),
      },
      subscription: 'projects/p/subscriptions/s',
    });
    expect(event).toMatchObject({ kind: 'document' });
    expect(lines.some((l) => /^1 document\(s\) to announce; estimated cost \$/.test(l))).toBe(true);
  });

  it('refuses --apply in message mode, with the reason, before publishing anything', async () => {
    const { result, publisher, lines } = await run([object('b.pdf', 120)], [], {
      apply: true,
      dedupKeyMode: 'message',
    });
    expect(result.code).toBe(RECONCILE_EXIT.error);
    expect(result.error?.code).toBe('message_mode');
    expect(lines.join('\n')).toMatch(/DEDUP_KEY=message.*every new message is new work/);
    expect(publisher.messages).toHaveLength(0);
  });

  it('still reports in message mode', async () => {
    const { result } = await run([object('b.pdf', 120)], [], { dedupKeyMode: 'message' });
    expect(result.code).toBe(RECONCILE_EXIT.missing);
  });

  it(`needs --yes above ${APPLY_CONFIRM_THRESHOLD} documents, and publishes in batches with it`, async () => {
    const many = Array.from({ length: APPLY_CONFIRM_THRESHOLD + 1 }, (_, i) => object(`doc-${i}.pdf`, 120));
    const refused = await run(many, [], { apply: true });
    expect(refused.result.code).toBe(RECONCILE_EXIT.error);
    expect(refused.result.error?.code).toBe('needs_yes');
    expect(refused.lines.at(-1)).toMatch(/--apply would announce 101 documents .* add --yes/);
    expect(refused.publisher.messages).toHaveLength(0);

    const confirmed = await run(many, [], { apply: true, yes: true });
    expect(confirmed.result.code).toBe(RECONCILE_EXIT.ok);
    expect(confirmed.publisher.batches.map((b) => b.length)).toEqual([PUBLISH_BATCH, 1]);
    expect(confirmed.result.announced).toHaveLength(101);
  });

  it(`applies ${APPLY_CONFIRM_THRESHOLD} documents without --yes`, async () => {
    const exactly = Array.from({ length: APPLY_CONFIRM_THRESHOLD }, (_, i) => object(`doc-${i}.pdf`, 120));
    const { result, publisher } = await run(exactly, [], { apply: true });
    expect(result.code).toBe(RECONCILE_EXIT.ok);
    expect(publisher.messages).toHaveLength(APPLY_CONFIRM_THRESHOLD);
  });

  it('prints one JSON document with --json', async () => {
    const { lines } = await run([object('a.pdf', 120), object('b.pdf', 10)], [], { json: true });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toEqual({
      bucket: 'acme',
      prefix: '',
      listed: 2,
      withLine: 0,
      missing: 1,
      tooYoung: 1,
      orphanRows: 0,
      missingObjects: [uri('a.pdf')],
    });
  });
});

describe('the comparison query and the byte cap', () => {
  // 2,000 objects over 400 days: what a whole-bucket run at volume looks like, scaled down.
  const objects = Array.from({ length: 2_000 }, (_, i) =>
    object(`2025/${String(i).padStart(6, '0')}.pdf`, i * 288),
  );

  /** A run over `listed` (in pages of `page`) against `index`, under a byte cap of `cap`. */
  const capped = (
    listed: ObjectResource[],
    index: LineIndex,
    cap: number,
    print: (line: string) => void = () => {},
    page = 500,
    extra: Partial<RunOptions> = {},
  ) =>
    runReconcile(options({ maximumBytesBilled: cap, ...extra }), {
      lister: new MemoryLister(listed, page),
      index,
      clock,
      print,
    });

  /** The listed objects created in a statement's range. */
  const objectsOf = (q: ComparisonQuery, all: readonly ObjectResource[]) =>
    all.filter((o) => {
      const t = Date.parse(o.timeCreated);
      return t >= q.since.getTime() && (q.until === undefined || t < q.until.getTime());
    });

  /** The statements cover every day from the oldest object's creation on, each once, in order. */
  const expectContiguousFrom = (queries: readonly ComparisonQuery[], all: readonly ObjectResource[]) => {
    expect(queries[0]!.since.getTime()).toBe(Math.min(...all.map((o) => Date.parse(o.timeCreated))));
    for (let i = 1; i < queries.length; i++) {
      expect(queries[i - 1]!.until).toEqual(queries[i]!.since);
      expect(queries[i]!.since.getTime() % 86_400_000).toBe(0);
    }
    expect(queries.at(-1)!.until).toBeUndefined();
  };

  it('counts the least bytes the query reads: object_uri, bucket, object_name and key_day of the listed rows', () => {
    const one = object('2026/11/facture-0042.pdf', 90);
    const uriBytes = Buffer.byteLength(`gs://acme/2026/11/facture-0042.pdf#1764460800123456`);
    expect(comparisonLeastBytes([one])).toBe(2 + uriBytes + 2 + 4 + 2 + 24 + 8);
  });

  it('splits a run whose listed objects alone are over the cap into statements by key day, contiguous from the oldest object on', async () => {
    const index = new MemoryIndex([]);
    const cap = comparisonLeastBytes(objects) - 1;
    const result = await capped(objects, index, cap);
    expect(result.error).toBeUndefined();
    expect(result.report).toMatchObject({ listed: 2_000, missing: 1_999, tooYoung: 1, comparisonQueries: 2 });
    expectContiguousFrom(index.queries, objects);
    // Without a dry run, a statement's size is the least bytes of the objects of its days.
    for (const q of index.queries)
      expect(comparisonLeastBytes(objectsOf(q, objects))).toBeLessThanOrEqual(cap);
  });

  it('finds the line of every object whichever statement reads it', async () => {
    const rows = objects
      .filter((_, i) => i % 3 === 0)
      .map((o) => ({ uri: objectUri(o), processedAt: new Date(o.timeCreated) }));
    const index = new MemoryIndex(rows);
    const result = await capped(objects, index, comparisonLeastBytes(objects.slice(0, 300)));
    expect(result.error).toBeUndefined();
    expect(index.queries.length).toBeGreaterThan(4);
    expect(result.report).toMatchObject({
      withLine: rows.length,
      missing: 2_000 - rows.length,
      orphanRows: 0,
    });
  });

  it('refuses before querying a run in which one day alone is over the cap, and says to raise the cap', async () => {
    const sameDay = Array.from({ length: 50 }, (_, i) => object(`2026/11/30/${i}.pdf`, 120 + i));
    const index = new MemoryIndex([]);
    const result = await capped(sameDay, index, comparisonLeastBytes(sameDay) - 1);
    expect(result.code).toBe(RECONCILE_EXIT.error);
    expect(result.error?.code).toBe('bytes_billed_limit');
    expect(result.error?.message).toMatch(
      /^the comparison must read key day 2026-11-30 whole: at least \d+ bytes for the rows of the 50 objects listed from that day alone, over the byte cap of \d+ bytes: BigQuery would refuse it\. .*raise the cap for this run \(--maximum-bytes-billed; MAXIMUM_BYTES_BILLED for the job\)/,
    );
    expect(index.queries).toEqual([]);
  });

  it('at a million documents a day, compares a month-old bucket whole under the derived cap, in statements by key day', async () => {
    // A day of rows at that volume, with names like the date-shaped ones a bucket holds: what a dry
    // run of a range reports (every row of its days, of any prefix). One object a day is listed.
    const perDay = 1_000_000 * comparisonLeastBytes([object('2026/11/30/invoice-0000001.pdf', 0)]);
    const cap = derivedMaximumBytesBilled(1_000_000);
    expect(perDay * 30).toBeGreaterThan(cap);
    const month = Array.from({ length: 30 }, (_, d) =>
      object(`2026/11/${String(d).padStart(2, '0')}/invoice-0000001.pdf`, d * 24 * 60 + 90),
    );
    const index = new DryRunIndex(perDay);
    const result = await capped(month, index, cap);
    expect(result.error).toBeUndefined();
    expect(result.report!.comparisonQueries).toBeGreaterThanOrEqual(Math.ceil((perDay * 30) / cap));
    expectContiguousFrom(index.queries, month);
    for (const q of index.queries) expect(index.estimate(q)).toBeLessThanOrEqual(cap);
    expect(result.report!.comparisonEstimateBytes).toBe(
      index.queries.reduce((n, q) => n + index.estimate(q), 0),
    );
  });

  it('says how many statements a split comparison ran, in the summary and in --json', async () => {
    const perDay = 1_000;
    const week = Array.from({ length: 7 }, (_, d) => object(`2026/11/${d}.pdf`, d * 24 * 60 + 90));
    const lines: string[] = [];
    const summary = await capped(week, new DryRunIndex(perDay), 2 * perDay, (line) => lines.push(line));
    const n = summary.report!.comparisonQueries!;
    expect(n).toBeGreaterThan(1);
    expect(lines[1]).toBe(
      `the comparison ran as ${n} queries by key day, each under the byte cap, estimated at ${summary.report!.comparisonEstimateBytes} bytes together (dry runs)`,
    );
    const json: string[] = [];
    await capped(week, new DryRunIndex(perDay), 2 * perDay, (line) => json.push(line), 500, { json: true });
    expect(JSON.parse(json[0]!)).toMatchObject({ comparisonQueries: n });
  });

  it('compares a listing of 250,000 objects (a whole bucket at volume holds millions)', async () => {
    const many = Array.from({ length: 250_000 }, (_, i) => object(`2026/${i}.pdf`, 90 + (i % 10_000)));
    const index = new MemoryIndex([]);
    const result = await capped(many, index, derivedMaximumBytesBilled(1_000_000), () => {}, 1_000);
    expect(result.error).toBeUndefined();
    expect(result.report).toMatchObject({ listed: 250_000, missing: 250_000 });
    expect(index.queries[0]!.since.toISOString()).toBe(object('x', 90 + 9_999).timeCreated);
  });

  it('runs it when the cap holds it', async () => {
    const index = new MemoryIndex([]);
    const result = await capped(objects, index, comparisonLeastBytes(objects));
    expect(result.error).toBeUndefined();
    expect(index.queries).toHaveLength(1);
  });
});

describe('estimateCost', () => {
  it('is the cost model’s analysis plus its BigQuery statement pruned to the key day, proportional to the documents', () => {
    const one = estimateCost(1);
    const thousand = estimateCost(1000);
    expect(thousand.totalUsd).toBeCloseTo(one.totalUsd * 1000, 10);
    // 2,000 input tokens at $0.30/M + 400 output at $2.50/M per invoice.
    expect(one.analysisUsd).toBeCloseTo((2000 * 0.3 + 400 * 2.5) / 1e6, 12);
    // One MERGE (a new document's seen() is skipped), at least 10 MiB at $6.25/TiB.
    expect(one.bigQueryUsd).toBeCloseTo(((10 * 1024 * 1024) / 1024 ** 4) * 6.25, 12);
  });
});

describe('parseDuration', () => {
  it.each([
    ['0', 0],
    ['90s', 90_000],
    ['30m', 1_800_000],
    ['1h', HOUR_MS],
    ['2d', 48 * HOUR_MS],
  ])('reads %s', (text, ms) => expect(parseDuration(text)).toBe(ms));

  it('refuses anything else, naming the flag', () => {
    expect(() => parseDuration('an hour')).toThrow(/--older-than must be a duration/);
  });
});

describe('jobLogLine', () => {
  const report = {
    bucket: 'acme',
    prefix: '',
    listed: 5,
    withLine: 3,
    missing: 1,
    tooYoung: 1,
    orphanRows: 2,
    missingObjects: [],
  };

  it('is a WARNING when documents are missing, with every count as a field', () => {
    expect(jobLogLine(report)).toEqual({
      severity: 'WARNING',
      message:
        'reconcile gs://acme/: 5 listed, 3 with a line, 1 missing, 1 too young, 2 rows whose object is gone',
      component: 'reconcile',
      listed: 5,
      withLine: 3,
      missing: 1,
      tooYoung: 1,
      orphanRows: 2,
    });
  });

  it('is INFO when nothing is missing, and ERROR when the run failed', () => {
    expect(jobLogLine({ ...report, missing: 0 }).severity).toBe('INFO');
    expect(jobLogLine(undefined, { code: 'query_failed', message: 'denied' })).toMatchObject({
      severity: 'ERROR',
      component: 'reconcile',
      code: 'query_failed',
    });
  });
});

describe('the reconcile job entry point', () => {
  it('prints one ERROR JSON line naming what is missing from its configuration, and exits 2', async () => {
    const printed: string[] = [];
    const log = jest.spyOn(console, 'log').mockImplementation((line: string) => {
      printed.push(line);
    });
    try {
      const code = await jobMain({ CLOUD_RUN_JOB: 'docline-dev-reconcile', DOCLINE_PROJECT: 'acme-dev' });
      expect(code).toBe(RECONCILE_EXIT.error);
    } finally {
      log.mockRestore();
    }
    expect(printed).toHaveLength(1);
    expect(JSON.parse(printed[0]!)).toEqual({
      severity: 'ERROR',
      message: expect.stringMatching(
        /^reconcile failed: .*DOCLINE_BUCKET, DOCLINE_TOPIC, DOCLINE_TABLE must be set/,
      ),
      component: 'reconcile',
      code: 'usage',
    });
  });
});
