import { maximumEstimateBytes, requiredMaximumBytesBilled } from '../../worker/src/contract/cost-model';
import {
  DEFAULT_CONTENT_TYPES,
  DEFAULT_MAX_INSTANCES,
  DELIVERY_DEFAULTS,
} from '../../worker/src/contract/settings';
import {
  instancesForVolume,
  MEMORY_PER_OBJECT_FACTOR,
  minCpuForMemory,
  parseCpu,
  parseMemoryMib,
  parseStackConfig,
  StackConfigError,
  WORKER_BASELINE_MEMORY_MIB,
} from '../config';
import {
  DUPLICATE_RATE_PER_MILLE,
  IMAGE_KEEP_COUNT,
  OLDEST_UNACKED_AGE_SECONDS,
  RECONCILE_SCHEDULE,
} from '../fixed';

/** The dev stack's config parsed from the given raw `docline:*` values. */
const parsed = (raw: Record<string, string> = {}) => parseStackConfig('p', 'dev', raw);

/** Problems the parser reports for the given raw `docline:*` values. */
function problemsOf(raw: Record<string, string>, stack = 'dev'): readonly string[] {
  try {
    parseStackConfig('p', stack, raw);
  } catch (error) {
    if (error instanceof StackConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('parseStackConfig', () => {
  it('fills every key from the contract defaults when nothing is set', () => {
    const config = parsed();

    expect(config.delivery).toEqual(DELIVERY_DEFAULTS);
    expect(config.worker.allowedContentTypes).toEqual(DEFAULT_CONTENT_TYPES);
    expect(config.worker.image).toBeUndefined();
    expect(config.prefix).toBe('docline-dev');
    expect(config.deletionProtection).toBe(true);
  });

  it('parses numbers, booleans and lists the way the CLI passes them', () => {
    const config = parsed({
      workerTimeoutSeconds: '590',
      deletionProtection: 'false',
      allowedContentTypes: '["application/pdf"]',
      notificationChannels: '["projects/p/notificationChannels/1"]',
    });

    expect(config.delivery.workerTimeoutSeconds).toBe(590);
    expect(config.deletionProtection).toBe(false);
    expect(config.worker.allowedContentTypes).toEqual(['application/pdf']);
    expect(config.alerts.notificationChannels).toEqual(['projects/p/notificationChannels/1']);
  });

  it('derives the ack deadline from the worker timeout plus the margin', () => {
    expect(parsed().delivery.ackDeadlineSeconds).toBe(
      DELIVERY_DEFAULTS.workerTimeoutSeconds + DELIVERY_DEFAULTS.ackDeadlineMarginSeconds,
    );
    expect(parsed({ workerTimeoutSeconds: '560' }).delivery.ackDeadlineSeconds).toBe(570);
    // Pub/Sub's longest ack deadline, reached by the longest timeout the stack takes.
    expect(parsed({ workerTimeoutSeconds: '590' }).delivery.ackDeadlineSeconds).toBe(600);
  });

  it("refuses a worker timeout whose derived ack deadline would pass Pub/Sub's 600 s, naming workerTimeoutSeconds", () => {
    expect(problemsOf({ workerTimeoutSeconds: '591' })).toEqual([
      "workerTimeoutSeconds (591) must be at most 590: the push subscription's ack deadline is derived as " +
        'workerTimeoutSeconds + 10s margin, and Pub/Sub allows at most 600s, so Pub/Sub would redeliver messages ' +
        'that are still being processed. Lower workerTimeoutSeconds to 590 or less.',
    ]);
    expect(problemsOf({ workerTimeoutSeconds: '3600' })).toEqual([
      expect.stringMatching(/^workerTimeoutSeconds \(3600\) must be at most 590/),
    ]);
  });

  it('refuses a byte cap under 10 MiB, 0 aside (it derives the cap)', () => {
    expect(problemsOf({ maximumBytesBilled: String(10 * 1024 * 1024 - 1) })).toEqual([
      'maximumBytesBilled must be a whole number from 10485760, or 0 to derive it (got 10485759).',
    ]);
    expect(problemsOf({ maximumBytesBilled: '0' })).toEqual([]);
  });

  it('refuses keys that are no longer settings, saying what to do instead', () => {
    expect(problemsOf({ dedupWindowDays: '15' })).toEqual([
      expect.stringMatching(/^dedupWindowDays is not a setting: the redelivery window is derived/),
    ]);
    expect(problemsOf({ writeMode: 'append' })).toEqual([
      'writeMode is not a setting: rows reach BigQuery only by the conditional MERGE. Remove docline:writeMode from the stack file.',
    ]);
    expect(problemsOf({ writeMode: '' })).toEqual([]);
    // Knobs nobody should turn, now constants or derived.
    expect(
      problemsOf({ maxDeliveryAttempts: '100', batchMaxRows: '500', mergeMinIntervalMs: '5000' }),
    ).toEqual([
      expect.stringMatching(
        /^maxDeliveryAttempts is not a setting: Pub\/Sub's retry and dead-letter policy are constants.*Remove docline:maxDeliveryAttempts from the stack file\.$/,
      ),
      expect.stringMatching(/^batchMaxRows is not a setting: the worker runs with its own default/),
      expect.stringMatching(
        /^mergeMinIntervalMs is not a setting: the MERGE pace is derived from maxInstances/,
      ),
    ]);
    // Constants the stack fixes are named from the values the components use.
    expect(
      problemsOf({ imageKeepCount: '3', reconcileSchedule: '0 4 * * *', oldestUnackedAgeSeconds: '60' }),
    ).toEqual([
      expect.stringContaining(`unacknowledged for ${OLDEST_UNACKED_AGE_SECONDS / 60} minutes`),
      expect.stringContaining(`keeps the ${IMAGE_KEEP_COUNT} most recent images`),
      expect.stringContaining(`the fixed schedule "${RECONCILE_SCHEDULE}"`),
    ]);
    // The ack deadline is derived, the duplicate alert's threshold fixed, the line's wait the worker's own.
    expect(
      problemsOf({ analyzerQuotaWaitMs: '280000', ackDeadlineSeconds: '600', duplicateRatePerMille: '5' }),
    ).toEqual([
      expect.stringMatching(
        /^analyzerQuotaWaitMs is not a setting: the worker runs with its own default .*Remove docline:analyzerQuotaWaitMs from the stack file\.$/,
      ),
      "ackDeadlineSeconds is not a setting: the push subscription's ack deadline is derived: workerTimeoutSeconds + 10 s, " +
        'at most 600 s (set workerTimeoutSeconds instead). Remove docline:ackDeadlineSeconds from the stack file.',
      `duplicateRatePerMille is not a setting: the duplicate-answers alert fires above ${DUPLICATE_RATE_PER_MILLE} per mille ` +
        'of the answers. Remove docline:duplicateRatePerMille from the stack file.',
    ]);
  });

  it('refuses an unknown dedup key mode', () => {
    expect(problemsOf({ dedupKeyMode: 'content' })).toEqual([
      'dedupKeyMode must be one of object, message (got content).',
    ]);
  });

  it('lists every problem in one error that says how to set a key', () => {
    const attempt = () => parsed({ workerTimeoutSeconds: '700', dedupKeyMode: 'x', concurrency: 'many' });

    expect(attempt).toThrow(StackConfigError);
    expect(attempt).toThrow(/3 problems\); set keys with `pulumi config set docline:<key> <value>`/);
    expect(attempt).toThrow(
      /dedupKeyMode[\s\S]*concurrency must be a whole number from 1 to 1000 \(got many\)[\s\S]*workerTimeoutSeconds \(700\) must be at most 590/,
    );
  });

  it('refuses a missing project, with the command that sets it', () => {
    expect(() => parseStackConfig(undefined, 'dev', {})).toThrow(
      'gcp:project is not set: run `pulumi config set gcp:project YOUR_PROJECT_ID`.',
    );
  });

  it('refuses a stack name too long for the service account ids', () => {
    expect(problemsOf({}, 'production-eu-1')).toEqual([
      expect.stringMatching(/stack name "production-eu-1"/),
    ]);
  });

  it('refuses instance bounds that contradict each other', () => {
    expect(problemsOf({ minInstances: '5', maxInstances: '2' })).toEqual([
      'maxInstances must be at least minInstances (5) (got 2).',
    ]);
  });

  it('refuses a list that is not a list of strings', () => {
    expect(problemsOf({ allowedContentTypes: 'application/pdf' })).toEqual([
      expect.stringMatching(
        /^allowedContentTypes must be a list of items each a MIME type; in a stack file write it as a YAML list/,
      ),
    ]);
  });
});

describe('parseStackConfig: cpu, memory and concurrency together', () => {
  /** The memory (MiB) the worker needs with `inFlight` documents in analysis and `concurrency` push bodies. */
  const needFor = (inFlight: number, concurrency: number) =>
    Math.ceil(
      (inFlight * DELIVERY_DEFAULTS.maxObjectBytes * MEMORY_PER_OBJECT_FACTOR +
        concurrency * DELIVERY_DEFAULTS.pushBodyLimitBytes) /
        2 ** 20,
    ) + WORKER_BASELINE_MEMORY_MIB;

  it.each([
    ['1', 1],
    ['0.5', 0.5],
    ['500m', 0.5],
    ['2', 2],
  ])('reads cpu %s as %d vCPU', (value, cpu) => {
    expect(parseCpu(value)).toBe(cpu);
  });

  it.each([
    ['512Mi', 512],
    ['1Gi', 1024],
    ['2G', 2e9 / 1024 / 1024],
  ])('reads memory %s as %d MiB', (value, mib) => {
    expect(parseMemoryMib(value)).toBe(mib);
  });

  it('refuses a cpu below 1 with concurrency above 1, naming both keys and the fix', () => {
    expect(
      problemsOf({ cpu: '0.5', concurrency: '2', memory: '512Mi', maxObjectBytes: String(1024 * 1024) }),
    ).toEqual([
      'cpu (0.5) below 1 needs concurrency 1 (got 2): Cloud Run refuses fractional CPU with concurrent requests. Set cpu to 1 or concurrency to 1.',
    ]);
  });

  it('accepts a fractional cpu with concurrency 1 and memory in its range', () => {
    expect(problemsOf({ cpu: '0.5', concurrency: '1', memory: '512Mi' })).toEqual([]);
    expect(problemsOf({ cpu: '0.583', concurrency: '1', memory: '1Gi' })).toEqual([]);
  });

  it('refuses what Cloud Run refuses though it looks in range: 0.5 vCPU with 1 GiB (needs 0.583), 128 MiB (below 512 MiB)', () => {
    expect(problemsOf({ cpu: '0.5', concurrency: '1', memory: '1Gi' })).toEqual([
      'memory (1Gi) needs at least 0.583 vCPU on Cloud Run (got cpu 0.5). Raise cpu or lower memory.',
    ]);
    // (128 MiB is also below the worker's own baseline; Cloud Run's refusal is reported first.)
    expect(problemsOf({ cpu: '0.5', concurrency: '1', memory: '128Mi' })[0]).toBe(
      'memory (128Mi) is outside what Cloud Run allows with cpu 0.5: from 512 MiB to 1024 MiB. Change memory or cpu.',
    );
    expect(problemsOf({ cpu: '1', memory: '128Mi', concurrency: '1' })[0]).toBe(
      'memory (128Mi) is outside what Cloud Run allows with cpu 1: from 512 MiB to 4096 MiB. Change memory or cpu.',
    );
    expect(problemsOf({ cpu: '0.0805', concurrency: '1', memory: '512Mi' })).toEqual([
      expect.stringMatching(/^cpu must be from 0.08 to below 1 in steps of 0.001/),
    ]);
  });

  it.each([
    [512, 0.333],
    [1024, 0.583],
    [2048, 1],
    [4096, 1],
    [4097, 2],
    [8 * 1024 + 1, 4],
    [16 * 1024 + 1, 6],
    [24 * 1024 + 1, 8],
  ])('requires, as Cloud Run does, for %d MiB at least %d vCPU', (mib, cpu) => {
    expect(minCpuForMemory(mib)).toBe(cpu);
  });

  it('refuses memory outside what Cloud Run allows for the cpu, and cpu values Cloud Run does not take', () => {
    expect(problemsOf({ cpu: '1', memory: '8Gi' })).toEqual([
      'memory (8Gi) is outside what Cloud Run allows with cpu 1: from 512 MiB to 4096 MiB. Change memory or cpu.',
    ]);
    expect(problemsOf({ cpu: '3' })).toEqual([
      expect.stringMatching(/^cpu must be from 0.08 to below 1 .* \(got "3"\)/),
    ]);
    expect(problemsOf({ memory: 'lots' })).toEqual([
      'memory must be a quantity such as 512Mi, 1Gi or 2G (got "lots").',
    ]);
  });

  it('refuses memory below the documents in analysis × maxObjectBytes × the stated factor + the push bodies + the baseline, every problem at once', () => {
    const problems = problemsOf({ concurrency: '16', memory: '1Gi', cpu: '0.25' });

    expect(problems).toHaveLength(3);
    expect(problems[0]).toMatch(/^cpu \(0.25\) below 1 needs concurrency 1 \(got 16\)/);
    expect(problems[1]).toMatch(
      /^memory \(1Gi\) is outside what Cloud Run allows with cpu 0.25: from 512 MiB to 512 MiB/,
    );
    expect(problems[2]).toContain(
      // Fewer slots than analyzerMaxInFlight: every slot may hold a document.
      `= ${needFor(16, 16)} MiB. Raise memory, or lower analyzerMaxInFlight, maxObjectBytes or concurrency.`,
    );
  });

  it('counts only the admitted deliveries as holding a document: the others wait with their push body', () => {
    expect(problemsOf({ concurrency: '1000', analyzerMaxInFlight: '10', memory: '2Gi' })).toEqual([]);
    const [problem] = problemsOf({ concurrency: '1000', analyzerMaxInFlight: '20', memory: '2Gi' });
    expect(problem).toContain(
      `20 documents in analysis (the lesser of concurrency 1000 and analyzerMaxInFlight 20)`,
    );
    expect(problem).toContain(`= ${needFor(20, 1000)} MiB.`);
  });
});

describe('parseStackConfig: delivery relations', () => {
  it('derives the redelivery window from the two retentions, so a replayed dead letter still finds its analysis', () => {
    expect(parsed().delivery.redeliveryWindowDays).toBe(15);
    const longer = parsed({ deadLetterRetentionSeconds: String(31 * 86400) });
    expect(longer.delivery.redeliveryWindowDays).toBe(39);
  });

  it('never lets the dead-letter retention drop below 7 days', () => {
    expect(problemsOf({ deadLetterRetentionSeconds: String(86400) })).toEqual([
      'deadLetterRetentionSeconds must be a whole number from 604800 to 2678400 (got 86400).',
    ]);
  });

  it('derives the MERGE pace from maxInstances, at 80 % of the per-table DML budget', () => {
    expect(parsed().delivery.mergeMinIntervalMs).toBe(5_000);
    // As in Pulumi.prod.yaml: the longer pace needs the longer request timeout.
    const twenty = { maxInstances: '20', workerTimeoutSeconds: '560' };
    expect(parsed(twenty).delivery.mergeMinIntervalMs).toBe(10_000);
    expect(parsed({ maxInstances: '3' }).delivery.mergeMinIntervalMs).toBe(1_500);
    // 20 instances, one MERGE each per 10 s: 20 of the 25 statements per 10 s.
    expect(problemsOf(twenty)).toEqual([]);
  });

  it("refuses more instances than BigQuery's DML queue takes, one MERGE in flight each", () => {
    const longer = { workerTimeoutSeconds: '560' };
    expect(problemsOf({ maxInstances: '23', ...longer })).toEqual([
      expect.stringMatching(/^maxInstances \(23\) is over 22: .* Lower maxInstances\./),
    ]);
    expect(problemsOf({ maxInstances: '22', ...longer })).toEqual([]);
  });

  it("refuses a worker timeout that does not cover a delivery's longest path: both batches, the memo, the line, a read and both analyzer calls", () => {
    // 20 instances pace MERGEs 10 s apart: (10 + 2) + 6 × 5 + 300 + 20 + 2 × 60 + (3 × 10 + 2) = 514 s,
    // over 500 s less the 2 s to answer (the write's interval counts three times: it stretches with
    // slow MERGEs and with the instances writing).
    expect(problemsOf({ maxInstances: '20' })).toEqual([
      expect.stringMatching(
        /^A delivery's longest path takes 514000 ms: .*6 memo calls of 5000 ms.*analyzerQuotaWaitMs 300000.*2 analyzer calls \(analyzerTimeoutMs 60000\).*workerTimeoutSeconds \(500s\) less 2000 ms to answer \(498000 ms\)/,
      ),
    ]);
    expect(problemsOf({ maxInstances: '20' })[0]).toMatch(
      /Raise workerTimeoutSeconds \(at most 590; the ack deadline follows it\), or lower maxInstances/,
    );
    // The defaults fit (494 s); 20 instances need a longer timeout (the ack deadline follows it).
    expect(problemsOf({})).toEqual([]);
    expect(problemsOf({ maxInstances: '20', workerTimeoutSeconds: '515' })).toHaveLength(1);
    expect(problemsOf({ maxInstances: '20', workerTimeoutSeconds: '516' })).toEqual([]);
  });

  it('chooses the Gemini location from the data location unless one is set', () => {
    expect(parsed().geminiLocation).toBe('europe-west1');
    expect(parsed({ dataLocation: 'US', region: 'us-central1' }).geminiLocation).toBe('us-central1');
    expect(parsed({ dataLocation: 'europe-west4', region: 'europe-west4' }).geminiLocation).toBe(
      'europe-west4',
    );
    expect(parsed({ geminiLocation: 'global' }).geminiLocation).toBe('global');
  });

  it('validates the reconcile mode', () => {
    expect(problemsOf({ reconcileMode: 'fix' })).toEqual([
      'reconcileMode must be one of report, apply, off (got fix).',
    ]);
    expect(parsed().reconcile).toEqual({ mode: 'report' });
  });
});

describe('parseStackConfig: the volume (documentsPerDay)', () => {
  const volumeProblems = (raw: Record<string, string>) =>
    problemsOf(raw).filter((p) => /documentsPerDay/.test(p));

  it('derives the byte cap from the volume, and keeps the default cap where the volume needs less', () => {
    expect(parsed().delivery.maximumBytesBilled).toBe(DELIVERY_DEFAULTS.maximumBytesBilled);
    const million = parsed({ documentsPerDay: '1000000' });
    expect(million.documentsPerDay).toBe(1_000_000);
    // Two days of keys (a MERGE across midnight), each a busiest (3×) day, every key of the longest planned length.
    expect(million.delivery.maximumBytesBilled).toBe(requiredMaximumBytesBilled(1_000_000));
    expect(million.delivery.maximumBytesBilled).toBeGreaterThan(DELIVERY_DEFAULTS.maximumBytesBilled);
    expect(million.delivery.maximumBytesBilled).toBeGreaterThanOrEqual(maximumEstimateBytes(1_000_000));
  });

  it('refuses at preview a cap its statements would be refused by at that volume, naming both knobs and the least cap', () => {
    const problems = volumeProblems({ documentsPerDay: '1000000', maximumBytesBilled: '100000000' });
    expect(problems).toEqual([
      expect.stringMatching(
        new RegExp(
          `^maximumBytesBilled \\(100000000\\) is below what the table's statements are estimated at for documentsPerDay \\(1000000\\).*at least ${requiredMaximumBytesBilled(1_000_000)}`,
        ),
      ),
    ]);
    expect(() => parsed({ documentsPerDay: '1000000', maximumBytesBilled: '100000000' })).toThrow(
      StackConfigError,
    );
    // The same cap carries the volume it is enough for.
    expect(volumeProblems({ documentsPerDay: '10000', maximumBytesBilled: '100000000' })).toEqual([]);
  });

  it('derives the instances from the volume and refuses an explicit count that cannot carry it', () => {
    expect(parsed().worker.maxInstances).toBe(DEFAULT_MAX_INSTANCES);
    // A longer timeout keeps a delivery's longest path inside it at 21 instances' pace.
    const busyRaw = { documentsPerDay: '2000000', concurrency: '100', workerTimeoutSeconds: '560' };
    const busy = parsed(busyRaw);
    expect(busy.worker.maxInstances).toBe(instancesForVolume(2_000_000, 100));
    expect(busy.worker.maxInstances).toBeGreaterThan(DEFAULT_MAX_INSTANCES);
    // The pace follows the derived instances, so the DML budget still holds.
    expect(busy.delivery.mergeMinIntervalMs).toBeGreaterThan(parsed().delivery.mergeMinIntervalMs);
    expect(volumeProblems({ ...busyRaw, maxInstances: '5' })).toEqual([
      expect.stringMatching(/^maxInstances \(5\) cannot carry documentsPerDay \(2000000\).*needs 21/),
    ]);
  });

  it('refuses a volume that is not a whole positive number', () => {
    expect(volumeProblems({ documentsPerDay: '0' })).toEqual([
      'documentsPerDay must be a whole number from 1 (got 0).',
    ]);
    expect(volumeProblems({ documentsPerDay: '1.5' })).toHaveLength(1);
  });
});
