import type { GoogleGenAI } from '@google/genai';
import type { LineItem } from '../../worker/src/contract/analysis';
import { DELIVERY_DEFAULTS } from '../../worker/src/contract/settings';
import { sampleAnalysis } from '../samples';
import type { SimClock } from '../time';
import { type DocumentKind, type FaultLog, type FaultSchedule, LARGE_ANALYSIS } from './schedule';

/**
 * Gemini as the real `GeminiAnalyzer` sees it: a stand-in for the @google/genai client's
 * `models.generateContent`, so the adapter's own retry, schema check, safety handling, timeout and
 * error mapping all run. What it models:
 *
 * - latency around 6 s with a slow tail (the schedule's `slowTail` calls take 30–150 s, often past
 *   the adapter's timeout);
 * - Dynamic Shared Quota: no per-minute figure, but bursts of busy shared capacity during which a
 *   share of the calls is refused with 429 (free, not counted towards anything);
 * - outages: windows (minutes to hours) in which every call is refused, with 429 or 503 (free);
 * - 4xx answers that are not about the document (a billing or region FAILED_PRECONDITION, a model
 *   that refuses the schema, a 409, a 499): free, and no verdict on the document;
 * - 5xx (free), and hangs: the call is accepted and paid, and no answer ever comes (the client's
 *   timeout or abort signal ends the wait, when it has one);
 * - per document: an analysis, a safety block (paid, answered with finishReason SAFETY) or an
 *   answer outside the schema (paid, each time). Every analysis it answers is a different one (its
 *   invoice number names the call), so a row shows which answer it carries. A long invoice's
 *   analysis carries its 500 line items (about `analysisBytes` of JSON; its output tokens counted
 *   at 4 bytes each).
 *
 * Its bill is the ground truth the invariants read, call by call: which document, which request
 * and instance, when it started and ended, whether it was paid, whether its answer reached a live
 * process. A paid call is a new *analysis* unless it is the second attempt that follows an answer
 * outside the schema delivered for that document (the analyzer asks twice before it refuses); a
 * paid call whose answer never reached a live process is a *lost answer* (the only reason a
 * document may be paid again).
 */

/** The marker line that ties a document's bytes to its name (the request carries only bytes). */
export const DOCUMENT_MARKER = 'sim-document: ';

/** The classes of 4xx Gemini answers that say nothing about the document. */
export const GEMINI_CLIENT_ERRORS = {
  failedPrecondition: {
    status: 400,
    message:
      'FAILED_PRECONDITION: User location is not supported for the API use, or billing is not enabled.',
    apiStatus: 'FAILED_PRECONDITION',
  },
  schemaRefused: {
    status: 400,
    message: 'INVALID_ARGUMENT: The model does not support the response schema given.',
    apiStatus: 'INVALID_ARGUMENT',
  },
  permissionDenied: {
    status: 403,
    message: 'PERMISSION_DENIED: The caller does not have permission.',
    apiStatus: 'PERMISSION_DENIED',
  },
  notFound: {
    status: 404,
    message: 'NOT_FOUND: models/gemini is not found for API version v1beta.',
    apiStatus: 'NOT_FOUND',
  },
  conflict: {
    status: 409,
    message: 'ABORTED: The operation was aborted due to a conflict.',
    apiStatus: 'ABORTED',
  },
  cancelled: { status: 499, message: 'CANCELLED: The operation was cancelled.', apiStatus: 'CANCELLED' },
  /**
   * A 400 that names the input and asks for a retry: Gemini failed on its side
   * this time; the document is good, and must never be refused for it.
   */
  retryAsked: {
    status: 400,
    message:
      'INVALID_ARGUMENT: Unable to process input image. Please retry or report in https://developers.generativeai.google/guide/troubleshooting',
    apiStatus: 'INVALID_ARGUMENT',
  },
} as const;
export type GeminiClientError = keyof typeof GEMINI_CLIENT_ERRORS;

/** One call, as Gemini billed and answered it. */
export interface GeminiCall {
  index: number;
  document: string;
  /** The Cloud Run request the call was made for (undefined: outside any request). */
  request?: number;
  instance: number;
  startMs: number;
  /** When its answer (or refusal) left, or the client gave up (undefined: still running). */
  endMs?: number;
  paid: boolean;
  /** A paid call that starts a new analysis of its document (see above). */
  newAnalysis: boolean;
  /** `answered` reached a live process; `lost`: paid, and the answer reached none; `refused`: free. */
  outcome?: 'answered' | 'lost' | 'refused';
  /** The invoice number of the analysis it answered (an answer in the schema). */
  invoiceNumber?: string;
}

export interface GeminiRecord {
  calls: GeminiCall[];
  /** Calls Gemini accepted and billed, per object name. */
  paidByDocument: Map<string, number>;
  /** Paid analyses per object name (see above). */
  analysesByDocument: Map<string, number>;
  /** Per object name, the paid calls whose answer reached no live process. */
  lostByDocument: Map<string, number>;
  /** Per object name, the invoice numbers of every analysis answered for it. */
  answersByDocument: Map<string, string[]>;
}

interface CallConfig {
  httpOptions?: { timeout?: number };
  abortSignal?: AbortSignal;
}

/** The instance a client belongs to: its index, and whether its process still lives. */
export interface CallerInstance {
  index: number;
  alive(): boolean;
}

export class GeminiModel {
  readonly record: GeminiRecord = {
    calls: [],
    paidByDocument: new Map(),
    analysesByDocument: new Map(),
    lostByDocument: new Map(),
    answersByDocument: new Map(),
  };
  private next = 0;
  /** Documents whose last delivered answer missed the schema: their next paid call is the second attempt. */
  private readonly secondAttemptDue = new Set<string>();

  constructor(
    private readonly time: SimClock,
    private readonly schedule: FaultSchedule['gemini'],
    private readonly documents: Map<
      string,
      { kind: DocumentKind; analysisMs: number; analysisBytes?: number }
    >,
    private readonly faults: FaultLog,
    private readonly keyOf: (name: string) => string,
    /** The request whose handler makes the current call. */
    private readonly requestOf: () => number | undefined = () => undefined,
  ) {}

  /** The client one worker instance builds its `GeminiAnalyzer` on (all share this model). */
  client(instance: CallerInstance = { index: -1, alive: () => true }): GoogleGenAI {
    return {
      models: { generateContent: (params: unknown) => this.generate(params, instance) },
    } as unknown as GoogleGenAI;
  }

  private async generate(params: unknown, instance: CallerInstance): Promise<unknown> {
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
    const key = this.keyOf(name);
    const request = this.requestOf();
    const call: GeminiCall = {
      index: this.record.calls.length,
      document: name,
      ...(request === undefined ? {} : { request }),
      instance: instance.index,
      startMs: this.time.nowMs(),
      paid: false,
      newAnalysis: false,
    };
    this.record.calls.push(call);
    const end = (outcome: GeminiCall['outcome']) => {
      call.endMs = this.time.nowMs();
      call.outcome = outcome;
    };

    const now = this.time.nowMs();
    const outage = (this.schedule.outages ?? []).find((o) => now >= o.atMs && now < o.atMs + o.forMs);
    try {
      if (outage) {
        this.faults.injected('gemini.outage', [key], `${outage.status} (outage of ${outage.forMs} ms)`);
        await this.wait(200, p.config);
        throw apiError(
          outage.status,
          outage.status === 429
            ? 'Resource has been exhausted (e.g. check quota).'
            : outage.status === 400
              ? GEMINI_CLIENT_ERRORS.retryAsked.message
              : 'The service is currently unavailable.',
        );
      }
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
      if (plan.fault === 'clientError') {
        const c = GEMINI_CLIENT_ERRORS[plan.clientError ?? 'failedPrecondition'];
        this.faults.injected(
          'gemini.clientError',
          [key],
          `${c.status} ${c.apiStatus}, not about the document`,
        );
        await this.wait(plan.latencyMs, p.config);
        throw apiError(c.status, c.message);
      }
    } catch (error) {
      end('refused');
      throw error;
    }
    // Accepted: from here the call is billed, whether or not its answer arrives.
    call.paid = true;
    call.newAnalysis = !this.secondAttemptDue.delete(name);
    const bump = (m: Map<string, number>) => m.set(name, (m.get(name) ?? 0) + 1);
    bump(this.record.paidByDocument);
    if (call.newAnalysis) bump(this.record.analysesByDocument);
    try {
      if (plan.fault === 'hang') {
        this.faults.injected('gemini.hang', [key], 'accepted, never answers');
        await this.wait(Number.POSITIVE_INFINITY, p.config);
      }
      if (plan.fault === 'slowTail') this.faults.injected('gemini.slowTail', [key], `${plan.latencyMs} ms`);
      await this.wait(plan.latencyMs, p.config);
    } catch (error) {
      // Paid, and the answer never reached the worker.
      end('lost');
      bump(this.record.lostByDocument);
      throw error;
    }
    // An answer that reaches a killed process is paid and lost.
    const delivered = instance.alive();
    end(delivered ? 'answered' : 'lost');
    if (!delivered) bump(this.record.lostByDocument);
    const lineItems = doc.analysisBytes ? longInvoiceLines(doc.analysisBytes, call.index) : [];
    const outputTokens = doc.analysisBytes ? Math.ceil(doc.analysisBytes / 4) : 400;
    const usageMetadata = {
      promptTokenCount: 1_500,
      candidatesTokenCount: outputTokens,
      totalTokenCount: 1_500 + outputTokens,
    };
    const modelVersion = DELIVERY_DEFAULTS.geminiModel;
    if (kind === 'safetyBlocked')
      return { candidates: [{ finishReason: 'SAFETY' }], usageMetadata, modelVersion };
    if (kind === 'unreadable') {
      // The analyzer asks again once; the second answer ends its analysis either way.
      if (delivered && call.newAnalysis) this.secondAttemptDue.add(name);
      return {
        candidates: [{ content: { parts: [{ text: 'I cannot read this.' }] }, finishReason: 'STOP' }],
        usageMetadata,
        modelVersion,
      };
    }
    call.invoiceNumber = `SIM-${call.index}`;
    if (doc.analysisBytes)
      this.faults.injected(
        'gemini.largeAnalysis',
        [key],
        `an analysis of ${lineItems.length} line items (~${doc.analysisBytes} bytes)`,
      );
    this.record.answersByDocument.set(name, [
      ...(this.record.answersByDocument.get(name) ?? []),
      call.invoiceNumber,
    ]);
    return {
      candidates: [
        {
          content: {
            parts: [
              {
                text: JSON.stringify(
                  sampleAnalysis({ invoice_number: call.invoiceNumber, line_items: lineItems }),
                ),
              },
            ],
          },
          finishReason: 'STOP',
        },
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

/**
 * The line items of a long invoice: {@link LARGE_ANALYSIS.lineItems} lines whose descriptions make
 * the analysis about `bytes` of JSON (a line's other fields take ~80 bytes), different per call.
 */
function longInvoiceLines(bytes: number, call: number): LineItem[] {
  const count = LARGE_ANALYSIS.lineItems;
  const descriptionChars = Math.max(16, Math.floor(bytes / count) - 80);
  const words = 'Fourniture vis inox A2 M6x20 boite de 100 pieces livraison atelier reference lot ';
  return Array.from({ length: count }, (_, i) => {
    const head = `Ligne ${i + 1} appel ${call}: `;
    const description = (head + words.repeat(Math.ceil(descriptionChars / words.length))).slice(
      0,
      descriptionChars,
    );
    const quantity = (i % 12) + 1;
    const unitPrice = 2.5 + (i % 40) * 0.25;
    return {
      description,
      quantity,
      unit_price: unitPrice,
      amount: Math.round(quantity * unitPrice * 100) / 100,
      vat_rate: 20,
    };
  });
}

function apiError(status: number, message: string): Error {
  return Object.assign(new Error(message), { name: 'ApiError', status });
}

function abortError(): Error {
  return Object.assign(new Error('The operation was aborted.'), { name: 'AbortError' });
}
