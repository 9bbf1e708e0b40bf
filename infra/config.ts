import * as pulumi from '@pulumi/pulumi';
import {
  booleanText,
  ConfigValues,
  finiteNumber,
  jsonStringList,
} from '../worker/src/contract/config-values';
import {
  BUSIEST_DAY_FACTOR,
  derivedMaximumBytesBilled,
  requiredMaximumBytesBilled,
} from '../worker/src/contract/cost-model';
import { geminiCapacityNote } from '../worker/src/contract/gemini-tiers';
import { modelLifecycle } from '../worker/src/contract/models';
import {
  DEFAULT_CONTENT_TYPES,
  DEFAULT_DATA_LOCATION,
  DEFAULT_MAX_INSTANCES,
  DELIVERY_DEFAULTS,
  type DedupKeyMode,
  type DeliverySettings,
  defaultGeminiLocation,
  dmlBudgetProblems,
  LOG_LEVELS,
  MIN_MAXIMUM_BYTES_BILLED,
  mergeMinIntervalMsFor,
  settingsProblems,
} from '../worker/src/contract/settings';
import { normalisedLocation, regionProblems } from './stack-guards';

/**
 * The stack's volume: how many documents a day it is sized for (`docline:documentsPerDay`). The cap
 * on every statement's bytes, the instances and, through them, the MERGE pace are derived from it
 * when not set, and a configuration whose statements BigQuery would refuse at that volume is
 * refused at preview with the knob to turn.
 */
export const VOLUME = Object.freeze({
  /** A busy day's rate over the day's average (uploads come in bursts). Assumed. */
  peakFactor: BUSIEST_DAY_FACTOR,
  /**
   * How long one delivery holds its request on average: the analysis (a Gemini call takes seconds),
   * the wait for its batch's MERGE and the MERGE itself. Assumed.
   */
  secondsInFlight: 30,
});

/** Instances that carry `documentsPerDay` at the peak rate, `concurrency` requests each. */
export function instancesForVolume(documentsPerDay: number, concurrency: number): number {
  return Math.ceil(
    ((documentsPerDay / 86_400) * VOLUME.peakFactor * VOLUME.secondsInFlight) / Math.max(1, concurrency),
  );
}

/** The instance count a stack takes when maxInstances is not set: the default, or what the volume needs. */
export function derivedMaxInstances(documentsPerDay: number, concurrency: number): number {
  return Math.max(DEFAULT_MAX_INSTANCES, instancesForVolume(documentsPerDay, concurrency));
}

/** BigQuery's pace for a valid instance count; an invalid one is reported on its own, not twice. */
const derivedMergeMinIntervalMs = (maxInstances: number): number =>
  Number.isInteger(maxInstances) && maxInstances >= 1
    ? mergeMinIntervalMsFor(maxInstances)
    : DELIVERY_DEFAULTS.mergeMinIntervalMs;

/**
 * The stack's configuration: the only module that reads `pulumi.Config`. Every `docline:*` key is
 * declared in Pulumi.yaml with the same default as here; delivery defaults come from the worker's
 * contract (DELIVERY_DEFAULTS), so the stack and the local pipeline cannot drift apart.
 */

/** Everything the worker service needs beyond the delivery settings. */
export interface WorkerSettings {
  /** Container image reference; unset: the stack builds worker/Dockerfile and pushes it itself. */
  readonly image: string | undefined;
  /** Images the Artifact Registry cleanup policy keeps (the most recent versions). */
  readonly imageKeepCount: number;
  readonly minInstances: number;
  readonly maxInstances: number;
  /** Requests one instance serves at once (Cloud Run `maxInstanceRequestConcurrency`). */
  readonly concurrency: number;
  readonly cpu: string;
  readonly memory: string;
  readonly logLevel: string;
  readonly allowedContentTypes: readonly string[];
  /** Also verify the push OIDC token inside the worker, on top of Cloud Run's IAM check. */
  readonly verifyPushTokenInApp: boolean;
}

/** Thresholds of the alert policies. */
export interface AlertSettings {
  /** Alert when the dead-letter subscription holds more than this many messages. */
  readonly deadLetterMessagesThreshold: number;
  /** Alert when the oldest unacknowledged push message is older than this. */
  readonly oldestUnackedAgeSeconds: number;
  /** Alert when `duplicate` answers exceed this many per thousand answers (10 = 1 %). */
  readonly duplicateRatePerMille: number;
  /** Monitoring notification channel ids (`projects/P/notificationChannels/N`). */
  readonly notificationChannels: readonly string[];
}

/** What the daily reconcile job does: report missing documents, announce them again, or nothing. */
export type ReconcileMode = 'report' | 'apply' | 'off';
export const RECONCILE_MODES: readonly ReconcileMode[] = ['report', 'apply', 'off'];

/** The daily Cloud Run job that compares the bucket with the table, to find uploads that have no row. */
export interface ReconcileSettings {
  readonly mode: ReconcileMode;
  /** Cloud Scheduler cron expression (five fields), in UTC. */
  readonly schedule: string;
}

// --- Delivery and data-keeping settings: what a routine change may not do to the data. ---
/** How the stack keeps its data across changes, and how it is delivered. */
export interface KeepingSettings {
  /** Schema version of the table (`deliveries`, `deliveries_v2`, …): the migration path. */
  readonly tableVersion: number;
  /** Run only the image CI built and promoted: docline:image, else the image deployed now; never build. */
  readonly promotedImage: boolean;
  /** The one knob fixed at deploy whose change a drained stack accepts (docline:allowKnobChange). */
  readonly allowKnobChange: string | undefined;
  /** Years a document cannot be deleted or overwritten (a bucket retention policy); 0: none. */
  readonly documentRetentionYears: number;
  /**
   * Lock that retention policy (permanent: it can then only grow, and the bucket cannot be deleted
   * before its last object's retention ends). Locked here, never by hand: the provider replaces a
   * bucket whose policy is locked while the program says unlocked (docs/deploy.md).
   */
  readonly documentRetentionLocked: boolean;
}

/** A monthly budget on the project, notifying the alert channels. */
export interface BudgetSettings {
  /** Billing account id (`XXXXXX-XXXXXX-XXXXXX`) the project is billed to. */
  readonly billingAccount: string;
  /** Monthly amount, in the billing account's currency. */
  readonly monthlyAmount: number;
}

/** The longest retention docline states: Cloud Storage takes under 3,155,760,000 s (100 years). */
export const MAX_DOCUMENT_RETENTION_YEARS = 99;

function keepingProblems(
  k: KeepingSettings,
  budget: { billingAccount: string; monthlyAmount: number },
): string[] {
  const problems: string[] = [];
  if (!Number.isInteger(k.tableVersion) || k.tableVersion < 1) {
    problems.push(`tableVersion must be a whole number from 1 (got ${k.tableVersion}).`);
  }
  if (
    !Number.isInteger(k.documentRetentionYears) ||
    k.documentRetentionYears < 0 ||
    k.documentRetentionYears > MAX_DOCUMENT_RETENTION_YEARS
  ) {
    problems.push(
      `documentRetentionYears must be a whole number from 0 (no retention policy) to ${MAX_DOCUMENT_RETENTION_YEARS} (got ${k.documentRetentionYears}).`,
    );
  }
  if (k.documentRetentionLocked && k.documentRetentionYears === 0) {
    problems.push(
      'documentRetentionLocked needs documentRetentionYears above 0: there is no retention policy to lock.',
    );
  }
  if (budget.billingAccount !== '' && !/^[0-9A-F]{6}-[0-9A-F]{6}-[0-9A-F]{6}$/.test(budget.billingAccount)) {
    problems.push(
      `budgetBillingAccount must be a billing account id such as 012345-6789AB-CDEF01 (got "${budget.billingAccount}").`,
    );
  }
  if (budget.billingAccount !== '' && !(budget.monthlyAmount > 0)) {
    problems.push(
      `budgetMonthlyAmount must be above 0 when budgetBillingAccount is set (got ${budget.monthlyAmount}).`,
    );
  }
  return problems;
}
// --- end of delivery and data-keeping settings ---

/** The validated configuration of one stack. */
export interface StackConfig {
  readonly project: string;
  readonly stack: string;
  /** Prefix of every logical name: `docline-<stack>`. */
  readonly prefix: string;
  /** Region of Cloud Run and Artifact Registry. */
  readonly region: string;
  /** Location of the bucket and the BigQuery dataset (a multi-region such as EU, or a region). */
  readonly dataLocation: string;
  /** Vertex AI location the worker calls Gemini in (GOOGLE_CLOUD_LOCATION). */
  readonly geminiLocation: string;
  /** Protects the table, the service and the bucket's contents from `pulumi destroy`. */
  readonly deletionProtection: boolean;
  /** Documents a day the stack is sized for (the cap, the instances and the pace follow from it). */
  readonly documentsPerDay: number;
  readonly delivery: Readonly<DeliverySettings>;
  readonly worker: WorkerSettings;
  readonly alerts: AlertSettings;
  readonly reconcile: ReconcileSettings;
  readonly keeping: KeepingSettings;
  /** Undefined: no budget (docline:budgetBillingAccount unset). */
  readonly budget: BudgetSettings | undefined;
}

/** Raised at preview when the configuration is invalid; the message lists every problem. */
export class StackConfigError extends pulumi.RunError {
  constructor(readonly problems: readonly string[]) {
    super(
      `docline configuration is invalid (${problems.length} problem${problems.length === 1 ? '' : 's'}); ` +
        'set keys with `pulumi config set docline:<key> <value>`:\n' +
        problems.map((p) => `  - ${p}`).join('\n'),
    );
    this.name = 'StackConfigError';
  }
}

/** Defaults of the keys that are not delivery settings (those come from DELIVERY_DEFAULTS). */
export const STACK_DEFAULTS = Object.freeze({
  region: 'europe-west1',
  dataLocation: DEFAULT_DATA_LOCATION,
  deletionProtection: true,
  imageKeepCount: 10,
  minInstances: 0,
  /** At the default documentsPerDay; `docline:maxInstances` 0 (its declared default) derives it from the volume. */
  maxInstances: DEFAULT_MAX_INSTANCES,
  // A modest deployment: its derived cap and instances are the defaults (contract/cost-model.ts).
  documentsPerDay: 10_000,
  concurrency: 400,
  cpu: '1',
  memory: '4Gi',
  logLevel: 'INFO',
  verifyPushTokenInApp: true,
  deadLetterMessagesThreshold: 0,
  oldestUnackedAgeSeconds: 1800,
  duplicateRatePerMille: 10,
  reconcileMode: 'report' as ReconcileMode,
  // Daily at 03:00 UTC, after the day's uploads have had their hour to arrive.
  reconcileSchedule: '0 3 * * *',
});

/**
 * Memory the worker needs per document in flight, as a multiple of its size: the downloaded bytes
 * (1×), their base64 copy for Gemini's inline data (4/3×) and the JSON request body the SDK builds
 * around it (4/3× again) come to about 3.7×; 4× leaves room for the response.
 */
export const MEMORY_PER_OBJECT_FACTOR = 4;
/** Memory of an idle worker (Node, the client libraries); the load suite measured ~175 MiB peak RSS. */
export const WORKER_BASELINE_MEMORY_MIB = 256;

const MIB = 1024 * 1024;

/** CPU values Cloud Run accepts at 1 and above. */
const WHOLE_CPUS = [1, 2, 4, 6, 8];

/**
 * The least memory Cloud Run accepts: 512 MiB. (The first generation execution environment once
 * allowed 128 MiB; the current limits say 512 MiB, and 128 MiB is refused.)
 */
export const CLOUD_RUN_MIN_MEMORY_MIB = 512;

/**
 * Cloud Run's memory range for a CPU limit, in MiB (cloud.google.com/run/docs/configuring/services/cpu
 * and …/memory-limits): at least {@link CLOUD_RUN_MIN_MEMORY_MIB}; below 0.5 vCPU up to 512 MiB,
 * below 1 up to 1 GiB, 1 up to 4 GiB, 2 up to 8 GiB, 4 from 2 to 16 GiB, 6 from 4 to 24 GiB,
 * 8 from 4 to 32 GiB.
 */
export function memoryRangeMib(cpu: number): { min: number; max: number } {
  const min = CLOUD_RUN_MIN_MEMORY_MIB;
  if (cpu < 0.5) return { min, max: 512 };
  if (cpu < 1) return { min, max: 1024 };
  if (cpu === 1) return { min, max: 4 * 1024 };
  if (cpu === 2) return { min, max: 8 * 1024 };
  if (cpu === 4) return { min: 2 * 1024, max: 16 * 1024 };
  if (cpu === 6) return { min: 4 * 1024, max: 24 * 1024 };
  return { min: 4 * 1024, max: 32 * 1024 };
}

/**
 * The least CPU Cloud Run requires for a memory limit (…/memory-limits, "Required minimum CPUs"):
 * up to 512 MiB 0.333 vCPU, up to 1 GiB 0.583, up to 4 GiB 1, then 2, 4, 6 and 8 above 4, 8, 16 and
 * 24 GiB. So 0.5 vCPU cannot have 1 GiB, though 1 GiB is within "below 1 vCPU: up to 1 GiB".
 */
export function minCpuForMemory(memoryMib: number): number {
  if (memoryMib <= 512) return 0.333;
  if (memoryMib <= 1024) return 0.583;
  if (memoryMib <= 4 * 1024) return 1;
  if (memoryMib <= 8 * 1024) return 2;
  if (memoryMib <= 16 * 1024) return 4;
  if (memoryMib <= 24 * 1024) return 6;
  return 8;
}

/** vCPUs of a Cloud Run CPU limit ("1", "0.5", "500m"); undefined when it is not one. */
export function parseCpu(value: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(m?)$/.exec(value.trim());
  if (!match) return undefined;
  const cpu = match[2] === 'm' ? Number(match[1]) / 1000 : Number(match[1]);
  return Number.isFinite(cpu) ? cpu : undefined;
}

/** MiB of a Kubernetes-style memory quantity ("512Mi", "1Gi", "2G", "1000M"); undefined when it is not one. */
export function parseMemoryMib(value: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(Mi|Gi|M|G)$/.exec(value.trim());
  if (!match) return undefined;
  const amount = Number(match[1]);
  const bytes = { Mi: MIB, Gi: 1024 * MIB, M: 1e6, G: 1e9 }[match[2] as 'Mi' | 'Gi' | 'M' | 'G'] * amount;
  return bytes / MIB;
}

/**
 * Problems of a CPU, memory and concurrency combination, checked together because Cloud Run refuses
 * some of them and the worker needs memory for every document in flight. Every problem names its keys.
 */
export function resourceProblems(s: {
  cpu: string;
  memory: string;
  concurrency: number;
  analyzerMaxInFlight: number;
  maxObjectBytes: number;
  pushBodyLimitBytes: number;
}): string[] {
  const problems: string[] = [];
  const cpu = parseCpu(s.cpu);
  const memoryMib = parseMemoryMib(s.memory);
  // Below 1, Cloud Run takes steps of 0.001 vCPU.
  const fractionValid =
    cpu !== undefined && cpu >= 0.08 && cpu < 1 && Number.isInteger(Math.round(cpu * 1e6) / 1e3);
  const cpuValid = cpu !== undefined && (fractionValid || WHOLE_CPUS.includes(cpu));
  if (!cpuValid) {
    problems.push(
      `cpu must be from 0.08 to below 1 in steps of 0.001 (e.g. "0.5" or "500m") or one of ${WHOLE_CPUS.join(', ')} (got "${s.cpu}"): Cloud Run accepts no other value.`,
    );
  }
  if (memoryMib === undefined) {
    problems.push(`memory must be a quantity such as 512Mi, 1Gi or 2G (got "${s.memory}").`);
  }
  if (cpu !== undefined && cpu < 1 && s.concurrency > 1) {
    problems.push(
      `cpu (${s.cpu}) below 1 needs concurrency 1 (got ${s.concurrency}): Cloud Run refuses fractional CPU with concurrent requests. Set cpu to 1 or concurrency to 1.`,
    );
  }
  if (cpuValid && memoryMib !== undefined) {
    const { min, max } = memoryRangeMib(cpu);
    const leastCpu = minCpuForMemory(memoryMib);
    if (memoryMib < min || memoryMib > max) {
      problems.push(
        `memory (${s.memory}) is outside what Cloud Run allows with cpu ${s.cpu}: from ${min} MiB to ${max} MiB. Change memory or cpu.`,
      );
    } else if (cpu < leastCpu) {
      problems.push(
        `memory (${s.memory}) needs at least ${leastCpu} vCPU on Cloud Run (got cpu ${s.cpu}). Raise cpu or lower memory.`,
      );
    }
  }
  if (
    memoryMib !== undefined &&
    Number.isInteger(s.concurrency) &&
    s.concurrency >= 1 &&
    Number.isInteger(s.analyzerMaxInFlight) &&
    s.analyzerMaxInFlight >= 1
  ) {
    // Only admitted deliveries hold a document; the others wait in line with their push body.
    const holding = Math.min(s.concurrency, s.analyzerMaxInFlight);
    const needMib = Math.ceil(
      (holding * s.maxObjectBytes * MEMORY_PER_OBJECT_FACTOR + s.concurrency * s.pushBodyLimitBytes) / MIB +
        WORKER_BASELINE_MEMORY_MIB,
    );
    if (memoryMib < needMib) {
      problems.push(
        `memory (${s.memory}) is below what the worker may hold at once: ${holding} documents in analysis ` +
          `(the lesser of concurrency ${s.concurrency} and analyzerMaxInFlight ${s.analyzerMaxInFlight}) × maxObjectBytes ${s.maxObjectBytes} B × ${MEMORY_PER_OBJECT_FACTOR} ` +
          `(bytes, base64 and request body) + concurrency × pushBodyLimitBytes ${s.pushBodyLimitBytes} B + ${WORKER_BASELINE_MEMORY_MIB} MiB = ${needMib} MiB. ` +
          'Raise memory, or lower analyzerMaxInFlight, maxObjectBytes or concurrency.',
      );
    }
  }
  return problems;
}

/** Whether a Cloud Scheduler schedule has the five fields of a unix-cron expression. */
function isCron(schedule: string): boolean {
  const fields = schedule.trim().split(/\s+/);
  return fields.length === 5 && fields.every((f) => /^[\d*,/\-A-Za-z?]+$/.test(f));
}

/** Raw `docline:*` values as strings, the way the CLI hands them over. */
export type RawConfig = Readonly<Record<string, string | undefined>>;

const STACK_NAME = /^[a-z][a-z0-9-]{0,11}$/;

/**
 * Parses and validates the raw values. Pure, so the rules are testable without Pulumi; every
 * problem names its key and the fix, and all of them are reported at once.
 */
export function parseStackConfig(
  project: string | undefined,
  stack: string,
  raw: RawConfig,
  today: Date = new Date(),
): StackConfig {
  // The CLI hands over an empty string for a key set to nothing: that means the default too.
  const given = (key: string): string | undefined => (raw[key] === '' ? undefined : raw[key]);
  const values = new ConfigValues(given);
  const problems = values.problems;
  const text = (key: string, fallback: string): string => given(key) ?? fallback;
  const number = (key: string, fallback: number): number =>
    values.read(key, finiteNumber, fallback, (value) => `${key} must be a number (got "${value}").`);
  const boolean = (key: string, fallback: boolean): boolean =>
    values.read(key, booleanText, fallback, (value) => `${key} must be true or false (got "${value}").`);
  const list = (key: string, fallback: readonly string[]): readonly string[] =>
    values.read<readonly string[]>(
      key,
      jsonStringList,
      fallback,
      (value) => `${key} must be a list of strings (got ${value}); in a stack file write it as a YAML list.`,
    );

  for (const [key, instead] of Object.entries(RETIRED_KEYS)) {
    if (given(key) !== undefined) problems.push(`${key} is not a setting: ${instead}`);
  }
  const documentsPerDay = number('documentsPerDay', STACK_DEFAULTS.documentsPerDay);
  const volumeValid = Number.isInteger(documentsPerDay) && documentsPerDay >= 1;
  if (!volumeValid) {
    problems.push(
      `documentsPerDay must be a whole number of documents a day, at least 1 (got ${documentsPerDay}).`,
    );
  }
  const volume = volumeValid ? documentsPerDay : STACK_DEFAULTS.documentsPerDay;
  // Read without reporting: `concurrency` is read, and reported if wrong, with the worker's keys.
  const givenConcurrency = Number(given('concurrency') ?? STACK_DEFAULTS.concurrency);
  const maxInstancesDefault = derivedMaxInstances(
    volume,
    givenConcurrency >= 1 ? givenConcurrency : STACK_DEFAULTS.concurrency,
  );

  const delivery: DeliverySettings = {
    ackDeadlineSeconds: number('ackDeadlineSeconds', DELIVERY_DEFAULTS.ackDeadlineSeconds),
    minRetryBackoffSeconds: number('minRetryBackoffSeconds', DELIVERY_DEFAULTS.minRetryBackoffSeconds),
    maxRetryBackoffSeconds: number('maxRetryBackoffSeconds', DELIVERY_DEFAULTS.maxRetryBackoffSeconds),
    maxDeliveryAttempts: number('maxDeliveryAttempts', DELIVERY_DEFAULTS.maxDeliveryAttempts),
    messageRetentionSeconds: number('messageRetentionSeconds', DELIVERY_DEFAULTS.messageRetentionSeconds),
    deadLetterRetentionSeconds: number(
      'deadLetterRetentionSeconds',
      DELIVERY_DEFAULTS.deadLetterRetentionSeconds,
    ),
    workerTimeoutSeconds: number('workerTimeoutSeconds', DELIVERY_DEFAULTS.workerTimeoutSeconds),
    // Not configurable: the margin is what keeps the ack deadline honest.
    ackDeadlineMarginSeconds: DELIVERY_DEFAULTS.ackDeadlineMarginSeconds,
    analyzerTimeoutMs: number('analyzerTimeoutMs', DELIVERY_DEFAULTS.analyzerTimeoutMs),
    analyzerQuotaWaitMs: number('analyzerQuotaWaitMs', DELIVERY_DEFAULTS.analyzerQuotaWaitMs),
    analyzerMaxInFlight: number('analyzerMaxInFlight', DELIVERY_DEFAULTS.analyzerMaxInFlight),
    readTimeoutMs: number('readTimeoutMs', DELIVERY_DEFAULTS.readTimeoutMs),
    redeliveryWindowDays: number('redeliveryWindowDays', DELIVERY_DEFAULTS.redeliveryWindowDays),
    // 0 (the default) derives the cap from documentsPerDay (contract/cost-model.ts).
    maximumBytesBilled: number('maximumBytesBilled', 0) || derivedMaximumBytesBilled(volume),
    maxObjectBytes: number('maxObjectBytes', DELIVERY_DEFAULTS.maxObjectBytes),
    pushBodyLimitBytes: number('pushBodyLimitBytes', DELIVERY_DEFAULTS.pushBodyLimitBytes),
    dedupKeyMode: text('dedupKeyMode', DELIVERY_DEFAULTS.dedupKeyMode) as DedupKeyMode,
    geminiModel: text('geminiModel', DELIVERY_DEFAULTS.geminiModel),
    batchMaxRows: number('batchMaxRows', DELIVERY_DEFAULTS.batchMaxRows),
    batchMaxWaitMs: number('batchMaxWaitMs', DELIVERY_DEFAULTS.batchMaxWaitMs),
    // 0 (the default) derives the pace from the stack's own maxInstances, so a bigger deployment
    // slows each instance down instead of overrunning the table's DML budget.
    mergeMinIntervalMs:
      number('mergeMinIntervalMs', 0) ||
      derivedMergeMinIntervalMs(number('maxInstances', 0) || maxInstancesDefault),
  };
  problems.push(...settingsProblems(delivery));
  // A retired model answers 404: every document would wait 503s out to the dead-letter topic.
  problems.push(...modelLifecycle(delivery.geminiModel, today).errors);
  const requiredCap = requiredMaximumBytesBilled(volume);
  if (
    volumeValid &&
    delivery.maximumBytesBilled >= MIN_MAXIMUM_BYTES_BILLED &&
    delivery.maximumBytesBilled < requiredCap
  ) {
    problems.push(
      `maximumBytesBilled (${delivery.maximumBytesBilled}) is below what the table's statements are estimated at for ` +
        `documentsPerDay (${documentsPerDay}): BigQuery would refuse every statement over it, and every document ` +
        `would end in the dead-letter topic. Raise maximumBytesBilled to at least ${requiredCap} (or unset it: it ` +
        'is derived from documentsPerDay), or lower documentsPerDay.',
    );
  }
  if (delivery.workerTimeoutSeconds > 3600 || delivery.workerTimeoutSeconds < 1) {
    problems.push(
      `workerTimeoutSeconds must be from 1 to 3600, Cloud Run's limit (got ${delivery.workerTimeoutSeconds}).`,
    );
  }
  if (delivery.readTimeoutMs >= delivery.workerTimeoutSeconds * 1000) {
    problems.push(
      `readTimeoutMs (${delivery.readTimeoutMs}) must be below workerTimeoutSeconds (${delivery.workerTimeoutSeconds}s).`,
    );
  }

  const worker: WorkerSettings = {
    image: given('image'),
    imageKeepCount: number('imageKeepCount', STACK_DEFAULTS.imageKeepCount),
    minInstances: number('minInstances', STACK_DEFAULTS.minInstances),
    // 0 (the default) derives the instances from documentsPerDay and concurrency.
    maxInstances: number('maxInstances', 0) || maxInstancesDefault,
    concurrency: number('concurrency', STACK_DEFAULTS.concurrency),
    cpu: text('cpu', STACK_DEFAULTS.cpu),
    memory: text('memory', STACK_DEFAULTS.memory),
    logLevel: text('logLevel', STACK_DEFAULTS.logLevel),
    allowedContentTypes: list('allowedContentTypes', DEFAULT_CONTENT_TYPES),
    verifyPushTokenInApp: boolean('verifyPushTokenInApp', STACK_DEFAULTS.verifyPushTokenInApp),
  };
  if (worker.image !== undefined && /\s/.test(worker.image)) {
    problems.push(
      `image must be an image reference such as REGION-docker.pkg.dev/PROJECT/REPO/worker:TAG (got "${worker.image}").`,
    );
  }
  if (!Number.isInteger(worker.minInstances) || worker.minInstances < 0) {
    problems.push(`minInstances must be a whole number from 0 (got ${worker.minInstances}).`);
  }
  if (
    !Number.isInteger(worker.maxInstances) ||
    worker.maxInstances < 1 ||
    worker.maxInstances < worker.minInstances
  ) {
    problems.push(
      `maxInstances must be a whole number, at least 1 and at least minInstances (${worker.minInstances}) (got ${worker.maxInstances}).`,
    );
  }
  if (!Number.isInteger(worker.concurrency) || worker.concurrency < 1 || worker.concurrency > 1000) {
    problems.push(`concurrency must be a whole number from 1 to 1000 (got ${worker.concurrency}).`);
  }
  if (!(LOG_LEVELS as readonly string[]).includes(worker.logLevel)) {
    problems.push(`logLevel must be one of ${LOG_LEVELS.join(', ')} (got ${worker.logLevel}).`);
  }
  if (!Number.isInteger(worker.imageKeepCount) || worker.imageKeepCount < 1 || worker.imageKeepCount > 100) {
    problems.push(`imageKeepCount must be a whole number from 1 to 100 (got ${worker.imageKeepCount}).`);
  }
  problems.push(
    ...resourceProblems({
      cpu: worker.cpu,
      memory: worker.memory,
      concurrency: worker.concurrency,
      analyzerMaxInFlight: delivery.analyzerMaxInFlight,
      maxObjectBytes: delivery.maxObjectBytes,
      pushBodyLimitBytes: delivery.pushBodyLimitBytes,
    }),
  );
  const neededInstances = instancesForVolume(volume, worker.concurrency > 0 ? worker.concurrency : 1);
  if (volumeValid && Number.isInteger(worker.maxInstances) && worker.maxInstances < neededInstances) {
    problems.push(
      `maxInstances (${worker.maxInstances}) cannot carry documentsPerDay (${documentsPerDay}): at ${VOLUME.peakFactor} × the ` +
        `average rate, ${VOLUME.secondsInFlight} s a delivery and concurrency ${worker.concurrency}, it needs ${neededInstances}. ` +
        'Raise maxInstances (or unset it: it is derived from documentsPerDay) or concurrency, or lower documentsPerDay.',
    );
  }
  // Group commit's MERGEs share the table's DML budget.
  problems.push(
    ...dmlBudgetProblems({
      maxInstances: worker.maxInstances,
      mergeMinIntervalMs: delivery.mergeMinIntervalMs,
    }),
  );
  if (worker.allowedContentTypes.length === 0) {
    problems.push('allowedContentTypes must name at least one content type, or every document is rejected.');
  }

  const alerts: AlertSettings = {
    deadLetterMessagesThreshold: number(
      'deadLetterMessagesThreshold',
      STACK_DEFAULTS.deadLetterMessagesThreshold,
    ),
    oldestUnackedAgeSeconds: number('oldestUnackedAgeSeconds', STACK_DEFAULTS.oldestUnackedAgeSeconds),
    duplicateRatePerMille: number('duplicateRatePerMille', STACK_DEFAULTS.duplicateRatePerMille),
    notificationChannels: list('notificationChannels', []),
  };
  if (alerts.deadLetterMessagesThreshold < 0) {
    problems.push(
      `deadLetterMessagesThreshold must be 0 or more (got ${alerts.deadLetterMessagesThreshold}).`,
    );
  }
  if (alerts.oldestUnackedAgeSeconds < 60) {
    problems.push(`oldestUnackedAgeSeconds must be at least 60 (got ${alerts.oldestUnackedAgeSeconds}).`);
  }
  if (
    !Number.isInteger(alerts.duplicateRatePerMille) ||
    alerts.duplicateRatePerMille < 1 ||
    alerts.duplicateRatePerMille > 999
  ) {
    problems.push(
      `duplicateRatePerMille must be a whole number from 1 to 999, e.g. 10 for 1 % (got ${alerts.duplicateRatePerMille}).`,
    );
  }

  const reconcile: ReconcileSettings = {
    mode: text('reconcileMode', STACK_DEFAULTS.reconcileMode) as ReconcileMode,
    schedule: text('reconcileSchedule', STACK_DEFAULTS.reconcileSchedule),
  };
  if (!RECONCILE_MODES.includes(reconcile.mode)) {
    problems.push(`reconcileMode must be one of ${RECONCILE_MODES.join(', ')} (got ${reconcile.mode}).`);
  }
  if (reconcile.mode === 'apply' && delivery.dedupKeyMode === 'message') {
    problems.push(
      'reconcileMode apply needs dedupKeyMode object: in message mode an announcement made again is a new message, so new work and a second row. Use reconcileMode report.',
    );
  }
  if (!isCron(reconcile.schedule)) {
    problems.push(
      `reconcileSchedule must be a five-field cron expression such as "0 3 * * *" (got "${reconcile.schedule}").`,
    );
  }

  if (project === undefined || project === '') {
    problems.push('gcp:project is not set: run `pulumi config set gcp:project YOUR_PROJECT_ID`.');
  }
  if (!STACK_NAME.test(stack)) {
    problems.push(
      `the stack name "${stack}" must be 1–12 lowercase letters, digits or dashes, starting with a letter: ` +
        'it is part of service account ids, which Google limits to 30 characters.',
    );
  }

  // Delivery and data-keeping settings (a block of its own).
  const keeping: KeepingSettings = {
    tableVersion: number('tableVersion', 1),
    promotedImage: boolean('promotedImage', false),
    allowKnobChange: given('allowKnobChange'),
    documentRetentionYears: number('documentRetentionYears', 0),
    documentRetentionLocked: boolean('documentRetentionLocked', false),
  };
  const budgetRaw = {
    billingAccount: text('budgetBillingAccount', ''),
    monthlyAmount: number('budgetMonthlyAmount', 0),
  };
  problems.push(...keepingProblems(keeping, budgetRaw));
  // Normalised once: every later comparison (the region check, the fixed-knob guards) is exact.
  const region = normalisedLocation(text('region', STACK_DEFAULTS.region));
  const dataLocation = normalisedLocation(text('dataLocation', STACK_DEFAULTS.dataLocation));
  problems.push(...regionProblems(region, dataLocation));

  if (problems.length > 0) throw new StackConfigError(problems);
  return Object.freeze({
    project: project ?? '',
    stack,
    documentsPerDay,
    prefix: `docline-${stack}`,
    region,
    dataLocation,
    // One default for the worker and the stack, next to the data (contract/settings.ts).
    geminiLocation: text('geminiLocation', defaultGeminiLocation(dataLocation)),
    deletionProtection: boolean('deletionProtection', STACK_DEFAULTS.deletionProtection),
    delivery: Object.freeze(delivery),
    worker: Object.freeze(worker),
    alerts: Object.freeze(alerts),
    reconcile: Object.freeze(reconcile),
    keeping: Object.freeze(keeping),
    budget: budgetRaw.billingAccount === '' ? undefined : Object.freeze(budgetRaw),
  });
}

/** Keys a stack file may still carry that no longer mean anything, with what to do instead. */
const RETIRED_KEYS: Readonly<Record<string, string>> = {
  writeMode:
    'rows reach BigQuery only by the conditional MERGE. Remove docline:writeMode from the stack file.',
  dedupWindowDays:
    'it is called redeliveryWindowDays (the days a delivery can still arrive). Rename the key.',
};

/** The `docline:*` keys this program reads (and Pulumi.yaml declares). */
export const CONFIG_KEYS = [
  'image',
  'region',
  'dataLocation',
  'geminiLocation',
  'deletionProtection',
  'documentsPerDay',
  'ackDeadlineSeconds',
  'minRetryBackoffSeconds',
  'maxRetryBackoffSeconds',
  'maxDeliveryAttempts',
  'messageRetentionSeconds',
  'deadLetterRetentionSeconds',
  'workerTimeoutSeconds',
  'analyzerTimeoutMs',
  'analyzerQuotaWaitMs',
  'analyzerMaxInFlight',
  'readTimeoutMs',
  'redeliveryWindowDays',
  'maximumBytesBilled',
  'maxObjectBytes',
  'pushBodyLimitBytes',
  'dedupKeyMode',
  'geminiModel',
  'batchMaxRows',
  'batchMaxWaitMs',
  'mergeMinIntervalMs',
  'imageKeepCount',
  'minInstances',
  'maxInstances',
  'concurrency',
  'cpu',
  'memory',
  'logLevel',
  'allowedContentTypes',
  'verifyPushTokenInApp',
  'deadLetterMessagesThreshold',
  'oldestUnackedAgeSeconds',
  'duplicateRatePerMille',
  'notificationChannels',
  'reconcileMode',
  'reconcileSchedule',
  // Delivery and data-keeping settings.
  'tableVersion',
  'promotedImage',
  'allowKnobChange',
  'documentRetentionYears',
  'documentRetentionLocked',
  'budgetBillingAccount',
  'budgetMonthlyAmount',
] as const;

/**
 * Reads the stack's configuration from Pulumi and validates it (throws {@link StackConfigError}).
 * What only warns (a model that retires within 60 days, or one docline's table does not know) is
 * logged as a preview warning.
 */
export function readStackConfig(today: Date = new Date()): StackConfig {
  const docline = new pulumi.Config('docline');
  const raw: Record<string, string | undefined> = {};
  for (const key of [...CONFIG_KEYS, ...Object.keys(RETIRED_KEYS)]) raw[key] = docline.get(key);
  const config = parseStackConfig(new pulumi.Config('gcp').get('project'), pulumi.getStack(), raw, today);
  // The engine shows the warning in the preview; the log call's own promise carries nothing to wait for.
  for (const warning of modelLifecycle(config.delivery.geminiModel, today).warnings)
    void pulumi.log.warn(warning);
  // What Gemini capacity the volume needs (Vertex AI's shared capacity, or the Gemini API's tier).
  void pulumi.log.info(geminiCapacityNote(config.documentsPerDay));
  return config;
}
