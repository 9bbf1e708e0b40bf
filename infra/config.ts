import * as pulumi from '@pulumi/pulumi';
import { SettingReader } from '../worker/src/contract/config-values';
import {
  BUSIEST_DAY_FACTOR,
  derivedMaximumBytesBilled,
  requiredMaximumBytesBilled,
} from '../worker/src/contract/cost-model';
import { geminiCapacityNote } from '../worker/src/contract/gemini-tiers';
import { modelLifecycle } from '../worker/src/contract/models';
import {
  ackDeadlineSecondsFor,
  DEFAULT_MAX_INSTANCES,
  DELIVERY_DEFAULTS,
  type DeliverySettings,
  defaultGeminiLocation,
  dmlBudgetProblems,
  mergeMinIntervalMsFor,
  minRedeliveryWindowDays,
  PUBSUB_MAX_ACK_DEADLINE_SECONDS,
  type ReconcileMode,
  type SettingValue,
  STACK_KEYS,
  type StackKey,
  settingsProblems,
} from '../worker/src/contract/settings';
import {
  DUPLICATE_RATE_PER_MILLE,
  IMAGE_KEEP_COUNT,
  OLDEST_UNACKED_AGE_SECONDS,
  RECONCILE_SCHEDULE,
} from './fixed';
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

/**
 * The stack's configuration: the only module that reads `pulumi.Config`. Every `docline:*` key is a
 * row of the settings table (worker/src/contract/settings.ts), which Pulumi.yaml's block is written
 * from, so the stack, the worker and the local pipeline cannot drift apart.
 */

/** Every `docline:*` key's value, read and checked against its row (0 where 0 derives it). */
export type StackSettings = { readonly [K in StackKey]: SettingValue<K> };

/** Everything the worker service needs beyond the delivery settings. */
export interface WorkerSettings {
  /** Container image reference; unset: the stack builds worker/Dockerfile and pushes it itself. */
  readonly image: string | undefined;
  readonly minInstances: number;
  readonly maxInstances: number;
  /** Requests one instance serves at once (Cloud Run `maxInstanceRequestConcurrency`). */
  readonly concurrency: number;
  readonly cpu: string;
  readonly memory: string;
  readonly logLevel: string;
  readonly allowedContentTypes: readonly string[];
}

/** What a routine change may not do to the stack's data, and how the stack is delivered. */
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
  /** Every key as set (or its default): what the stack passes to the worker comes from here. */
  readonly settings: StackSettings;
  readonly delivery: Readonly<DeliverySettings>;
  readonly worker: WorkerSettings;
  /**
   * Where the alert policies notify (their thresholds are constants: infra/fixed.ts): Monitoring
   * notification channel ids (`projects/P/notificationChannels/N`).
   */
  readonly alerts: { readonly notificationChannels: readonly string[] };
  /** The daily Cloud Run job that compares the bucket with the table, to find uploads that have no row. */
  readonly reconcile: { readonly mode: ReconcileMode };
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
  const values = new SettingReader((key) => (raw[key] === '' ? undefined : raw[key]), 'stack');
  const problems = values.problems;
  for (const [key, instead] of Object.entries(RETIRED_KEYS)) {
    if (raw[key] !== undefined && raw[key] !== '')
      problems.push(`${key} is not a setting: ${instead}. Remove docline:${key} from the stack file.`);
  }
  const settings = Object.fromEntries(STACK_KEYS.map((key) => [key, values.setting(key)])) as StackSettings;
  const { documentsPerDay, concurrency } = settings;
  const maxInstances = settings.maxInstances || derivedMaxInstances(documentsPerDay, concurrency);

  const delivery: DeliverySettings = {
    ...DELIVERY_DEFAULTS,
    // The worker's timeout plus the margin: a push request is never cut short by a redelivery.
    ackDeadlineSeconds: ackDeadlineSecondsFor(settings.workerTimeoutSeconds),
    messageRetentionSeconds: settings.messageRetentionSeconds,
    deadLetterRetentionSeconds: settings.deadLetterRetentionSeconds,
    workerTimeoutSeconds: settings.workerTimeoutSeconds,
    analyzerMaxInFlight: settings.analyzerMaxInFlight,
    // Long enough that a dead letter replayed on its last day still finds its paid analysis.
    redeliveryWindowDays: minRedeliveryWindowDays(settings),
    // 0 (the default) derives the cap from documentsPerDay (contract/cost-model.ts).
    maximumBytesBilled: settings.maximumBytesBilled || derivedMaximumBytesBilled(documentsPerDay),
    maxObjectBytes: settings.maxObjectBytes,
    dedupKeyMode: settings.dedupKeyMode,
    geminiModel: settings.geminiModel,
    // Derived from the stack's own maxInstances, so a bigger deployment slows each instance down
    // instead of overrunning the table's DML budget.
    mergeMinIntervalMs: mergeMinIntervalMsFor(maxInstances),
  };
  problems.push(...settingsProblems(delivery));
  // A retired model answers 404: every document would wait 503s out to the dead-letter topic.
  problems.push(...modelLifecycle(delivery.geminiModel, today).errors);
  const requiredCap = requiredMaximumBytesBilled(documentsPerDay);
  if (delivery.maximumBytesBilled < requiredCap) {
    problems.push(
      `maximumBytesBilled (${delivery.maximumBytesBilled}) is below what the table's statements are estimated at for ` +
        `documentsPerDay (${documentsPerDay}): BigQuery would refuse every statement over it, and every document ` +
        `would end in the dead-letter topic. Raise maximumBytesBilled to at least ${requiredCap} (or unset it: it ` +
        'is derived from documentsPerDay), or lower documentsPerDay.',
    );
  }

  const worker: WorkerSettings = {
    image: settings.image,
    minInstances: settings.minInstances,
    // 0 (the default) derives the instances from documentsPerDay and concurrency.
    maxInstances,
    concurrency,
    cpu: settings.cpu,
    memory: settings.memory,
    logLevel: settings.logLevel,
    allowedContentTypes: settings.allowedContentTypes,
  };
  if (worker.maxInstances < worker.minInstances) {
    problems.push(
      `maxInstances must be at least minInstances (${worker.minInstances}) (got ${worker.maxInstances}).`,
    );
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
  const neededInstances = instancesForVolume(documentsPerDay, worker.concurrency);
  if (worker.maxInstances < neededInstances) {
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

  const reconcile = { mode: settings.reconcileMode };
  if (reconcile.mode === 'apply' && delivery.dedupKeyMode === 'message') {
    problems.push(
      'reconcileMode apply needs dedupKeyMode object: in message mode an announcement made again is a new message, so new work and a second row. Use reconcileMode report.',
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

  const keeping: KeepingSettings = {
    tableVersion: settings.tableVersion,
    promotedImage: settings.promotedImage,
    allowKnobChange: settings.allowKnobChange,
    documentRetentionYears: settings.documentRetentionYears,
    documentRetentionLocked: settings.documentRetentionLocked,
  };
  if (keeping.documentRetentionLocked && keeping.documentRetentionYears === 0) {
    problems.push(
      'documentRetentionLocked needs documentRetentionYears above 0: there is no retention policy to lock.',
    );
  }
  const billingAccount = settings.budgetBillingAccount;
  const monthlyAmount = settings.budgetMonthlyAmount;
  if (billingAccount !== undefined && !(monthlyAmount > 0)) {
    problems.push(
      `budgetMonthlyAmount must be above 0 when budgetBillingAccount is set (got ${monthlyAmount}).`,
    );
  }
  // Normalised once: every later comparison (the region check, the fixed-knob guards) is exact.
  const region = normalisedLocation(settings.region);
  const dataLocation = normalisedLocation(settings.dataLocation);
  problems.push(...regionProblems(region, dataLocation));

  if (problems.length > 0) throw new StackConfigError(problems);
  return Object.freeze({
    project: project ?? '',
    stack,
    documentsPerDay,
    settings: Object.freeze(settings),
    prefix: `docline-${stack}`,
    region,
    dataLocation,
    // One default for the worker and the stack, next to the data (contract/settings.ts).
    geminiLocation: settings.geminiLocation ?? defaultGeminiLocation(dataLocation),
    deletionProtection: settings.deletionProtection,
    delivery: Object.freeze(delivery),
    worker: Object.freeze(worker),
    alerts: Object.freeze({
      notificationChannels: settings.notificationChannels,
    }),
    reconcile: Object.freeze(reconcile),
    keeping: Object.freeze(keeping),
    budget: billingAccount === undefined ? undefined : Object.freeze({ billingAccount, monthlyAmount }),
  });
}

/** Keys a stack file may still carry that no longer mean anything, with what to do instead. */
const RETIRED_KEYS: Readonly<Record<string, string>> = {
  writeMode: 'rows reach BigQuery only by the conditional MERGE',
  // Knobs nobody should turn: constants, or derived from the keys that stay.
  ...Object.fromEntries(
    Object.entries({
      "Pub/Sub's retry and dead-letter policy are constants, which ride out a 6-hour outage (DELIVERY_POLICY, worker/src/contract/settings.ts)":
        ['minRetryBackoffSeconds', 'maxRetryBackoffSeconds', 'maxDeliveryAttempts'],
      'the worker runs with its own default (docs/configuration.md)': [
        'analyzerTimeoutMs',
        'analyzerQuotaWaitMs',
        'readTimeoutMs',
        'pushBodyLimitBytes',
        'batchMaxRows',
        'batchMaxWaitMs',
      ],
      'the MERGE pace is derived from maxInstances: set maxInstances instead': ['mergeMinIntervalMs'],
      'the redelivery window is derived: messageRetentionSeconds + deadLetterRetentionSeconds + 1 day': [
        'redeliveryWindowDays',
        'dedupWindowDays',
      ],
      [`the alerts fire on any dead letter and on a push message unacknowledged for ${OLDEST_UNACKED_AGE_SECONDS / 60} minutes`]:
        ['deadLetterMessagesThreshold', 'oldestUnackedAgeSeconds'],
      [`the push subscription's ack deadline is derived: workerTimeoutSeconds + ${DELIVERY_DEFAULTS.ackDeadlineMarginSeconds} s, at most ${PUBSUB_MAX_ACK_DEADLINE_SECONDS} s (set workerTimeoutSeconds instead)`]:
        ['ackDeadlineSeconds'],
      [`the duplicate-answers alert fires above ${DUPLICATE_RATE_PER_MILLE} per mille of the answers`]: [
        'duplicateRatePerMille',
      ],
      [`the image repository keeps the ${IMAGE_KEEP_COUNT} most recent images`]: ['imageKeepCount'],
      [`the reconcile job runs on the fixed schedule "${RECONCILE_SCHEDULE}" (cron, UTC)`]: [
        'reconcileSchedule',
      ],
      "the worker always verifies the push token too, on top of Cloud Run's invoker check": [
        'verifyPushTokenInApp',
      ],
    }).flatMap(([why, keys]) => keys.map((key) => [key, why])),
  ),
};

/**
 * Reads the stack's configuration from Pulumi and validates it (throws {@link StackConfigError}).
 * What only warns (a model that retires within 60 days, or one docline's table does not know) is
 * logged as a preview warning.
 */
export function readStackConfig(today: Date = new Date()): StackConfig {
  const docline = new pulumi.Config('docline');
  const raw: Record<string, string | undefined> = {};
  for (const key of [...STACK_KEYS, ...Object.keys(RETIRED_KEYS)]) raw[key] = docline.get(key);
  const config = parseStackConfig(new pulumi.Config('gcp').get('project'), pulumi.getStack(), raw, today);
  // The engine shows the warning in the preview; the log call's own promise carries nothing to wait for.
  for (const warning of modelLifecycle(config.delivery.geminiModel, today).warnings)
    void pulumi.log.warn(warning);
  // What Gemini capacity the volume needs (Vertex AI's shared capacity, or the Gemini API's tier).
  void pulumi.log.info(geminiCapacityNote(config.documentsPerDay));
  return config;
}
