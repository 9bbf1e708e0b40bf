/**
 * The canary: one invoice uploaded under its own prefix, followed stage by stage until its row is in
 * the `documents` view, bounded in time. On failure it names the first stage that did not answer:
 * the notification (no message on the uploads topic), the push (Pub/Sub never reached the worker),
 * the worker (it received the message and did not answer it `ok`) or the table (the worker answered
 * and no row is readable). The same check runs after every deploy (`npm run canary -- --target
 * cloud`, the deploy workflow) and inside `npm run e2e` on the local pipeline, so its code is
 * exercised here. Canary objects are documents like any other (reconcile compares them, the dedup
 * key covers them); only the business views and the duplicate-share alert leave them out
 * (worker/src/contract/views.ts {@link CANARY_PREFIX}).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { CANARY_PREFIX } from '../../worker/src/contract/views';

export { CANARY_PREFIX };

/** The stages a document passes, in order. */
export const CANARY_STAGES = ['notification', 'push', 'worker', 'table'] as const;
export type CanaryStage = (typeof CANARY_STAGES)[number];

/** What the worker answered a message, as its log line says. */
export interface WorkerAnswer {
  /** `ok`, `rejected`, `duplicate`, or `error` (a 503 Pub/Sub retries). */
  readonly status: string;
  readonly detail?: string;
}

/**
 * How a target is observed. `push` and `worker` may be undefined where the target cannot tell
 * (no access to the worker's log lines): those stages are then reported together with the next one.
 */
export interface CanaryProbes {
  readonly description: string;
  /** Uploads the canary; resolves with its object URI (`gs://b/n#g`). */
  upload(name: string, bytes: Buffer): Promise<string>;
  /** The messageId that announced the object, once it is on the uploads topic. */
  notification(objectUri: string): Promise<string | undefined>;
  /** Whether the worker received that message (any of its lines names it). */
  push?: (messageId: string) => Promise<boolean>;
  /** The worker's last answer to that message, once it answered. */
  worker?: (messageId: string) => Promise<WorkerAnswer | undefined>;
  /** The object's row in the `documents` view, once readable. */
  row(objectUri: string): Promise<{ status: string; reason?: string | null } | undefined>;
  /** Whether `push` and `worker` can still tell (a log read refused turns them off); default: defined. */
  observes?: (stage: 'push' | 'worker') => boolean;
  close?: () => Promise<void>;
}

export type CanaryResult =
  | { ok: true; objectUri: string; seconds: Record<CanaryStage, number | undefined> }
  | { ok: false; objectUri: string | undefined; stage: CanaryStage; message: string };

export interface CanaryOptions {
  /** How long the whole check may take. */
  timeoutMs: number;
  /** Pause between two polls. */
  pollMs?: number;
  /** The run's id, part of the object name (the time, by default). */
  runId?: string;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /** Progress lines (one per stage reached). */
  print?: (line: string) => void;
}

/** The invoice the canary uploads: a small text invoice every analyzer reads. */
export const CANARY_SAMPLE = path.join(__dirname, '../../samples/invoices/en-02-invoice-hosting.txt');

/** The canary's object name: under {@link CANARY_PREFIX}, unique per run. */
export function canaryObjectName(runId: string): string {
  return `${CANARY_PREFIX}${runId}/${path.basename(CANARY_SAMPLE)}`;
}

const WHY: Record<CanaryStage, string> = {
  notification:
    'no message for it reached the uploads topic: the bucket notification is missing, or Cloud Storage cannot publish (the storage agent’s publisher grant, the topic’s message storage policy)',
  push: 'the message was published but never reached the worker: the push subscription is missing or detached, or pushes are refused before the worker (the push account’s run.invoker grant, the OIDC audience)',
  worker:
    'the worker received the message and did not answer it ok: read its lines for this messageId (the image cannot be pulled, the startup probe fails, a dependency refuses)',
  table:
    'the worker answered but no row is readable in the documents view: the table, the view or the worker’s write (its dataEditor grant, the byte cap)',
};

/**
 * Uploads the canary and follows it. Never throws for a stage that does not answer: the result
 * names it. Errors of the probes themselves (credentials, a missing output) propagate.
 */
export async function runCanary(probes: CanaryProbes, options: CanaryOptions): Promise<CanaryResult> {
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const print = options.print ?? (() => {});
  const pollMs = options.pollMs ?? 2_000;
  const started = now();
  const seconds: Record<CanaryStage, number | undefined> = {
    notification: undefined,
    push: undefined,
    worker: undefined,
    table: undefined,
  };
  const reached = (stage: CanaryStage, extra = '') => {
    if (seconds[stage] !== undefined) return;
    seconds[stage] = Math.round((now() - started) / 100) / 10;
    print(`canary: ${stage} answered after ${seconds[stage]} s${extra}`);
  };

  const name = canaryObjectName(options.runId ?? now().toString(36));
  const objectUri = await probes.upload(name, readFileSync(CANARY_SAMPLE));
  print(`canary: uploaded ${objectUri} to ${probes.description}`);
  let messageId: string | undefined;
  let answer: WorkerAnswer | undefined;
  for (;;) {
    messageId ??= await probes.notification(objectUri);
    if (messageId !== undefined) reached('notification', ` (message ${messageId})`);
    if (
      messageId !== undefined &&
      probes.push &&
      seconds.push === undefined &&
      (await probes.push(messageId))
    )
      reached('push');
    if (messageId !== undefined && probes.worker) {
      answer = (await probes.worker(messageId)) ?? answer;
      if (answer?.status === 'ok' || answer?.status === 'duplicate') reached('worker', ` (${answer.status})`);
    }
    const row = await probes.row(objectUri);
    if (row !== undefined) {
      if (row.status !== 'ok') {
        return {
          ok: false,
          objectUri,
          stage: 'worker',
          message: `canary FAILED at the worker: ${objectUri} got a ${row.status} row (${row.reason ?? 'no reason'}); a canary invoice must be read ok. ${WHY.worker}`,
        };
      }
      // A row proves every stage before it, seen or not.
      for (const stage of CANARY_STAGES) reached(stage);
      return { ok: true, objectUri, seconds };
    }
    if (now() - started >= options.timeoutMs) break;
    await sleep(pollMs);
  }

  const observable = (stage: CanaryStage) =>
    stage === 'notification' ||
    stage === 'table' ||
    (probes[stage] !== undefined && (probes.observes?.(stage) ?? true));
  const stage = CANARY_STAGES.find((s) => seconds[s] === undefined && observable(s)) ?? 'table';
  const unseen = CANARY_STAGES.filter(
    (s) => CANARY_STAGES.indexOf(s) < CANARY_STAGES.indexOf(stage) && !observable(s),
  );
  const together =
    unseen.length > 0 ? ` (this target cannot observe ${unseen.join(' and ')}: it may be there)` : '';
  const lastAnswer =
    stage === 'worker' && answer !== undefined
      ? ` Its last answer: ${answer.status}${answer.detail ? ` (${answer.detail})` : ''}.`
      : '';
  return {
    ok: false,
    objectUri,
    stage,
    message:
      `canary FAILED at the ${stage}${together}: ${objectUri} has no row after ${Math.round(options.timeoutMs / 1000)} s; ` +
      `${WHY[stage]}.${lastAnswer}${messageId ? ` messageId ${messageId}.` : ''}`,
  };
}
