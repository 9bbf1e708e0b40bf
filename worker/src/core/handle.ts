import {
  type Analysis,
  type AnalysisProgress,
  type AnalysisResult,
  addUsage,
  type FieldReading,
  type Usage,
} from '../contract/analysis';
import type { Row } from '../contract/row';
import type { DedupKeyMode } from '../contract/settings';
import { Deadline, DeadlineError, ShuttingDownError } from './deadline';
import { type CheckLimits, checkContent, checkDeclared, declaredCharset } from './document-checks';
import {
  type FallbackReason,
  isRejection,
  OutcomeUnknownError,
  RejectionError,
  type RejectionReason,
  TransientError,
} from './errors';
import { dedupKey, type PushEvent } from './event';
import { AnalysisCutError, type AnalysisMemo, type WorkContext, WrittenMeanwhile } from './memo';
import type { OutageBreaker } from './outage';
import {
  type Admission,
  type Analyzer,
  type AnalyzerInput,
  admitAtOnce,
  type Clock,
  type EInvoiceReader,
  type EInvoiceReading,
  type EInvoiceValidationRecord,
  type Reader,
  type Store,
} from './ports';
import { assess } from './review';

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
  /** Admission to the paid work (read + analyse); without it every delivery goes straight in. */
  admission?: Admission;
  /** Reads e-invoices from their structure, before and outside the paid work; without it, none is. */
  eInvoices?: EInvoiceReader;
  /**
   * Answers 503 at once, before any cost, a delivery whose store or analyzer is out (core/outage.ts);
   * the store and analyzer above report their calls to it. Without it every delivery tries.
   */
  outage?: OutageBreaker;
}

export type OutcomeStatus = 'ok' | 'rejected' | 'duplicate';

/** What happened to one delivery. */
export interface Outcome {
  status: OutcomeStatus;
  messageId: string;
  dedupKey: string;
  reason?: RejectionReason;
  /** On `ok`: why the document's e-invoice XML was not used, so its picture was analysed. */
  fallback?: FallbackReason;
  /** Human-readable detail of a rejection or a fallback. */
  detail?: string;
  /** Where the duplicate was detected: before any work (`seen`) or at the conditional write (`record`). */
  duplicateAt?: 'seen' | 'record';
  /** Whether the analyzer was called for this delivery. */
  analysed: boolean;
  /** The analysis came from the memo (`hit`) or from a concurrent delivery of the same key (`shared`). */
  memo?: 'hit' | 'shared';
  usage?: Usage;
}

/** What a delivery's row records: the verdict on the document, with its analysis when it is `ok`. */
interface RowVerdict {
  status: 'ok' | 'rejected';
  reason?: RejectionReason;
  /** On an `ok` row: why the document's e-invoice XML was not used (its picture was analysed). */
  fallback?: FallbackReason;
  detail?: string;
  analysis?: Analysis;
  model?: string;
  usage?: Usage;
  /** The e-invoice's validation verdict, when the document carried one. */
  validation?: EInvoiceValidationRecord;
  /** How the analyzer read each field, when it said (core/review.ts). */
  readings?: Partial<Record<keyof Analysis, FieldReading>>;
}

/**
 * The idempotent handler: seen → check → read the exact generation → analyse → one conditional
 * write. Nothing is written before the end, so a crash anywhere leaves no trace but the message,
 * which Pub/Sub delivers again. Transient errors propagate (the caller answers 503). Every call is
 * bounded by the delivery's `deadline` (core/deadline.ts): past it, a DeadlineError (503).
 */
export async function handle(
  event: PushEvent,
  deps: HandlerDeps,
  deadline: Deadline = Deadline.none(),
): Promise<Outcome> {
  // Every delivery ends in the store: while it is out, nothing else is worth paying for.
  deps.outage?.admit('store');
  const key = dedupKey(event, deps.dedupKeyMode);
  const base = { messageId: event.messageId, dedupKey: key };
  // With a memo of paid analyses, it is read first: no analysis kept for the key means no delivery
  // of it has paid yet, and the store's lookup is skipped, since the write is conditional (a
  // redelivery of a document written without a kept analysis, an e-invoice or a rejection, finds its
  // row there).
  const peeked = deps.memo && event.kind !== 'not_work' ? await deps.memo.peek(key, deadline) : undefined;
  if (peeked?.state !== 'none' && (await deadline.race('lookup', deps.store.seen(key, deadline))))
    return { ...base, status: 'duplicate', duplicateAt: 'seen', analysed: false };

  let analysed = false;
  let memo: Outcome['memo'];
  let verdict: RowVerdict;
  if (event.kind === 'not_work') {
    verdict = { status: 'rejected', reason: event.reason, detail: event.detail };
  } else {
    try {
      const mime = checkDeclared(event.object, deps.limits);
      const { bucket, name, generation } = event.object;
      const read = async () => {
        const bytes = await deadline.race(
          'read',
          deps.reader.read({ bucket, name, generation }, deps.limits.maxObjectBytes),
        );
        checkContent(mime, bytes, deps.limits);
        return bytes;
      };
      // An e-invoice states its own data: read it for free, never in the paid work's line or memo.
      // With an analysis kept too (a PDF whose XML was unusable, paid for by an earlier delivery),
      // it is still read, for the reason and the checks the row records; a generation gone since
      // leaves the kept analysis as this document's answer (readEInvoice answers nothing then).
      const structured = deps.eInvoices?.accepts(mime)
        ? await readEInvoice(deps.eInvoices, { read, mime, name, memoAsks: deps.memo !== undefined })
        : undefined;
      if (structured?.kind === 'read') {
        const { analysis, model, usage, readings } = structured.result;
        const validation = structured.validation ? { validation: structured.validation } : {};
        verdict = { status: 'ok', analysis, model, usage, readings, ...validation };
      } else {
        const analyze = keepingSpentTokens(deps.analyzer);
        const work = async (context?: WorkContext) => {
          // After a holder of the key's lease that kept no analysis (its keep failed, or its row needed
          // none): its row may be there, and paying again would be waste.
          if (context?.afterHolder && (await deadline.race('lookup', deps.store.seen(key, deadline))))
            throw new WrittenMeanwhile();
          // Read again inside the line: a delivery waiting its turn holds no document in memory.
          const bytes = await read();
          analysed = true;
          const analysing = analyze(
            {
              bytes,
              contentType: analyzedContentType(mime, event.object.contentType),
              name,
              deadline,
            },
            context?.resume,
          );
          try {
            return await deadline.race('analysis', analysing);
          } catch (error) {
            // Cut at a deadline that SIGTERM brought forward: the call runs on and is paid; its
            // answer is handed to the memo to keep when it comes (the retry then pays nothing).
            if (error instanceof DeadlineError) throw new AnalysisCutError(error, analysing);
            throw error;
          }
        };
        // The gate weighs a work by its document's declared size (the largest allowed when unknown).
        const gate = deps.admission ?? admitAtOnce;
        const bytes = event.object.sizeBytes ?? deps.limits.maxObjectBytes;
        // An analyzer that is out is not paid for, nor the document read for it, nor its key's lease
        // taken: the breaker answers once the work is admitted, before the memo's lease (a
        // concurrent delivery would wait for an attempt that cannot succeed).
        const admission: Admission = {
          run: (w, d) =>
            gate.run(
              (waitedMs) => {
                deps.outage?.admit('analyzer');
                return w(waitedMs);
              },
              d,
              bytes,
            ),
        };
        const paid = deps.memo
          ? await deps.memo.analyse(key, work, admission, deadline, peeked)
          : { result: await admission.run(() => work(), deadline), source: 'analyzer' as const };
        if (paid.source === 'memo') memo = 'hit';
        else if (paid.source === 'shared') memo = 'shared';
        const analysis = paid.result;
        const fallback =
          structured?.kind === 'fallback'
            ? {
                fallback: structured.reason,
                detail: structured.detail,
                ...(structured.validation ? { validation: structured.validation } : {}),
              }
            : {};
        verdict = {
          status: 'ok',
          analysis: analysis.analysis,
          model: analysis.model,
          usage: analysis.usage,
          readings: analysis.readings,
          ...fallback,
        };
      }
    } catch (error) {
      if (error instanceof WrittenMeanwhile)
        return { ...base, status: 'duplicate', duplicateAt: 'seen', analysed: false };
      if (!isRejection(error)) throw error;
      memo = error.memo;
      verdict = { status: 'rejected', reason: error.code, detail: error.message, usage: error.usage };
    }
  }

  // No other instance's MERGE of this key may overlap ours (the view's answer must not change).
  const turn = await deps.memo?.writeTurn(key, deadline);
  let inserted: boolean;
  let ended = false;
  try {
    inserted = await deadline.race('write', deps.store.record(buildRow(event, key, verdict, deps), deadline));
    ended = true;
  } catch (error) {
    // A statement that may still run keeps the key's lease to its bound.
    ended = !writeMayStillCommit(error);
    throw error;
  } finally {
    turn?.done(ended);
  }
  const from = memo ? { memo } : {};
  if (!inserted)
    return { ...base, status: 'duplicate', duplicateAt: 'record', analysed, ...from, usage: verdict.usage };
  return {
    ...base,
    status: verdict.status,
    analysed,
    ...from,
    ...(verdict.reason ? { reason: verdict.reason, detail: verdict.detail } : {}),
    ...(verdict.fallback ? { fallback: verdict.fallback, detail: verdict.detail } : {}),
    ...(verdict.usage ? { usage: verdict.usage } : {}),
  };
}

/**
 * The e-invoice a document states, read before the paid work. A generation that is gone is left to
 * the memo when there is one (`memoAsks`): an analysis an earlier delivery paid for and kept is
 * still its answer (the analysis path reads the memo first), and without one the paid work's own
 * read rejects it (`object_gone`) just the same.
 */
async function readEInvoice(
  eInvoices: EInvoiceReader,
  how: { read: () => Promise<Buffer>; mime: string; name: string; memoAsks: boolean },
): Promise<EInvoiceReading | undefined> {
  let bytes: Buffer;
  try {
    bytes = await how.read();
  } catch (error) {
    if (how.memoAsks && isRejection(error) && error.code === 'object_gone') return undefined;
    throw error;
  }
  return eInvoices.read({ bytes, contentType: how.mime, name: how.name });
}

/**
 * Whether a failed write's statement may still commit: cut at the deadline or by shutdown, or its
 * outcome unknown (the store could not learn it). Its key's write lease must then live to the
 * statement's bound, so that no other delivery writes the key meanwhile.
 */
export function writeMayStillCommit(error: unknown): boolean {
  return (
    error instanceof DeadlineError ||
    error instanceof ShuttingDownError ||
    error instanceof OutcomeUnknownError
  );
}

/**
 * The content type the analyzer is given: the checked media type, and for a text the charset its
 * upload declared (one docline reads, by its canonical name), so a Windows-1252 export is decoded by
 * its declaration first and by detection only when it has none or it does not fit the bytes.
 */
export function analyzedContentType(mime: string, declared: string | null | undefined): string {
  const charset = mime === 'text/plain' ? declaredCharset(declared) : undefined;
  return charset ? `${mime}; charset=${charset}` : mime;
}

/**
 * The analyzer's calls for one delivery. A run that paid and then failed transiently (a first call
 * answered, the second got a 429) is run again by the admission; its tokens are added to the next
 * run's outcome, so that the row (and the memo) records every token this delivery paid, and the
 * next run goes on after the attempts already paid (`resume`) instead of paying them again. A
 * delivery after one that paid a first attempt and then failed (the memo kept its progress) goes
 * on after that attempt the same way.
 */
function keepingSpentTokens(
  analyzer: Analyzer,
): (input: AnalyzerInput, earlier?: AnalysisProgress) => Promise<AnalysisResult> {
  let spent: Usage | undefined;
  let progress: AnalysisProgress | undefined;
  return async (input, earlier) => {
    // `earlier`: attempts an earlier delivery paid for (kept in the memo). Their tokens were logged
    // with that delivery's failure and are not added here: the row's tokens are this delivery's.
    const resume = progress ?? earlier;
    try {
      const result = await analyzer.analyze(resume ? { ...input, resume } : input);
      return spent ? { ...result, usage: addUsage(result.usage, spent)! } : result;
    } catch (error) {
      if (error instanceof TransientError && error.usage) spent = addUsage(spent, error.usage);
      if (error instanceof TransientError && error.progress) progress = error.progress;
      if (!(error instanceof RejectionError && spent)) throw error;
      throw new RejectionError(error.code, error.message, {
        cause: error,
        usage: addUsage(error.usage, spent),
      });
    }
  };
}

/** The one row of a delivery, from the event and what became of it. */
export function buildRow(
  event: PushEvent,
  key: string,
  verdict: RowVerdict,
  deps: Pick<HandlerDeps, 'clock' | 'workerVersion'>,
): Row {
  const o = event.object;
  // An analysed row says how sure it is of each field, and whether someone should look.
  const assessed =
    verdict.analysis && verdict.model
      ? assess(
          { analysis: verdict.analysis, model: verdict.model, readings: verdict.readings },
          undefined,
          verdict.validation,
        )
      : undefined;
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
    status: verdict.status,
    // The one reason column: a rejection's, or on an `ok` row the e-invoice fallback's.
    reason: verdict.reason ?? verdict.fallback ?? null,
    analysis: verdict.analysis ?? null,
    model: verdict.model ?? null,
    prompt_tokens: verdict.usage?.promptTokens ?? null,
    output_tokens: verdict.usage?.outputTokens ?? null,
    total_tokens: verdict.usage?.totalTokens ?? null,
    e_invoice_validation: verdict.validation ?? null,
    processed_at: deps.clock.now().toISOString(),
    worker_version: deps.workerVersion,
    confidence: assessed?.confidence ?? null,
    review: assessed?.review ?? null,
  };
}
