import { GEMINI_CLIENT_ERRORS, type GeminiClientError } from '../models/gemini';
import { seededRandom } from '../random';

/**
 * The fault schedule of one run: plain data, generated from the seed alone, written beside the
 * trace by `npm run sim -- --seed N`. The models in this folder read it call by call (the k-th
 * Gemini call, the k-th memo call, the k-th BigQuery statement, the d-th delivery) and time by
 * time (capacity bursts, signals), so a seed replays the same faults in the same places.
 */

/** Every kind of fault the simulator injects, by platform. The soak counts each one. */
export const FAULT_KINDS = [
  'gemini.slowTail',
  'gemini.rateLimited',
  'gemini.serverError',
  'gemini.hang',
  'gemini.outage',
  'gemini.clientError',
  'memo.slow',
  'memo.error',
  'memo.hang',
  'memo.objectRateLimited',
  'memo.preconditionFailed',
  'bigquery.refusedOneRow',
  'bigquery.refusedTwoRows',
  'bigquery.refusedManyRows',
  'bigquery.outage',
  'bigquery.outcomeUnknown',
  'bigquery.concurrentUpdate',
  'bigquery.dmlQueueFull',
  'bigquery.slowStatement',
  'bigquery.hungStatement',
  'cloudRun.deadline',
  'cloudRun.sigterm',
  'cloudRun.sigkill',
  'pubsub.redeliveryWhileRunning',
  'pubsub.doubledNotification',
  'pubsub.redeliveryAfterAck',
  'storage.generationGone',
  'storage.generationOverwritten',
  'cloudRun.clockSkew',
  'cloudRun.pendingTime',
  'rollout.analyzerVersion',
  'gemini.largeAnalysis',
  'operator.reconcileApply',
  'operator.deadLetterReplay',
  'bigquery.insertAnswerLost',
  'bigquery.pollRateLimited',
  'clock.acrossMidnight',
] as const;

export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * What Gemini does with a document, whatever the faults: analyse it, block it for safety (a
 * rejected row, paid once), or answer outside the schema twice (`analysis_failed`, two paid calls).
 * A `poison` document is analysed, but BigQuery refuses its row: the only kind that may be
 * dead-lettered.
 */
export type DocumentKind = 'invoice' | 'safetyBlocked' | 'unreadable' | 'poison';

/**
 * How a document is uploaded: a text invoice (the default), a PDF with no e-invoice in it (read
 * for its attachments, then analysed by Gemini), a Factur-X PDF or a CII or UBL XML (an e-invoice:
 * its XML states its data, read for free, never paid for).
 */
export type DocumentFormat = 'text' | 'pdf' | 'facturX' | 'cii' | 'ubl';

/** The content type and the name's extension of each format. */
export const DOCUMENT_FORMATS: Readonly<Record<DocumentFormat, { contentType: string; extension: string }>> =
  Object.freeze({
    text: { contentType: 'text/plain', extension: 'txt' },
    pdf: { contentType: 'application/pdf', extension: 'pdf' },
    facturX: { contentType: 'application/pdf', extension: 'pdf' },
    cii: { contentType: 'application/xml', extension: 'xml' },
    ubl: { contentType: 'application/xml', extension: 'xml' },
  });

export interface DocumentPlan {
  index: number;
  name: string;
  kind: DocumentKind;
  /** How it is uploaded (unset: a text invoice). */
  format?: DocumentFormat;
  /** 2: a second notification config publishes the same upload again, at the same moment. */
  notifications: 1 | 2;
  publishAtMs: number;
  /** How long Gemini takes over it when no fault says otherwise (3–9 s). */
  analysisMs: number;
  /**
   * A long invoice: Gemini's analysis of it is about this many bytes of JSON, in
   * {@link LARGE_ANALYSIS.lineItems} line items (unset: the usual analysis, under 1 KB).
   */
  analysisBytes?: number;
}

/** One call to a service: its latency, and the fault it meets (if any). */
export interface CallPlan<F extends string> {
  latencyMs: number;
  fault?: F;
}

export interface FaultSchedule {
  seed: number;
  /** Worker settings that differ from the defaults (environment variables), for named scenarios. */
  env?: Record<string, string>;
  /** Worker instances serving at the start (spares replace the ones stopped by a signal). */
  instances: number;
  documents: DocumentPlan[];
  gemini: {
    /** Per call: a fault and its latency, or only `draw` (the call takes its document's `analysisMs`). */
    calls: Array<
      (
        | CallPlan<'slowTail' | 'serverError' | 'hang' | 'clientError'>
        | { latencyMs?: number; fault?: undefined }
      ) & {
        draw: number;
        /** With `clientError`: which 4xx that is not about the document. */
        clientError?: GeminiClientError;
      }
    >;
    /** Bursts of the shared capacity: calls accepted in one are refused (429) with this share. */
    busy: Array<{ atMs: number; forMs: number; refuseShare: number }>;
    /** Outages: every call in the window is refused with `status` (free). */
    /** 400: Gemini answers "Unable to process input image. Please retry" (it names the input). */
    outages?: Array<{ atMs: number; forMs: number; status: 400 | 429 | 503 }>;
  };
  memo: { calls: Array<CallPlan<'slow' | 'error' | 'hang'>> };
  bigquery: {
    statements: Array<
      CallPlan<'concurrentUpdate' | 'dmlQueueFull' | 'slow' | 'hung' | 'outcomeUnknown'> & {
        /**
         * With `outcomeUnknown`: the MERGE commits and its answer is lost (`lostAfterCommit`), or the
         * client loses the job while it runs on and commits at its latency (`resetWhilePolling`).
         */
        unknown?: 'lostAfterCommit' | 'resetWhilePolling';
      }
    >;
    /** Outages: every statement that starts in the window fails (503, backendError). */
    outages?: Array<{ atMs: number; forMs: number }>;
    /**
     * With `via: 'client'`, per jobs.insert (the k-th, re-inserts included): its answer lost after
     * the job was created (`lost`: jobs.get answers 404 until the job is visible, `visibleAfterMs`
     * later, and an insert of its id again 409), or lost before it reached BigQuery (`neverArrived`:
     * no job); and how many of the job's first polls (getQueryResults, jobs.get) answer 403
     * `rateLimitExceeded`.
     */
    inserts?: Array<{ answer?: 'lost' | 'neverArrived'; visibleAfterMs?: number; rateLimitedPolls?: number }>;
    /**
     * `client`: the worker's real `BigQueryStore` runs, over a model of the BigQuery client (jobs,
     * polling, jobs.get, jobs.list); otherwise the warehouse serves the `BatchStore` port directly.
     */
    via?: 'client';
  };
  cloudRun: {
    /** The d-th delivery's first call of `call` outlasts the request timeout. */
    stalls: Array<{ delivery: number; call: StallPoint }>;
    signals: Array<{ atMs: number; instance: number; signal: 'SIGTERM' | 'SIGKILL' }>;
    /**
     * The d-th delivery waits `ms` in Cloud Run (pending for a free instance, or a cold start)
     * before the instance sees it: Cloud Run's request timeout runs from its arrival.
     */
    pending?: Array<{ delivery: number; ms: number }>;
    /** Per instance index, how far its clock is off (ms, either way). */
    skewMs?: Record<number, number>;
  };
  pubsub: {
    /** The p-th push is pushed again `afterMs` later, while the first one may still run. */
    redeliveries: Array<{ push: number; afterMs: number }>;
    /** The a-th ack Pub/Sub gets is followed, `afterMs` later, by one more push of that message. */
    afterAck?: Array<{ ack: number; afterMs: number }>;
    /**
     * Outstanding pushes allowed at the start (default 5, a new subscription's): a subscription that
     * has served steady traffic before the run has grown its window.
     */
    initialWindow?: number;
  };
  /**
   * The run's start on the UTC clock (ms since the epoch; unset: 08:00 on 2026-11-30). A start
   * seconds before midnight puts uploads on both sides of it: rows of two key days, redeliveries and
   * writes of yesterday's keys today.
   */
  startsAtMs?: number;
  /** A document's generation deleted (`gone`) or replaced by a new upload (`overwritten`) at `atMs`. */
  storage?: Array<{ document: number; atMs: number; change: 'gone' | 'overwritten' }>;
  /**
   * A rollout: a new revision whose analyzer is another model (another analyzer version) replaces
   * every instance of the old one, one SIGTERM at each of `stopsAtMs` (every spare runs the new
   * revision).
   */
  rollout?: { stopsAtMs: number[]; model: string };
  /**
   * What an operator does during the run: `npm run reconcile -- --apply` at each of `reconcileAtMs`
   * (every object older than `olderThanMs` with no row is announced again, as an OBJECT_FINALIZE of
   * its own, while the first announcement may still be at work), and, once every message is acked
   * or dead-lettered, a replay of the dead letters to the topic (`npm run dlq -- replay`), after
   * which the run goes on until those settle too.
   */
  operator?: { reconcileAtMs?: number[]; olderThanMs?: number; replayDeadLetters?: boolean };
}

export type StallPoint = 'read' | 'analyze' | 'memo' | 'store';

/** How often each fault is drawn; the soak's figures show how many were injected. */
export const FAULT_RATES = Object.freeze({
  documents: { min: 3, max: 6 },
  instances: { min: 1, max: 3 },
  poison: 0.1,
  /** After a poison document, the next one is poison too and uploaded with it: two refused rows in one batch. */
  poisonPair: 0.8,
  safetyBlocked: 0.08,
  unreadable: 0.05,
  doubled: 0.2,
  geminiCalls: 40,
  geminiSlowTail: 0.08,
  geminiServerError: 0.05,
  geminiHang: 0.03,
  geminiBusyBursts: 2,
  memoCalls: 80,
  memoSlow: 0.04,
  memoError: 0.04,
  memoHang: 0.015,
  statements: 80,
  concurrentUpdate: 0.03,
  dmlQueueFull: 0.03,
  slowStatement: 0.025,
  hungStatement: 0.012,
  stall: 0.35,
  sigterm: 0.2,
  sigkill: 0.2,
  redelivery: 0.06,
  pushes: 40,
  /** A seed with a fleet: 100–250 more documents, 10–20 instances, several poison documents in one batch. */
  fleet: 0.05,
  geminiOutage: 0.08,
  bigqueryOutage: 0.08,
  /** Outages last from 2 minutes to 6 hours (log-uniform). */
  outageMs: { min: 2 * 60_000, max: 6 * 60 * 60_000 },
  geminiClientError: 0.03,
  /** Per Gemini call: a 400 that names the input and asks for a retry (its own stream). */
  geminiRetryAsked: 0.05,
  outcomeUnknown: 0.03,
  redeliveryAfterAck: 0.15,
  generationGone: 0.08,
  generationOverwritten: 0.08,
  clockSkew: 0.1,
  clockSkewMs: 3_000,
  pendingTime: 0.05,
  rollout: 0.06,
  /** Seeds whose instances run the real BigQueryStore over the client model. */
  bigqueryStore: 0.3,
  /**
   * Outside a fleet: a good document and four poison ones uploaded together on one
   * instance, so that several refused rows meet in one statement (fleets alone made too few).
   */
  poisonBatch: 0.3,
  /** Per good invoice: a long one, whose analysis is large ({@link LARGE_ANALYSIS}). */
  largeAnalysis: 0.06,
  /**
   * Outside a fleet: a burst of long invoices uploaded together (a supplier's month-end
   * statements), enough that their rows together pass BigQuery's 10 MB request limit unless the
   * worker bounds its batches by bytes.
   */
  largeBurst: 0.03,
  /** A reconcile `--apply` during the run (2–90 s in, objects older than 0–10 s). */
  reconcileApply: 0.15,
  /** A replay of the dead letters once the run has settled (counted when there are some). */
  deadLetterReplay: 0.4,
  /**
   * Per document: uploaded as a PDF with no e-invoice in it (read before the memo is asked, then
   * paid for), or as an e-invoice (a Factur-X PDF, a CII or a UBL XML, each a third), read free.
   */
  pdf: 0.25,
  eInvoice: 0.15,
  /** Per jobs.insert of the real BigQueryStore: its answer lost (half after the job was created, half before). */
  insertAnswerLost: 0.03,
  /** Per jobs.insert of the real BigQueryStore: its job's first 1–3 polls are rate-limited (403). */
  pollRateLimited: 0.04,
  /** A run that starts 15 s before midnight UTC. */
  acrossMidnight: 0.1,
  /**
   * Per MERGE whose answer is lost while its job runs on: that job is also slow (30–400 s), so it
   * commits long after its client gave up. 0 in the soak (whose schedules this leaves as they
   * are); a mutant's world raises it.
   */
  slowLostJob: 0,
});

/** The start of a run on the UTC clock, unless its schedule says otherwise. */
export const RUN_START_MS = Date.parse('2026-11-30T08:00:00.000Z');
/** The start of a run across midnight: 15 s before it, while its first uploads arrive. */
export const BEFORE_MIDNIGHT_MS = Date.parse('2026-11-29T23:59:45.000Z');

/**
 * How large a long invoice's analysis is. Gemini's answer is bounded by its output tokens (65,536
 * on the current Flash models, about 4 bytes of JSON each) and the schema by 500 line items, so
 * the largest analysis Gemini can give is ~250 KB: drawn log-uniform in 100–250 KB, always in the
 * schema's 500 lines at most. A burst holds 150–250 of them, uploaded within 5 s, to a subscription
 * whose push window has grown on the steady traffic before it (assumed 300 outstanding pushes:
 * the documentation says only that the window grows on acks, linearly past ~3,000).
 */
export const LARGE_ANALYSIS = Object.freeze({
  minBytes: 100_000,
  maxBytes: 250_000,
  lineItems: 500,
  burst: { min: 150, max: 250, withinMs: 5_000, window: 300 },
});

/** The model name the new revision of a rollout configures (another analyzer version). */
export const ROLLOUT_MODEL = 'gemini-2.5-flash-rollout';

/** The rates a schedule is drawn with (the soak's: {@link FAULT_RATES}). */
export type FaultRates = Widened<typeof FAULT_RATES>;
type Widened<T> = T extends number ? number : { readonly [K in keyof T]: Widened<T[K]> };

/**
 * The fault probabilities each seed draws its own mix of (swarm testing, as TigerBeetle's VOPR):
 * the per-call and per-document faults. What shapes a run (documents, instances, fleets, poison
 * batches, bursts) keeps its rate.
 */
const SWARMED = [
  'doubled',
  'safetyBlocked',
  'unreadable',
  'geminiSlowTail',
  'geminiServerError',
  'geminiHang',
  'geminiClientError',
  'geminiRetryAsked',
  'geminiOutage',
  'memoSlow',
  'memoError',
  'memoHang',
  'concurrentUpdate',
  'dmlQueueFull',
  'slowStatement',
  'hungStatement',
  'outcomeUnknown',
  'bigqueryOutage',
  'stall',
  'sigterm',
  'sigkill',
  'redelivery',
  'redeliveryAfterAck',
  'generationGone',
  'generationOverwritten',
  'clockSkew',
  'pendingTime',
  'insertAnswerLost',
  'pollRateLimited',
] as const satisfies ReadonlyArray<keyof FaultRates>;

/** A swarmed fault is off on this share of seeds, and otherwise its rate × log-uniform in [low, high]. */
export const SWARM = Object.freeze({ off: 0.25, low: 0.25, high: 4, atMost: 0.9 });

/**
 * The rates of `seed`'s world: {@link FAULT_RATES} with each swarmed fault turned off or scaled,
 * drawn from a stream of its own. One mix for every seed lets a frequent fault hide the paths a
 * rarer one opens (a retry that always meets a 503 never meets a slow memo); seeds that each
 * leave some faults out and press others reach more of them. Averaged over seeds, a rate is
 * about what {@link FAULT_RATES} says.
 */
export function swarmRates(seed: number, base: FaultRates = FAULT_RATES): FaultRates {
  const random = seededRandom(seed * 2_246_822_519 + 0x5a4d);
  const rates: Record<string, unknown> = { ...base };
  for (const name of SWARMED) {
    const off = random() < SWARM.off;
    const factor = SWARM.low * (SWARM.high / SWARM.low) ** random();
    rates[name] = off ? 0 : Math.min(SWARM.atMost, base[name] * factor);
  }
  return rates as FaultRates;
}

/**
 * The schedule of `seed`: the same seed (and rates), the same documents and faults. The soak's
 * rates are the seed's swarm ({@link swarmRates}); other rates give a world where some path is hot
 * (a mutant's hunt: {@link Mutant.rates}).
 */
export function generateSchedule(seed: number, rates: FaultRates = swarmRates(seed)): FaultSchedule {
  const random = seededRandom(seed * 2_654_435_761);
  const r = rates;
  const between = (low: number, high: number) => low + (high - low) * random();
  const whole = (low: number, high: number) => Math.floor(between(low, high + 1));
  const chance = (p: number) => random() < p;

  const count = whole(r.documents.min, r.documents.max);
  let instances = whole(r.instances.min, r.instances.max);
  const documents: DocumentPlan[] = [];
  for (let i = 0; i < count; i++) {
    const previous = documents[i - 1];
    if (previous?.kind === 'poison' && chance(r.poisonPair)) {
      documents.push({
        ...previous,
        index: i,
        name: `sim/${seed}/${String(i).padStart(2, '0')}-invoice.txt`,
        notifications: 1,
      });
      // One instance, so that the pair's rows meet in one batch.
      instances = 1;
      continue;
    }
    const u = random();
    const kind: DocumentKind =
      u < r.poison
        ? 'poison'
        : u < r.poison + r.safetyBlocked
          ? 'safetyBlocked'
          : u < r.poison + r.safetyBlocked + r.unreadable
            ? 'unreadable'
            : 'invoice';
    documents.push({
      index: i,
      name: `sim/${seed}/${String(i).padStart(2, '0')}-invoice.txt`,
      kind,
      notifications: chance(r.doubled) ? 2 : 1,
      publishAtMs: Math.round(between(0, 20_000)),
      analysisMs: Math.round(between(3_000, 9_000)),
    });
  }
  documents.sort((a, b) => a.publishAtMs - b.publishAtMs || a.index - b.index);

  const gemini: FaultSchedule['gemini'] = { calls: [], busy: [] };
  for (let k = 0; k < r.geminiCalls; k++) {
    const u = random();
    const draw = random();
    // Latency: around 6 s, with a slow tail that can pass the analyzer's own timeout.
    const latencyMs = Math.round(3_000 + 6_000 * random());
    if (u < r.geminiSlowTail)
      gemini.calls.push({ latencyMs: Math.round(between(30_000, 150_000)), fault: 'slowTail', draw });
    else if (u < r.geminiSlowTail + r.geminiServerError)
      gemini.calls.push({ latencyMs: 400, fault: 'serverError', draw });
    else if (u < r.geminiSlowTail + r.geminiServerError + r.geminiHang)
      gemini.calls.push({ latencyMs, fault: 'hang', draw });
    else gemini.calls.push({ draw });
  }
  const bursts = whole(0, r.geminiBusyBursts);
  for (let b = 0; b < bursts; b++) {
    gemini.busy.push({
      atMs: Math.round(between(0, 60_000)),
      forMs: Math.round(between(5_000, 90_000)),
      refuseShare: between(0.5, 1),
    });
  }

  const memo: FaultSchedule['memo'] = { calls: [] };
  for (let k = 0; k < r.memoCalls; k++) {
    const u = random();
    const latencyMs = Math.round(between(20, 120));
    if (u < r.memoSlow) memo.calls.push({ latencyMs: Math.round(between(2_000, 30_000)), fault: 'slow' });
    else if (u < r.memoSlow + r.memoError) memo.calls.push({ latencyMs, fault: 'error' });
    else if (u < r.memoSlow + r.memoError + r.memoHang) memo.calls.push({ latencyMs, fault: 'hang' });
    else memo.calls.push({ latencyMs });
  }

  const bigquery: FaultSchedule['bigquery'] = { statements: [] };
  for (let k = 0; k < r.statements; k++) {
    const u = random();
    const latencyMs = Math.round(between(500, 3_000));
    const fault = choose(u, [
      [r.concurrentUpdate, 'concurrentUpdate' as const],
      [r.dmlQueueFull, 'dmlQueueFull' as const],
      [r.slowStatement, 'slow' as const],
      [r.hungStatement, 'hung' as const],
    ]);
    bigquery.statements.push(
      fault === 'slow'
        ? { latencyMs: Math.round(between(30_000, 400_000)), fault }
        : fault
          ? { latencyMs, fault }
          : { latencyMs },
    );
  }

  const cloudRun: FaultSchedule['cloudRun'] = { stalls: [], signals: [] };
  const points: StallPoint[] = ['read', 'analyze', 'memo', 'store'];
  if (chance(r.stall)) cloudRun.stalls.push({ delivery: whole(0, 7), call: points[whole(0, 3)]! });
  if (chance(r.sigterm))
    cloudRun.signals.push({
      atMs: Math.round(between(2_000, 60_000)),
      instance: whole(0, instances - 1),
      signal: 'SIGTERM',
    });
  if (chance(r.sigkill))
    cloudRun.signals.push({
      atMs: Math.round(between(2_000, 60_000)),
      instance: whole(0, instances - 1),
      signal: 'SIGKILL',
    });

  const pubsub: FaultSchedule['pubsub'] = { redeliveries: [] };
  for (let p = 0; p < r.pushes; p++) {
    if (chance(r.redelivery))
      pubsub.redeliveries.push({ push: p, afterMs: Math.round(between(500, 20_000)) });
  }

  const schedule: FaultSchedule = { seed, instances, documents, gemini, memo, bigquery, cloudRun, pubsub };
  addLongerFaults(schedule, rates);
  addRetryAskedFaults(schedule, rates);
  addLargeAnalyses(schedule, rates);
  addOperatorActions(schedule, rates);
  addDocumentFormats(schedule, rates);
  addJobsAndDays(schedule, rates);
  if (rates.slowLostJob > 0) addSlowLostJobs(schedule, rates);
  return schedule;
}

/**
 * Jobs lost while they run on that are slow too, drawn from an eighth stream only when the rate is
 * set (so every schedule of the soak stays what it was): the client hears nothing for a second, and
 * the job commits minutes later.
 */
function addSlowLostJobs(s: FaultSchedule, rates: FaultRates): void {
  const random = seededRandom(s.seed * 83_299 + 11);
  for (const statement of s.bigquery.statements)
    if (statement.unknown === 'resetWhilePolling' && random() < rates.slowLostJob)
      statement.latencyMs = Math.round(30_000 + 370_000 * random());
}

/**
 * BigQuery's jobs as the real store meets them, and the day the run falls on, drawn from a seventh
 * stream of the seed after every other draw (so each seed's schedule above stays what it was): a
 * jobs.insert whose answer is lost (after or before its job was created), polls answered
 * `rateLimitExceeded`, and a run that starts seconds before midnight UTC.
 */
function addJobsAndDays(s: FaultSchedule, rates: FaultRates): void {
  const random = seededRandom(s.seed * 52_361 + 3);
  if (random() < rates.acrossMidnight) s.startsAtMs = BEFORE_MIDNIGHT_MS;
  if (s.bigquery.via !== 'client') return;
  s.bigquery.inserts = Array.from({ length: 120 }, () => {
    const lost = random() < rates.insertAnswerLost;
    const created = random() < 0.5;
    const visibleAfterMs = Math.round(3_000 * random());
    const limited = random() < rates.pollRateLimited;
    const polls = 1 + Math.floor(3 * random());
    return {
      ...(lost ? { answer: created ? ('lost' as const) : ('neverArrived' as const), visibleAfterMs } : {}),
      ...(limited ? { rateLimitedPolls: polls } : {}),
    };
  });
}

/**
 * How each document is uploaded, drawn from a sixth stream of the seed after every other draw (so
 * each seed's schedule above stays what it was): some are PDFs, read once for an e-invoice before
 * the paid analysis, and some are e-invoices, which state their data. Gemini's refusals (a safety
 * block, an answer outside the schema) are of documents it reads, so those are never e-invoices;
 * nor is a long invoice (its large analysis is Gemini's answer).
 */
function addDocumentFormats(s: FaultSchedule, rates: FaultRates): void {
  const random = seededRandom(s.seed * 31_337 + 7);
  const eInvoices: DocumentFormat[] = ['facturX', 'cii', 'ubl'];
  for (const d of s.documents) {
    const u = random();
    const pick = eInvoices[Math.min(2, Math.floor(random() * 3))]!;
    const statesData = d.kind !== 'safetyBlocked' && d.kind !== 'unreadable' && !d.analysisBytes;
    const format: DocumentFormat =
      u < rates.pdf ? 'pdf' : u < rates.pdf + rates.eInvoice && statesData ? pick : 'text';
    if (format === 'text') continue;
    d.format = format;
    d.name = d.name.replace(/\.txt$/, `.${DOCUMENT_FORMATS[format].extension}`);
  }
}

/**
 * An operator's actions, drawn from a fifth stream of the seed after every other draw (so each
 * seed's schedule above stays what it was): a reconcile `--apply` while documents are at work, and
 * a replay of the dead letters in the run's aftermath.
 */
function addOperatorActions(s: FaultSchedule, rates: FaultRates): void {
  const random = seededRandom(s.seed * 97_787 + 13);
  const reconcile = random() < rates.reconcileApply;
  const atMs = Math.round(2_000 + 88_000 * random());
  const olderThanMs = Math.round(10_000 * random());
  const replay = random() < rates.deadLetterReplay;
  if (!reconcile && !replay) return;
  s.operator = {
    ...(reconcile ? { reconcileAtMs: [atMs], olderThanMs } : {}),
    ...(replay ? { replayDeadLetters: true } : {}),
  };
}

/**
 * The faults of hours, fleets and deploys, drawn from a second stream of the seed (so the faults
 * above stay what they were for every seed): fleets of hundreds of documents with several refused
 * rows in one batch, outages of Gemini and BigQuery from minutes to six hours, Gemini 4xx that are
 * not about the document, BigQuery jobs whose outcome is unknown, redelivery after an ack,
 * generations deleted or overwritten before they are read, clock skew, time spent pending in Cloud
 * Run, and a rollout of another analyzer version.
 */
/**
 * Faults drawn from a third stream of the seed (so every fault above stays what it
 * was): Gemini 400s that name the input and ask for a retry ("Unable to process input image.
 * Please retry"), which a good document must survive as a retry, never as a rejected row.
 */
function addRetryAskedFaults(s: FaultSchedule, rates: FaultRates): void {
  const random = seededRandom(s.seed * 60_493 + 45);
  for (const call of s.gemini.calls) {
    if (call.fault || !(random() < rates.geminiRetryAsked)) continue;
    Object.assign(call, { fault: 'clientError', latencyMs: 300, clientError: 'retryAsked' });
  }
}

/**
 * Long invoices, drawn from a fourth stream of the seed after every other draw (so each seed's
 * schedule above stays what it was): some good invoices become long ones, and some seeds get a
 * burst of long invoices uploaded together on the seed's instances, whose rows meet in batches
 * over BigQuery's request limit unless the worker bounds its batches by bytes. The burst is added
 * last, after the documents it could otherwise displace.
 */
function addLargeAnalyses(s: FaultSchedule, rates: FaultRates): void {
  const random = seededRandom(s.seed * 75_011 + 29);
  const between = (low: number, high: number) => low + (high - low) * random();
  const whole = (low: number, high: number) => Math.floor(between(low, high + 1));
  const bytes = () =>
    Math.round(Math.exp(between(Math.log(LARGE_ANALYSIS.minBytes), Math.log(LARGE_ANALYSIS.maxBytes))));
  for (const d of s.documents)
    if (d.kind === 'invoice' && random() < rates.largeAnalysis) d.analysisBytes = bytes();
  const fleet = s.documents.length > 100;
  if (fleet || !(random() < rates.largeBurst)) return;
  const { burst } = LARGE_ANALYSIS;
  const count = whole(burst.min, burst.max);
  const atMs = Math.round(between(0, 20_000));
  s.pubsub.initialWindow = burst.window;
  const base = Math.max(...s.documents.map((d) => d.index)) + 1;
  for (let i = 0; i < count; i++) {
    const index = base + i;
    s.documents.push({
      index,
      name: `sim/${s.seed}/${String(index).padStart(3, '0')}-invoice.txt`,
      kind: 'invoice',
      notifications: 1,
      publishAtMs: atMs + Math.round(between(0, burst.withinMs)),
      analysisMs: Math.round(between(3_000, 9_000)),
      analysisBytes: bytes(),
    });
  }
  s.documents.sort((a, b) => a.publishAtMs - b.publishAtMs || a.index - b.index);
}

function addLongerFaults(s: FaultSchedule, rates: FaultRates): void {
  const random = seededRandom(s.seed * 40_503 + 17);
  const r = rates;
  const between = (low: number, high: number) => low + (high - low) * random();
  const whole = (low: number, high: number) => Math.floor(between(low, high + 1));
  const chance = (p: number) => random() < p;
  const logBetween = (low: number, high: number) =>
    Math.round(Math.exp(between(Math.log(low), Math.log(high))));

  const fleet = chance(r.fleet);
  if (fleet) {
    const more = whole(100, 250);
    const base = s.documents.length;
    const burstAtMs = Math.round(between(0, 60_000));
    const poisonAt = new Set<number>();
    const poisons = whole(3, 8);
    while (poisonAt.size < poisons) poisonAt.add(whole(0, 29));
    for (let i = 0; i < more; i++) {
      const index = base + i;
      // The first thirty arrive together: several refused rows meet good ones in one batch.
      const together = i < 30;
      s.documents.push({
        index,
        name: `sim/${s.seed}/${String(index).padStart(3, '0')}-invoice.txt`,
        kind: together && poisonAt.has(i) ? 'poison' : 'invoice',
        notifications: 1,
        publishAtMs: together ? burstAtMs : Math.round(between(0, 120_000)),
        analysisMs: Math.round(between(3_000, 9_000)),
      });
    }
    s.documents.sort((a, b) => a.publishAtMs - b.publishAtMs || a.index - b.index);
    s.instances = whole(10, 20);
  }
  const outage = () => ({
    atMs: Math.round(between(5_000, 60_000)),
    forMs: logBetween(r.outageMs.min, r.outageMs.max),
  });
  if (chance(r.geminiOutage)) {
    // One draw, so a seed's later draws do not move: a third of Gemini's outages answer 400 "Please retry" (an incident that
    // names the input), the others 429 or 503.
    const o = outage();
    const u = random();
    s.gemini.outages = [{ ...o, status: u < 1 / 3 ? 400 : u < 2 / 3 ? 429 : 503 }];
  }
  if (chance(r.bigqueryOutage)) s.bigquery.outages = [outage()];
  // The 4xx not about the document (a 400 that asks for a retry comes from its own stream, below).
  const classes = (Object.keys(GEMINI_CLIENT_ERRORS) as GeminiClientError[]).filter(
    (c) => c !== 'retryAsked',
  );
  for (const call of s.gemini.calls) {
    if (call.fault || !chance(r.geminiClientError)) continue;
    Object.assign(call, {
      fault: 'clientError',
      latencyMs: 300,
      clientError: classes[whole(0, classes.length - 1)],
    });
  }
  for (const statement of s.bigquery.statements) {
    if (statement.fault || !chance(r.outcomeUnknown)) continue;
    statement.fault = 'outcomeUnknown';
    statement.unknown = chance(0.5) ? 'lostAfterCommit' : 'resetWhilePolling';
  }
  s.pubsub.afterAck = [];
  for (let a = 0; a < 40; a++)
    if (chance(r.redeliveryAfterAck))
      s.pubsub.afterAck.push({ ack: a, afterMs: Math.round(between(1_000, 120_000)) });
  s.storage = [];
  const pick = () => s.documents[whole(0, s.documents.length - 1)]!;
  // Drawn in this order (gone, then overwritten), so that a seed replays the same schedule.
  for (const [change, rate] of [
    ['gone', r.generationGone],
    ['overwritten', r.generationOverwritten],
  ] as const)
    if (chance(rate)) {
      const d = pick();
      s.storage.push({ document: d.index, atMs: d.publishAtMs + Math.round(between(0, 5_000)), change });
    }
  if (chance(r.clockSkew)) {
    s.cloudRun.skewMs = {};
    for (let i = 0; i < s.instances + s.cloudRun.signals.length + s.instances; i++)
      s.cloudRun.skewMs[i] = Math.round(between(-r.clockSkewMs, r.clockSkewMs));
  }
  s.cloudRun.pending = [];
  for (let d = 0; d < 40; d++)
    if (chance(r.pendingTime))
      s.cloudRun.pending.push({ delivery: d, ms: Math.round(between(1_000, 12_000)) });
  if (chance(r.bigqueryStore)) s.bigquery.via = 'client';
  if (chance(r.rollout)) {
    const atMs = Math.round(between(5_000, 40_000));
    const stopsAtMs: number[] = [];
    for (let i = 0, at = atMs; i < s.instances; i++, at += Math.round(between(2_000, 20_000)))
      stopsAtMs.push(at);
    s.rollout = { stopsAtMs, model: ROLLOUT_MODEL };
  }
  // Drawn last, so that every draw above stays what it was for every seed.
  if (!fleet && chance(r.poisonBatch)) {
    // Before any other upload: they fill Pub/Sub's first push window (five) before a nack halves it.
    const atMs = 0;
    const analysisMs = Math.round(between(3_000, 9_000));
    const base = s.documents.length;
    const count = 4;
    // A good document first: its row's statement runs while the refused rows arrive, which then
    // form the next batch together.
    for (let i = 0; i <= count; i++)
      s.documents.push({
        index: base + i,
        name: `sim/${s.seed}/${String(base + i).padStart(2, '0')}-invoice.txt`,
        kind: i === 0 ? 'invoice' : 'poison',
        notifications: 1,
        publishAtMs: atMs,
        analysisMs: i === 0 ? analysisMs : analysisMs + 300,
      });
    s.documents.sort((a, b) => a.publishAtMs - b.publishAtMs || a.index - b.index);
    // One instance, so that their rows meet in one batch (as a poison pair's do).
    s.instances = 1;
  }
}

/** The option whose share of [0, 1) holds `u` (shares in order; past them all, undefined). */
function choose<T>(u: number, options: Array<[number, T]>): T | undefined {
  let edge = 0;
  for (const [share, value] of options) {
    edge += share;
    if (u < edge) return value;
  }
  return undefined;
}

/** Faults injected so far, by kind, with what each touched (for the trace and for tracing extra rows). */
export class FaultLog {
  readonly counts: Record<FaultKind, number> = Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<
    FaultKind,
    number
  >;
  readonly entries: Array<{ atMs: number; kind: FaultKind; keys: string[]; detail: string }> = [];

  constructor(private readonly nowMs: () => number) {}

  injected(kind: FaultKind, keys: string[], detail: string): void {
    this.counts[kind]++;
    this.entries.push({ atMs: this.nowMs(), kind, keys, detail });
  }
}
