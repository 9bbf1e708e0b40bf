import { AsyncLocalStorage } from 'node:async_hooks';
import type { GoogleGenAI } from '@google/genai';
import { DELIVERY_DEFAULTS } from '../../worker/src/contract/settings';
import { sampleAnalysis } from '../../worker/test/support/fakes';
import type { SimClock } from '../time';
import type { DocumentKind, FaultLog, FaultSchedule } from './schedule';

/**
 * Gemini as the real `GeminiAnalyzer` sees it: a stand-in for the @google/genai client's
 * `models.generateContent`, so the adapter's own retry, schema check, safety handling, timeout and
 * error mapping all run. What it models:
 *
 * - latency around 6 s with a slow tail (the schedule's `slowTail` calls take 30–150 s, often past
 *   the adapter's timeout);
 * - Dynamic Shared Quota: no per-minute figure, but bursts of busy shared capacity during which a
 *   share of the calls is refused with 429 (free, not counted towards anything);
 * - 5xx (free), and hangs: the call is accepted and paid, and no answer ever comes (the client's
 *   timeout or abort signal ends the wait, when it has one);
 * - per document: an analysis, a safety block (paid, answered with finishReason SAFETY) or an
 *   answer outside the schema (paid, each time).
 *
 * It counts what the invariants need from Gemini's side: paid calls per document, and paid
 * *analyses*: one run of the worker's analyzer that was billed at least once (one analysis may make
 * two calls, the second when the first answer misses the schema; a run that resumes an analysis a
 * previous delivery began is the same analysis). An analysis whose paid answer never reached the
 * worker (a hang, a timeout, a killed instance) is *refused by a fault*: its retry may pay again.
 */

/** The marker line that ties a document's bytes to its name (the request carries only bytes). */
export const DOCUMENT_MARKER = 'sim-document: ';

export interface GeminiRecord {
  /** Calls Gemini accepted and billed, per object name. */
  paidByDocument: Map<string, number>;
  /** Paid analyses per object name (see above). */
  analysesByDocument: Map<string, number>;
  /** Per object name, the paid analyses whose answer a fault took away (lost, or reaching a dead process). */
  refusedByDocument: Map<string, number>;
  calls: number;
}

/** One run of the analyzer, as the model bills it. */
interface AnalysisRun {
  name: string;
  /** It resumes an analysis an earlier delivery began (and paid for). */
  resumed: boolean;
  paid: number;
  refused: boolean;
}

interface CallConfig {
  httpOptions?: { timeout?: number };
  abortSignal?: AbortSignal;
}

export class GeminiModel {
  readonly record: GeminiRecord = {
    paidByDocument: new Map(),
    analysesByDocument: new Map(),
    refusedByDocument: new Map(),
    calls: 0,
  };
  private next = 0;
  /** The analyzer run a call belongs to (the worker's calls carry only bytes). */
  private readonly runs = new AsyncLocalStorage<AnalysisRun>();

  constructor(
    private readonly time: SimClock,
    private readonly schedule: FaultSchedule['gemini'],
    private readonly documents: Map<string, { kind: DocumentKind; analysisMs: number }>,
    private readonly faults: FaultLog,
    private readonly keyOf: (name: string) => string,
  ) {}

  /** The client one worker instance builds its `GeminiAnalyzer` on (all share this model). */
  client(): GoogleGenAI {
    return {
      models: { generateContent: (params: unknown) => this.generate(params) },
    } as unknown as GoogleGenAI;
  }

  /**
   * Runs one analysis of `name` (the worker's analyzer, `analyze`) and bills it: a paid analysis if
   * any of its calls was paid, unless it resumes one already counted; refused when `lost()` says
   * its answer reached no live process, or one of its paid calls got no answer.
   */
  async analysis<T>(
    name: string,
    resumed: boolean,
    analyze: () => Promise<T>,
    lost: () => boolean,
  ): Promise<T> {
    const run: AnalysisRun = { name, resumed, paid: 0, refused: false };
    try {
      return await this.runs.run(run, analyze);
    } finally {
      if (run.paid > 0 && lost()) run.refused = true;
      const bump = (m: Map<string, number>) => m.set(name, (m.get(name) ?? 0) + 1);
      if (run.paid > 0 && !resumed) bump(this.record.analysesByDocument);
      if (run.refused) bump(this.record.refusedByDocument);
    }
  }

  private async generate(params: unknown): Promise<unknown> {
    const p = params as {
      contents: Array<{ parts: Array<{ inlineData?: { data: string } }> }>;
      config?: CallConfig;
    };
    const data = p.contents[0]?.parts.find((part) => part.inlineData)?.inlineData?.data ?? '';
    const text = Buffer.from(data, 'base64').toString('utf8');
    const name =
      text
        .split('\n')
        .find((l) => l.startsWith(DOCUMENT_MARKER))
        ?.slice(DOCUMENT_MARKER.length) ?? '';
    const doc = this.documents.get(name) ?? { kind: 'invoice', analysisMs: 6_000 };
    const kind = doc.kind;
    const scheduled = this.schedule.calls[this.next++] ?? { draw: 1 };
    const plan = { ...scheduled, latencyMs: scheduled.latencyMs ?? doc.analysisMs };
    this.record.calls++;
    const key = this.keyOf(name);

    const now = this.time.nowMs();
    const busy = this.schedule.busy.find((b) => now >= b.atMs && now < b.atMs + b.forMs);
    if (busy && plan.draw < busy.refuseShare) {
      this.faults.injected('gemini.rateLimited', [key], 'shared capacity busy: 429');
      await this.wait(100, p.config);
      throw apiError(429, 'Resource has been exhausted (e.g. check quota).');
    }
    if (plan.fault === 'serverError') {
      this.faults.injected('gemini.serverError', [key], '503 before any work');
      await this.wait(plan.latencyMs, p.config);
      throw apiError(503, 'The model is overloaded. Please try again later.');
    }
    // Accepted: from here the call is billed, whether or not its answer arrives.
    this.record.paidByDocument.set(name, (this.record.paidByDocument.get(name) ?? 0) + 1);
    const run = this.runs.getStore();
    if (run) run.paid += 1;
    try {
      if (plan.fault === 'hang') {
        this.faults.injected('gemini.hang', [key], 'accepted, never answers');
        await this.wait(Number.POSITIVE_INFINITY, p.config);
      }
      if (plan.fault === 'slowTail') this.faults.injected('gemini.slowTail', [key], `${plan.latencyMs} ms`);
      await this.wait(plan.latencyMs, p.config);
    } catch (error) {
      // Paid, and the answer never reached the worker.
      if (run) run.refused = true;
      throw error;
    }
    const usageMetadata = { promptTokenCount: 1_500, candidatesTokenCount: 400, totalTokenCount: 1_900 };
    const modelVersion = DELIVERY_DEFAULTS.geminiModel;
    if (kind === 'safetyBlocked')
      return { candidates: [{ finishReason: 'SAFETY' }], usageMetadata, modelVersion };
    if (kind === 'unreadable') {
      return {
        candidates: [{ content: { parts: [{ text: 'I cannot read this.' }] }, finishReason: 'STOP' }],
        usageMetadata,
        modelVersion,
      };
    }
    return {
      candidates: [
        { content: { parts: [{ text: JSON.stringify(sampleAnalysis()) }] }, finishReason: 'STOP' },
      ],
      usageMetadata,
      modelVersion,
    };
  }

  /** Waits `ms`, unless the client's timeout or abort signal ends the call first (AbortError). */
  private wait(ms: number, config: CallConfig | undefined): Promise<void> {
    const timeoutMs = config?.httpOptions?.timeout;
    const signal = config?.abortSignal;
    if (signal?.aborted) return Promise.reject(abortError());
    return new Promise((resolve, reject) => {
      const timers: Array<{ cancel(): void }> = [];
      const abort = () => {
        for (const t of timers) t.cancel();
        reject(abortError());
      };
      if (Number.isFinite(ms))
        timers.push(
          this.time.after(ms, () => {
            for (const t of timers) t.cancel();
            signal?.removeEventListener('abort', abort);
            resolve();
          }),
        );
      if (timeoutMs !== undefined && timeoutMs < ms) timers.push(this.time.after(timeoutMs, abort));
      signal?.addEventListener('abort', abort, { once: true });
    });
  }
}

function apiError(status: number, message: string): Error {
  return Object.assign(new Error(message), { name: 'ApiError', status });
}

function abortError(): Error {
  return Object.assign(new Error('The operation was aborted.'), { name: 'AbortError' });
}
