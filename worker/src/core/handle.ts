import type { Analysis, Usage } from '../contract/analysis';
import type { Row } from '../contract/row';
import type { DedupKeyMode } from '../contract/settings';
import { type CheckLimits, checkContent, checkDeclared } from './check';
import { isRejection, type RejectionReason } from './errors';
import { dedupKey, type PushEvent } from './event';
import type { AnalysisMemo } from './memo';
import type { Analyzer, Clock, Reader, Store } from './ports';

/** Everything `handle` needs; built once by the composition root. */
export interface HandlerDeps {
  store: Store;
  reader: Reader;
  analyzer: Analyzer;
  clock: Clock;
  dedupKeyMode: DedupKeyMode;
  limits: CheckLimits;
  workerVersion: string;
  /** The memo of paid analyses; without it every delivery that gets this far pays. */
  memo?: AnalysisMemo;
}

export type OutcomeStatus = 'ok' | 'rejected' | 'duplicate';

/** What happened to one delivery. */
export interface Outcome {
  status: OutcomeStatus;
  messageId: string;
  dedupKey: string;
  reason?: RejectionReason;
  /** Human-readable detail of a rejection. */
  detail?: string;
  /** Where the duplicate was detected: before any work (`seen`) or at the conditional write (`record`). */
  duplicateAt?: 'seen' | 'record';
  /** Whether the analyzer was called for this delivery. */
  analysed: boolean;
  /** The analysis came from the memo (`hit`) or from a concurrent delivery of the same key (`shared`). */
  memo?: 'hit' | 'shared';
  usage?: Usage;
}

interface Result {
  status: 'ok' | 'rejected';
  reason?: RejectionReason;
  detail?: string;
  analysis?: Analysis;
  model?: string;
  usage?: Usage;
}

/**
 * The idempotent handler: seen → check → read the exact generation → analyse → one conditional
 * write. Nothing is written before the end, so a crash anywhere leaves no trace but the message,
 * which Pub/Sub delivers again. Transient errors propagate (the caller answers 503).
 */
export async function handle(event: PushEvent, deps: HandlerDeps): Promise<Outcome> {
  const key = dedupKey(event, deps.dedupKeyMode);
  const base = { messageId: event.messageId, dedupKey: key };
  if (await deps.store.seen(key))
    return { ...base, status: 'duplicate', duplicateAt: 'seen', analysed: false };

  let analysed = false;
  let memo: Outcome['memo'];
  let result: Result;
  if (event.kind === 'not_work') {
    result = { status: 'rejected', reason: event.reason, detail: event.detail };
  } else {
    try {
      const mime = checkDeclared(event.object, deps.limits);
      const { bucket, name, generation } = event.object;
      const work = async () => {
        const bytes = await deps.reader.read({ bucket, name, generation }, deps.limits.maxObjectBytes);
        checkContent(mime, bytes, deps.limits);
        analysed = true;
        return deps.analyzer.analyze({ bytes, contentType: mime, name });
      };
      const paid = deps.memo
        ? await deps.memo.analyse(key, deps.analyzer.version, work)
        : { result: await work(), source: 'analyzer' as const };
      if (paid.source === 'memo') memo = 'hit';
      else if (paid.source === 'shared') memo = 'shared';
      const analysis = paid.result;
      result = { status: 'ok', analysis: analysis.analysis, model: analysis.model, usage: analysis.usage };
    } catch (error) {
      if (!isRejection(error)) throw error;
      result = { status: 'rejected', reason: error.code, detail: error.message, usage: error.usage };
    }
  }

  const inserted = await deps.store.record(buildRow(event, key, result, deps));
  const from = memo ? { memo } : {};
  if (!inserted)
    return { ...base, status: 'duplicate', duplicateAt: 'record', analysed, ...from, usage: result.usage };
  return {
    ...base,
    status: result.status,
    analysed,
    ...from,
    ...(result.reason ? { reason: result.reason, detail: result.detail } : {}),
    ...(result.usage ? { usage: result.usage } : {}),
  };
}

/** The one row of a delivery, from the event and what became of it. */
export function buildRow(
  event: PushEvent,
  key: string,
  result: Result,
  deps: Pick<HandlerDeps, 'clock' | 'workerVersion'>,
): Row {
  const o = event.object;
  return {
    message_id: event.messageId,
    dedup_key: key,
    object_uri: event.objectUri,
    bucket: o.bucket ?? null,
    object_name: o.name ?? null,
    generation: o.generation ?? null,
    content_type: o.contentType ?? null,
    size_bytes: o.sizeBytes ?? null,
    event_time: o.eventTime ?? null,
    publish_time: event.publishTime,
    delivery_attempt: event.deliveryAttempt,
    status: result.status,
    reason: result.reason ?? null,
    analysis: result.analysis ?? null,
    model: result.model ?? null,
    prompt_tokens: result.usage?.promptTokens ?? null,
    output_tokens: result.usage?.outputTokens ?? null,
    total_tokens: result.usage?.totalTokens ?? null,
    processed_at: deps.clock.now().toISOString(),
    worker_version: deps.workerVersion,
  };
}
