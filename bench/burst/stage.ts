import { DELIVERY_DEFAULTS, type DeliverySettings, SETTINGS } from '../../worker/src/contract/settings';
import {
  type BurstDetails,
  type BurstFigures,
  perDeliveryWiring,
  runScenario,
  type Wiring,
} from './scenario';

/**
 * The burst stage of `npm run bench`: the same burst replayed twice on the simulators, with the
 * seed's per-delivery MERGE and with group commit + the memo, and the figures the goals are about.
 */

/** The burst scenario (10,000 documents in 60 s, 5 % announced twice) and the simulators' published numbers. */
export const BURST_SETTINGS = {
  documents: 10_000,
  duplicateShare: 0.05,
  uploadSeconds: 60,
  timeScale: 100,
  geminiRequestsPerMinute: 1_000,
  geminiLatencyMs: 6_000,
  readLatencyMs: 50,
  instances: SETTINGS.maxInstances.default,
  concurrency: SETTINGS.concurrency.default,
  /** perDelivery is stopped here if it has not drained (simulated seconds). */
  perDeliveryBoundSeconds: 9_000,
  /** groupCommit gets the same bound. */
  groupCommitBoundSeconds: 9_000,
  /** Each run also stops after this many real seconds, so the stage stays under 5 minutes. */
  groupCommitMaxWallSeconds: 150,
  perDeliveryMaxWallSeconds: 120,
};

export interface BurstSection extends Record<string, unknown> {
  documents: number;
  timeScale: number;
  analyzerBoundSeconds: number;
  perDelivery: BurstFigures;
  groupCommit?: BurstFigures;
  /** groupCommit's simulated time against perDelivery's (lower is faster). */
  ratios?: Record<string, number>;
  details: Record<string, BurstDetails>;
  settings: Record<string, number | string>;
  assumptions: string[];
}

/** Assumptions where the documentation gives no number: the README lists the same. */
export const BURST_ASSUMPTIONS: readonly string[] = [
  'Pub/Sub push window: starts at 5 outstanding pushes, +1 per ack (doubles every round trip), +1/window per ack past 3,000, halved by every nack; it is not shrunk for latency above 1 s (the documentation gives no rate, and every push here lasts ≥ 6 s).',
  'Pub/Sub push backoff: each nack pauses the whole subscription for 100 ms × 2^(n−1), capped at 60 s, where n counts nacks not offset by acks (each ack takes one off).',
  'Pub/Sub retry backoff: min × 2^(attempt−1), capped at max, no jitter; the ack deadline is the push timeout and a late answer is ignored.',
  'Cloud Run: every instance up from the start (no cold start); a request waits up to 10 s for a free slot, then 429; at the request timeout Cloud Run answers 504 and frees the slot.',
  'Time: the simulated clock advances at most 2 ms × 100 per 1 ms tick, so the harness CPU time on 2 shared cores is mostly not simulated time (frozenRealSeconds in the details).',
  'BigQuery: a MERGE runs 1–3 s (uniform), a SELECT 0.5–1.5 s; refused statements bill nothing and do not count towards the 25 per 10 s; jobs.query waits 10 s for a job, then the client polls getQueryResults (not counted in queryCalls).',
  'BigQuery: a statement bills max(10 MiB, 75 bytes × rows in the table); a MERGE matches against the table as it was when it started.',
  'Gemini: a 429 answers in 0.1 s, costs nothing and does not count towards the quota (a sliding 60 s window); an analysis answers in 6 s.',
  'Cloud Storage reads take 50 ms; the worker writes no log lines (the same for both runs).',
];

export function settingsForBurst(): DeliverySettings {
  return { ...DELIVERY_DEFAULTS };
}

/** Runs the stage. `groupCommit` is undefined until the group-commit store and the memo exist. */
export async function runBurstStage(options: {
  groupCommit?: Wiring;
  documents?: number;
  progress: (text: string) => void;
}): Promise<BurstSection> {
  const s = { ...BURST_SETTINGS, documents: options.documents ?? BURST_SETTINGS.documents };
  const settings = settingsForBurst();
  const common = {
    documents: s.documents,
    duplicateShare: s.duplicateShare,
    uploadSeconds: s.uploadSeconds,
    timeScale: s.timeScale,
    instances: s.instances,
    concurrency: s.concurrency,
    settings,
    geminiRequestsPerMinute: s.geminiRequestsPerMinute,
    geminiLatencyMs: s.geminiLatencyMs,
    readLatencyMs: s.readLatencyMs,
    progress: options.progress,
  };
  const details: Record<string, BurstDetails> = {};
  let groupCommit: BurstFigures | undefined;
  if (options.groupCommit) {
    options.progress('burst: groupCommit (group commit + memo)');
    const run = await runScenario({
      ...common,
      name: 'groupCommit',
      wiring: options.groupCommit,
      boundSeconds: s.groupCommitBoundSeconds,
      maxWallSeconds: s.groupCommitMaxWallSeconds,
    });
    groupCommit = run.figures;
    details.groupCommit = run.details;
  }
  options.progress('burst: perDelivery (one MERGE per delivery, no memo)');
  const perDelivery = await runScenario({
    ...common,
    name: 'perDelivery',
    wiring: perDeliveryWiring,
    boundSeconds: s.perDeliveryBoundSeconds,
    maxWallSeconds: s.perDeliveryMaxWallSeconds,
  });
  details.perDelivery = perDelivery.details;
  const analyzerBoundSeconds = Math.round((s.documents / s.geminiRequestsPerMinute) * 60);
  return {
    documents: s.documents,
    timeScale: s.timeScale,
    analyzerBoundSeconds,
    perDelivery: perDelivery.figures,
    ...(groupCommit ? { groupCommit } : {}),
    ...(groupCommit
      ? {
          ratios: {
            simulatedSecondsGroupCommitOverPerDelivery:
              groupCommit.simulatedSeconds / perDelivery.figures.simulatedSeconds,
            bytesBilledGroupCommitOverPerDelivery:
              groupCommit.bytesBilledPerDocument / perDelivery.figures.bytesBilledPerDocument,
            simulatedSecondsGroupCommitOverAnalyzerBound: groupCommit.simulatedSeconds / analyzerBoundSeconds,
          },
        }
      : {}),
    details,
    settings: {
      ...s,
      ackDeadlineSeconds: settings.ackDeadlineSeconds,
      minRetryBackoffSeconds: settings.minRetryBackoffSeconds,
      maxRetryBackoffSeconds: settings.maxRetryBackoffSeconds,
      maxDeliveryAttempts: settings.maxDeliveryAttempts,
      workerTimeoutSeconds: settings.workerTimeoutSeconds,
      analyzerQuotaWaitMs: settings.analyzerQuotaWaitMs,
      analyzerMaxInFlight: settings.analyzerMaxInFlight,
      batchMaxRows: settings.batchMaxRows,
      batchMaxWaitMs: settings.batchMaxWaitMs,
      mergeMinIntervalMs: settings.mergeMinIntervalMs,
    },
    assumptions: [...BURST_ASSUMPTIONS],
  };
}
