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
  isRateLimited,
  isRejection,
  OutcomeUnknownError,
  paidBeforeFailing,
  RejectionError,
  type RejectionReason,
  TransientError,
} from './errors';
import { dedupKey, type PushEvent } from './event';
import type { HeldLease } from './key-lease';
import { type Analysed, AnalysisCutError, type AnalysisMemo, type MemoPeek, replay } from './memo';
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
import { probe } from './probes';
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
 * The idempotent handler: one delivery, told in the order it happens. Nothing is written before the
 * end, so a crash anywhere leaves no trace but the message, which Pub/Sub delivers again. Transient
 * errors propagate (the caller answers 503). Every call is bounded by the delivery's `deadline`
 * (core/deadline.ts): past it, a DeadlineError (503).
 *
 * 1. lookup: the memo first, the store's lookup only when the memo says a delivery may have written;
 * 2. the verdict ({@link verdictOf}): checks → e-invoice → cached? → lease → read and analyse under
 *    admission → keep;
 * 3. the write turn, then the one conditional write ({@link recordOnce}).
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
  const duplicate = { ...base, status: 'duplicate', duplicateAt: 'seen', analysed: false } as const;

  // With a memo of paid analyses, it is read first: no analysis kept for the key and no lease of it
  // ever taken means no delivery of it has paid or written yet, and the store's lookup is skipped,
  // since the write is conditional (a redelivery of a document written without a kept analysis, an
  // e-invoice or a rejection, finds its row there).
  const peeked = deps.memo && event.kind !== 'not_work' ? await deps.memo.peek(key, deadline) : undefined;
  if (peeked?.state !== 'none' && (await deadline.race('lookup', deps.store.seen(key, deadline))))
    return duplicate;

  const found = await verdictOf(event, key, deps, peeked, deadline);
  if (found === 'written') return duplicate;
  const { verdict, analysed } = found;

  const inserted = await recordOnce(buildRow(event, key, verdict, deps), deps, deadline);
  const from = found.memo ? { memo: found.memo } : {};
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

/** A document's verdict, whether it was analysed here, and where its analysis came from. */
interface Found {
  verdict: RowVerdict;
  analysed: boolean;
  memo?: Outcome['memo'];
}

/**
 * The verdict on a delivery: a message that is not work is rejected as such; a document has its
 * declared type and size checked, then its e-invoice read when it states one (free: never in the
 * paid work's line or memo), else its paid analysis ({@link paidAnalysis}). A rejection is a
 * verdict too. `written`: the row was written meanwhile by the holder this delivery waited for.
 */
async function verdictOf(
  event: PushEvent,
  key: string,
  deps: HandlerDeps,
  peeked: MemoPeek | undefined,
  deadline: Deadline,
): Promise<Found | 'written'> {
  if (event.kind === 'not_work')
    return { verdict: { status: 'rejected', reason: event.reason, detail: event.detail }, analysed: false };
  let analysed = false;
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
    // With an analysis kept too (a PDF whose XML was unusable, paid for by an earlier delivery),
    // the e-invoice is still read, for the reason and the checks the row records; a generation gone
    // since leaves the kept analysis as this document's answer (readEInvoice answers nothing then).
    const structured = deps.eInvoices?.accepts(mime)
      ? await readEInvoice(deps.eInvoices, { read, mime, name, memoAsks: deps.memo !== undefined })
      : undefined;
    if (structured?.kind === 'read') {
      const { analysis, model, usage, readings } = structured.result;
      const validation = structured.validation ? { validation: structured.validation } : {};
      return { verdict: { status: 'ok', analysis, model, usage, readings, ...validation }, analysed };
    }
    // Read again inside the line: a delivery waiting its turn holds no document in memory.
    const analyze = keepingSpentTokens(deps.analyzer);
    const readAndAnalyse = async (resume?: AnalysisProgress) => {
      const bytes = await read();
      analysed = true;
      const contentType = analyzedContentType(mime, event.object.contentType);
      return within(deadline, analyze({ bytes, contentType, name, deadline }, resume));
    };
    const admission = admitted(deps, event.object.sizeBytes ?? deps.limits.maxObjectBytes);
    const paid = await paidAnalysis(key, { ...deps, admission, readAndAnalyse }, peeked, deadline);
    if (paid === 'written') return paid;
    const { analysis, model, usage, readings } = paid.result;
    const fallback =
      structured?.kind === 'fallback'
        ? {
            fallback: structured.reason,
            detail: structured.detail,
            ...(structured.validation ? { validation: structured.validation } : {}),
          }
        : {};
    const memo = paid.source === 'memo' ? 'hit' : paid.source === 'shared' ? 'shared' : undefined;
    return { verdict: { status: 'ok', analysis, model, usage, readings, ...fallback }, analysed, memo };
  } catch (error) {
    if (!isRejection(error)) throw error;
    const verdict = {
      status: 'rejected',
      reason: error.code,
      detail: error.message,
      usage: error.usage,
    } as const;
    return { verdict, analysed, memo: error.memo };
  }
}

/**
 * The one conditional write, in the key's write turn: no other instance's MERGE of this key may
 * overlap ours (the view's answer must not change). A statement that may still run when the write
 * fails keeps the key's lease to its bound. True when this write inserted the row.
 */
async function recordOnce(row: Row, deps: HandlerDeps, deadline: Deadline): Promise<boolean> {
  const turn = await deps.memo?.leases.writeTurn(row.dedup_key, deadline);
  let ended = false;
  try {
    const inserted = await deadline.race('write', deps.store.record(row, deadline));
    ended = true;
    return inserted;
  } catch (error) {
    ended = !writeMayStillCommit(error);
    if (error instanceof OutcomeUnknownError) probe('write.outcomeUnknown');
    throw error;
  } finally {
    turn?.done(ended);
  }
}

/** What the paid analysis needs, as `handle` wires it for one delivery. */
export interface AnalysisSteps {
  /** Without it every delivery that gets this far pays. */
  memo?: AnalysisMemo;
  store: Pick<Store, 'seen'>;
  /** Admission to the paid work: the quota gate, then the outage breaker's answer. */
  admission: Admission;
  /** Reads the document's exact generation and pays for its analysis, after `resume`'s attempts. */
  readAndAnalyse(resume?: AnalysisProgress): Promise<AnalysisResult>;
}

/**
 * The document's analysis, paid at most once: concurrent deliveries of the key on this instance
 * share one run (`shared`); its steps are {@link analyseOnce}. `written`: the key's row was written
 * meanwhile, by the holder this delivery waited for.
 */
export async function paidAnalysis(
  key: string,
  steps: AnalysisSteps,
  peeked?: MemoPeek,
  deadline: Deadline = Deadline.none(),
): Promise<Analysed | 'written'> {
  const { memo } = steps;
  if (!memo)
    return { result: await steps.admission.run(() => steps.readAndAnalyse(), deadline), source: 'analyzer' };
  const run = () => analyseOnce(key, memo, steps, peeked, deadline);
  const { value, shared } = await memo.flights.once(key, run, deadline);
  return shared && value !== 'written' ? { result: value.result, source: 'shared' } : value;
}

/**
 * Cached? → admitted → the key's lease → read and analyse → kept. Each step that finds the analysis
 * (kept by an earlier delivery, or by a concurrent one while this one waited its turn or for the
 * holder) replays it instead of paying. The lease is taken only once admitted, so a delivery
 * waiting its turn holds no lease that could expire under it; once the analysis is paid (or
 * replayed after an earlier holder), the lease guards the write that comes next.
 */
async function analyseOnce(
  key: string,
  memo: AnalysisMemo,
  steps: AnalysisSteps,
  peeked: MemoPeek | undefined,
  deadline: Deadline,
): Promise<Analysed | 'written'> {
  const { cache } = memo;
  // The delivery's first read of the memo stands for this one; one that failed is read again once
  // admitted: the memo may answer now, and a concurrent delivery may have kept its analysis.
  const reads = { failed: peeked?.state === 'unknown' };
  const kept = peeked ? peeked.kept : await cache.get(key, deadline, reads);
  if (kept) {
    probe('memo.replayed');
    return replay(kept, 'memo');
  }
  // A call the quota refused paid nothing, and the gate runs the work again in a moment: the lease
  // is kept for that try. Ended and taken again, its object would be written twice within a second
  // (Cloud Storage refuses the second) and the retry would wait out its own lease.
  let refusedUnder: HeldLease | undefined;
  try {
    return await steps.admission.run(async (waitedMs) => {
      const retried = refusedUnder;
      refusedUnder = undefined;
      const keptMeanwhile = waitedMs > 0 || reads.failed ? await cache.get(key, deadline) : undefined;
      if (keptMeanwhile) {
        probe('memo.keptWhileQueued');
        retried?.guardWrite();
        return replay(keptMeanwhile, 'shared');
      }
      const taken = retried ? { lease: retried, afterHolder: false } : await leaseOf(key, memo, deadline);
      if (!('lease' in taken)) return taken;
      const { lease, resume, afterHolder } = taken;
      let result: AnalysisResult;
      try {
        // After a holder that kept no analysis (its keep failed, or its row needed none): its row may
        // be there, and paying again would be waste.
        if (afterHolder && (await deadline.race('lookup', steps.store.seen(key, deadline)))) {
          probe('lease.writtenMeanwhile');
          lease.end();
          return 'written';
        }
        result = await steps.readAndAnalyse(resume);
      } catch (error) {
        if (isRateLimited(error) && !paidBeforeFailing(error)?.progress) refusedUnder = lease;
        else await keepWhatWasPaid(key, memo, lease, error, deadline);
        throw error;
      }
      lease.guardWrite();
      await cache.keep(key, result, deadline);
      return { result, source: 'analyzer' };
    }, deadline);
  } catch (error) {
    refusedUnder?.end();
    throw error;
  }
}

/**
 * The key's lease for the paid work, or the analysis found while waiting for it. After an earlier
 * delivery held it, the memo is read once more: a holder keeps its analysis before its write, and
 * ends its lease only after it, and this delivery may not have waited for it at all (one more read
 * costs a memo call; paying again costs an analysis). Read with it: the attempts an earlier delivery
 * paid for before it failed, to go on after them (`resume`). `afterHolder`: the row may have been
 * written by a holder that kept no analysis.
 */
async function leaseOf(
  key: string,
  memo: AnalysisMemo,
  deadline: Deadline,
): Promise<Analysed | { lease: HeldLease; resume?: AnalysisProgress; afterHolder: boolean }> {
  const { cache, leases } = memo;
  const lease = await leases.acquire(key, deadline, () => cache.get(key, deadline));
  if ('found' in lease) {
    probe('lease.holderKept');
    return replay(lease.found, 'shared');
  }
  if (!lease.earlier) return { lease, afterHolder: lease.holderSeen };
  probe('lease.afterEarlierHolder');
  const again = { failed: false };
  const [keptBefore, resume] = await Promise.all([
    cache.get(key, deadline, again),
    cache.progress(key, deadline),
  ]);
  if (keptBefore) {
    lease.guardWrite();
    return replay(keptBefore, 'memo');
  }
  // That read failed: the earlier holder may have written its row (soak I5, seed 22).
  return { lease, resume, afterHolder: lease.holderSeen || again.failed };
}

/**
 * A failed analysis keeps what it paid for, and leaves the lease as its work leaves the key:
 * - a paid refusal is an outcome: kept, and its row is written next under the same lease;
 * - attempts paid before a failure that is not about the document (a first answer outside the
 *   schema, then a 503, a refusal or the deadline) are kept, so that the retry goes on after them;
 * - a call cut at the deadline runs on, paid: its answer is kept when it comes, and the lease, left
 *   to expire meanwhile (a retry waits for the answer instead of paying again), ends then;
 * - otherwise nothing of the work runs on: the lease ends now, and the retry takes it at once.
 */
async function keepWhatWasPaid(
  key: string,
  memo: AnalysisMemo,
  lease: HeldLease,
  error: unknown,
  deadline: Deadline,
): Promise<void> {
  if (isRejection(error) && error.usage) {
    lease.guardWrite();
    const rejection = { reason: error.code, detail: error.message };
    await memo.cache.keep(key, { rejection, usage: error.usage }, deadline);
    return;
  }
  const paid = paidBeforeFailing(error);
  if (paid?.progress && paid.usage)
    await memo.cache.keepProgress(key, { progress: paid.progress, usage: paid.usage }, deadline);
  if (error instanceof AnalysisCutError) {
    probe('analysis.cutKeptLate');
    lease.leave();
    void memo.cache.keepLate(key, error.late, deadline).then(() => lease.end());
  } else lease.end();
}

/** Admission to the paid work: the quota gate by the document's size, then the outage breaker. */
function admitted(deps: HandlerDeps, bytes: number): Admission {
  const gate = deps.admission ?? admitAtOnce;
  // An analyzer that is out is not paid for, nor the document read for it, nor its key's lease
  // taken: the breaker answers once the work is admitted (a concurrent delivery would wait for an
  // attempt that cannot succeed).
  return {
    run: (work, deadline) =>
      gate.run(
        (waitedMs) => {
          deps.outage?.admit('analyzer');
          return work(waitedMs);
        },
        deadline,
        bytes,
      ),
  };
}

/**
 * The analyzer's answer within the delivery's deadline. Cut at a deadline that SIGTERM brought
 * forward, the call runs on and is paid: its answer is handed to the memo to keep when it comes
 * (the retry then pays nothing).
 */
async function within(deadline: Deadline, analysing: Promise<AnalysisResult>): Promise<AnalysisResult> {
  try {
    return await deadline.race('analysis', analysing);
  } catch (error) {
    if (error instanceof DeadlineError) throw new AnalysisCutError(error, analysing);
    throw error;
  }
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
