import {
  type GenerateContentResponse,
  GoogleGenAI,
  type GoogleGenAIOptions,
  type HttpOptions,
  type ThinkingConfig,
  ThinkingLevel,
} from '@google/genai';
import {
  type AnalysisProgress,
  type AnalysisResult,
  analysisJsonSchema,
  parseAnalysis,
  type Usage,
} from '../../contract/analysis';
import { DEFAULT_GEMINI_MODEL, knownModel } from '../../contract/models';
import { ANALYZER_CALLS_PER_ANALYSIS, DELIVERY_DEFAULTS } from '../../contract/settings';
import type { Deadline } from '../../core/deadline';
import { baseMimeType } from '../../core/document-checks';
import {
  ConfigurationError,
  DependencyRefusedError,
  paidBeforeFailing,
  RATE_LIMITED,
  RejectionError,
  TransientError,
} from '../../core/errors';
import { MODEL_NOT_FOUND } from '../../core/outage';
import type { Analyzer, AnalyzerInput, Logger } from '../../core/ports';
import { INVOICE_PROMPT } from './gemini-prompt';

/**
 * Extracts the invoice fields with Gemini through @google/genai: the document inline with its MIME
 * type, the prompt, and the analysis JSON Schema as structured output. The answer is validated
 * with the same zod schema as every analyzer; an invalid answer is asked for once more, then the
 * document is rejected (`analysis_failed`).
 *
 * Errors: 408/429/5xx, timeouts, network failures and a 400 that asks for a retry are transient
 * (Pub/Sub retries). Only a permanent refusal about the document itself (a 400 that names its
 * pages, image, size or type and asks for no retry; a 413) rejects it (`analysis_failed`). Every
 * other refusal would answer every document the same (a billing or region `FAILED_PRECONDITION`,
 * credentials, a schema the model refuses, 409, 499): it is a {@link DependencyRefusedError},
 * retried by Pub/Sub and logged at ERROR for an operator, never a `rejected` row. A 404 is a model
 * Gemini does not serve (a wrong or retired GEMINI_MODEL): a {@link ConfigurationError} (503,
 * alerted), which {@link GeminiAnalyzer.ready} also finds once at start-up so that such a revision
 * never becomes ready. A safety block rejects the document (`safety_blocked`) with its reason.
 *
 * Thinking: the worker asks for the least thinking a model it knows takes (contract/models.ts):
 * `thinkingLevel: MINIMAL` on Gemini 3.x, which Google recommends for JSON extraction and which
 * gemini-3.5-flash-lite uses anyway by default; `thinkingBudget: 0` on 2.5. Thinking tokens are
 * billed as output and output costs 8× input, so the setting is sent rather than left to a default
 * that may change. An id the table does not know gets the model's own default (a setting it does
 * not take would be refused with a 400).
 */

export interface GeminiAnalyzerOptions {
  client: GoogleGenAI;
  /** Model id, e.g. `gemini-3.5-flash-lite` (contract/models.ts). */
  model?: string;
  /**
   * The least time one call is started with (a delivery with less left is answered 503 instead),
   * and the call's timeout when there is no delivery deadline.
   */
  timeoutMs?: number;
  /**
   * What a delivery still needs once the answer is in: keeping it in the memo and writing its row.
   * A call is waited for until the delivery's deadline less this (never less than `timeoutMs`):
   * once accepted, a call is paid whether or not its answer is awaited, so giving up on a slow
   * answer the delivery could still use would only pay for the same analysis again on the retry.
   */
  afterAnswerMs?: number;
  logger?: Logger;
}

/** Finish reasons that mean the answer was withheld for safety. */
export const SAFETY_FINISH_REASONS: readonly string[] = [
  'SAFETY',
  'PROHIBITED_CONTENT',
  'BLOCKLIST',
  'SPII',
  'IMAGE_SAFETY',
  'IMAGE_PROHIBITED_CONTENT',
];

const MAX_ATTEMPTS = ANALYZER_CALLS_PER_ANALYSIS;

interface ApiErrorLike {
  name?: string;
  status?: number;
  message?: string;
}

/**
 * What in an error's text names the worker's own request rather than the document: its credentials,
 * its project's billing or region, the model, the schema and generation settings it asks for.
 */
const ABOUT_THE_REQUEST =
  /api[ _]?key|credential|billing|location|region|country|project|quota|permission|models\/|(for|by) (this|the) model|schema|generation_?config|response_?mime|responseJsonSchema|not enabled|too many states/i;

/**
 * What in a 400's text names the document: the bytes sent inline (their pages, image, size,
 * tokens, type). Gemini answers these for the document alone, so a retry would meet them again.
 */
const ABOUT_THE_DOCUMENT =
  /document|pdf|page|image|inline_?data|payload|input token|token count|mime type|file|corrupt|password|encrypted|unable to process input/i;

/**
 * What in a 400's text asks for a retry ("Unable to process input image. Please retry"): Gemini
 * failed on its side this time, whatever it names, so the document is not refused for it.
 */
const ASKS_FOR_RETRY = /\bplease retry\b|\btry again\b|\bretry later\b|\btemporar(il)?y\b/i;

/** The `error.status` and `error.message` of Gemini's JSON error body, which the SDK puts in its message. */
function errorBody(message: string): { state?: string; text: string } {
  try {
    const body = JSON.parse(message) as { error?: { status?: unknown; message?: unknown } };
    const state = typeof body.error?.status === 'string' ? body.error.status : undefined;
    const text = typeof body.error?.message === 'string' ? body.error.message : message;
    return { ...(state ? { state } : {}), text };
  } catch {
    const state = /"status":\s*"([A-Z_]+)"/.exec(message)?.[1];
    return { ...(state ? { state } : {}), text: message };
  }
}

/**
 * The wait a 429 asks for: the `retryDelay` of the `google.rpc.RetryInfo` in its body's details, a
 * protobuf Duration ("58s", "1.5s"). The Gemini API sends one when a quota window of the project
 * is full (with a `QuotaFailure` naming it); Vertex AI's shared capacity ("Resource exhausted,
 * please try again later") sends none.
 */
export function retryDelayMs(message: string): number | undefined {
  // The body as the SDK puts it in its message: JSON, or JSON quoted inside another's string.
  const match = /google\.rpc\.RetryInfo[^}]*?retryDelay\\?"\s*:\s*\\?"(\d+(?:\.\d+)?)s/.exec(message);
  return match ? Math.round(Number(match[1]) * 1000) : undefined;
}

/**
 * Whether a 429 is Vertex AI's pay-as-you-go one: its shared pool had no capacity for the request
 * ("Resource exhausted, please try again later.", the message Google's error-code-429 page gives for
 * that quota framework, read on 2026-12-07). Provisioned Throughput's ("Too many requests. Exceeded
 * the Provisioned Throughput.") and the Gemini API's full windows are this project's own limits.
 */
export function sharedCapacityBusy(message: string): boolean {
  return /resource exhausted[.,]\s*please try again later/i.test(message);
}

/**
 * Whether a refusal is about the document: only then may it become a `rejected` row, which nothing
 * retries. A 400 `INVALID_ARGUMENT` that names the document and not the request, or a 413. Any
 * other 4xx (billing or region `FAILED_PRECONDITION`, a schema the model refuses, a bare "invalid
 * argument", 409, 499, 401, 403, 404) would answer every document the same: it is retried.
 */
export function aboutTheDocument(status: number, state: string | undefined, text: string): boolean {
  if (status === 413) return true;
  if (status !== 400 || (state !== undefined && state !== 'INVALID_ARGUMENT')) return false;
  return ABOUT_THE_DOCUMENT.test(text) && !ABOUT_THE_REQUEST.test(text) && !ASKS_FOR_RETRY.test(text);
}

/** Maps an error of the SDK to docline's errors. */
export function geminiError(error: unknown): Error {
  if (
    error instanceof RejectionError ||
    error instanceof TransientError ||
    error instanceof ConfigurationError
  ) {
    return error;
  }
  const e = (error ?? {}) as ApiErrorLike;
  const options = { cause: error };
  const detail = (e.message ?? String(error)).slice(0, 500);
  if (causes(error).some((c) => c.name === 'AbortError' || c.name === 'TimeoutError')) {
    return new TransientError('analyzer_timeout', 'Gemini did not answer in time', options);
  }
  const status = typeof e.status === 'number' ? e.status : undefined;
  if (status === undefined) {
    return new TransientError('analyzer_unavailable', `Gemini could not be reached: ${detail}`, options);
  }
  if (status === 429) {
    const retryAfterMs = retryDelayMs(e.message ?? '');
    return new TransientError(RATE_LIMITED, `Gemini: ${detail}`, {
      ...options,
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
      ...(sharedCapacityBusy(e.message ?? '') ? { sharedCapacity: true } : {}),
    });
  }
  if (status === 408 || status >= 500)
    return new TransientError('analyzer_unavailable', `Gemini: ${detail}`, options);
  const { state, text } = errorBody(e.message ?? '');
  const said = `(${status}${state ? ` ${state}` : ''}): ${text.slice(0, 500)}`;
  // Only what is permanent about the document is refused: a 400 that asks for a retry is retried
  // (Pub/Sub), and counted by the outage breaker like a 503 when every call gets it.
  if (status === 400 && ASKS_FOR_RETRY.test(text))
    return new TransientError('analyzer_unavailable', `Gemini asked for a retry ${said}`, options);
  if (aboutTheDocument(status, state, text))
    return new RejectionError('analysis_failed', `Gemini refused the document ${said}`, options);
  if (status === 401 || status === 403 || /API_KEY_INVALID|API key not valid/i.test(detail)) {
    return new DependencyRefusedError(
      'analyzer_access_denied',
      `Gemini refused the worker's credentials ${said}. With Vertex AI, grant the worker's ` +
        'service account roles/aiplatform.user and enable aiplatform.googleapis.com; with an API key, check GEMINI_API_KEY. ' +
        'Pub/Sub retries the messages meanwhile.',
      options,
    );
  }
  if (status === 404) return modelNotFound(said, options);
  if (state === 'FAILED_PRECONDITION') {
    return new DependencyRefusedError(
      'analyzer_precondition',
      `Gemini refused the worker's project, not the document ${said}: check its billing and the ` +
        "model's availability in GOOGLE_CLOUD_LOCATION; Pub/Sub retries the messages meanwhile.",
      options,
    );
  }
  return new DependencyRefusedError(
    'analyzer_refused_request',
    `Gemini refused the worker's request, not the document ${said}; Pub/Sub retries the message.`,
    options,
  );
}

/**
 * Gemini answered 404: it does not serve the configured model (a wrong id, a model retired, or one
 * not offered in GOOGLE_CLOUD_LOCATION). Every document would get the same answer: a configuration
 * fault, answered 503 and alerted, never a `rejected` row.
 */
function modelNotFound(said: string, options: { cause?: unknown }): ConfigurationError {
  return new ConfigurationError(
    MODEL_NOT_FOUND,
    `Gemini does not serve the configured model ${said}. Set GEMINI_MODEL (the stack's docline:geminiModel) to a ` +
      `served model, such as ${DEFAULT_GEMINI_MODEL} (worker/src/contract/models.ts lists Google's retirement dates), ` +
      'and check GOOGLE_CLOUD_LOCATION; Pub/Sub retries the messages meanwhile.',
    options,
  );
}

/** The least thinking a known model takes; none for an id the table does not know (its default). */
export function thinkingConfigFor(model: string): ThinkingConfig | undefined {
  const thinking = knownModel(model)?.thinking;
  if (thinking === 'level') return { thinkingLevel: ThinkingLevel.MINIMAL };
  if (thinking === 'budget') return { thinkingBudget: 0 };
  return undefined;
}

/** How long the start-up check of the model may take (the startup probe allows 30 s in all). */
export const MODEL_CHECK_TIMEOUT_MS = 10_000;

/** The error and its causes: the SDK wraps what fetch throws when it is not an Error of its realm. */
function causes(error: unknown): ApiErrorLike[] {
  const chain: ApiErrorLike[] = [];
  let current = error as (ApiErrorLike & { cause?: unknown }) | undefined;
  while (current && typeof current === 'object' && chain.length < 5) {
    chain.push(current);
    current = current.cause as typeof current;
  }
  return chain;
}

/** {@link Analyzer} on Gemini. */
export class GeminiAnalyzer implements Analyzer {
  private readonly client: GoogleGenAI;
  private readonly model: string;
  private readonly timeoutMs: number;
  private readonly afterAnswerMs: number;
  private readonly logger: Logger | undefined;
  private readonly thinkingConfig: ThinkingConfig | undefined;

  constructor(options: GeminiAnalyzerOptions) {
    this.client = options.client;
    this.model = options.model ?? DELIVERY_DEFAULTS.geminiModel;
    this.thinkingConfig = thinkingConfigFor(this.model);
    this.timeoutMs = options.timeoutMs ?? DELIVERY_DEFAULTS.analyzerTimeoutMs;
    this.afterAnswerMs = options.afterAnswerMs ?? 0;
    this.logger = options.logger;
  }

  /**
   * Readiness, once at start-up: asks Gemini for the configured model (`models.get`, which bills no
   * tokens). A 404 is a model Gemini does not serve: it throws the {@link ConfigurationError} a
   * delivery would meet, so that the composition root keeps `/healthz` at 503. Any other failure
   * (a lookup the worker's role may not be granted, a network blip) says nothing about the model:
   * it is logged as a warning and the worker starts; a delivery then meets it on its own path.
   */
  async ready(timeoutMs = MODEL_CHECK_TIMEOUT_MS): Promise<void> {
    try {
      await this.client.models.get({ model: this.model, config: { httpOptions: { timeout: timeoutMs } } });
    } catch (error) {
      const mapped = geminiError(error);
      const code = (mapped as Partial<{ code: string }>).code;
      if (mapped instanceof ConfigurationError && code === MODEL_NOT_FOUND) throw mapped;
      this.logger?.warn(`could not check that Gemini serves ${this.model}: ${mapped.message}`, {
        model: this.model,
        error: code,
      });
    }
  }

  async analyze(input: AnalyzerInput): Promise<AnalysisResult> {
    // Tokens of this run only: those of a resumed run's earlier attempts are counted by the caller.
    const usage: Usage = { promptTokens: 0, outputTokens: 0, totalTokens: 0 };
    let problems = input.resume?.problems ?? '';
    // A run that resumes goes on after the attempts the delivery already paid for.
    const first = Math.min(MAX_ATTEMPTS, (input.resume?.attemptsDone ?? 0) + 1);
    for (let attempt = first; attempt <= MAX_ATTEMPTS; attempt += 1) {
      let response: GenerateContentResponse;
      try {
        // A paid call that could outlive the delivery's deadline is not started (503 instead).
        input.deadline?.check(`Gemini call ${attempt}`, this.timeoutMs);
        response = await this.generate(input, this.callTimeoutMs(input.deadline));
      } catch (error) {
        throw paidSoFar(error, usage, { attemptsDone: attempt - 1, problems });
      }
      addUsage(usage, response);
      refuseIfBlocked(response, usage);
      const outcome = readAnswer(response);
      if (outcome.ok) {
        return { analysis: outcome.analysis, model: response.modelVersion ?? this.model, usage };
      }
      problems = outcome.problems;
      this.logger?.warn('Gemini answered outside the analysis schema', {
        attempt,
        problems,
        finishReason: response.candidates?.[0]?.finishReason ?? null,
        object: input.name,
      });
    }
    throw new RejectionError(
      'analysis_failed',
      `Gemini's answer did not match the analysis schema after ${MAX_ATTEMPTS} attempts: ${problems}`,
      { usage },
    );
  }

  /** How long this call's answer is awaited: as long as the delivery can still use it. */
  private callTimeoutMs(deadline: Deadline | undefined): number {
    const usable = (deadline?.remainingMs() ?? Number.NaN) - this.afterAnswerMs;
    return Number.isFinite(usable) ? Math.max(this.timeoutMs, Math.floor(usable)) : this.timeoutMs;
  }

  private async generate(input: AnalyzerInput, timeoutMs: number): Promise<GenerateContentResponse> {
    try {
      return await this.client.models.generateContent({
        model: this.model,
        contents: [
          {
            role: 'user',
            parts: [
              {
                inlineData: {
                  mimeType: baseMimeType(input.contentType) ?? input.contentType,
                  data: input.bytes.toString('base64'),
                },
              },
              { text: INVOICE_PROMPT },
            ],
          },
        ],
        config: {
          responseMimeType: 'application/json',
          responseJsonSchema: analysisJsonSchema(),
          // Ignored by gemini-3.5-flash-lite (Google's model page), honoured by the models before it.
          temperature: 0,
          ...(this.thinkingConfig ? { thinkingConfig: this.thinkingConfig } : {}),
          // One deadline per call; the SDK does not retry (no retryOptions): Pub/Sub does.
          httpOptions: { timeout: timeoutMs },
        },
      });
    } catch (error) {
      throw geminiError(error);
    }
  }
}

/**
 * A transient failure after a paid call (the first answered outside the schema, the second got a
 * 429): it carries the tokens this run billed, so that they are recorded, never lost, and how far
 * the analysis got, so that the next run of the delivery does not pay those attempts again.
 */
function paidSoFar(error: unknown, usage: Usage, progress: AnalysisProgress): unknown {
  const paid = paidBeforeFailing(error);
  if (!paid || paid.usage || paid.progress) return error;
  if (usage.totalTokens === 0 && progress.attemptsDone === 0) return error;
  // A fault of the configuration stays one (its answer and its alert), now carrying what was paid.
  const Kind = error instanceof ConfigurationError ? ConfigurationError : TransientError;
  const { code, message } = error as TransientError | ConfigurationError;
  const retryAfterMs = error instanceof TransientError ? error.retryAfterMs : undefined;
  return new Kind(code, message, {
    cause: error,
    ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    ...(usage.totalTokens > 0 ? { usage: { ...usage } } : {}),
    ...(progress.attemptsDone > 0 ? { progress } : {}),
  });
}

/** Refuses a blocked answer; the tokens billed so far go with the refusal into the row. */
function refuseIfBlocked(response: GenerateContentResponse, usage: Usage): void {
  const blockReason = response.promptFeedback?.blockReason;
  if (blockReason) {
    const message = response.promptFeedback?.blockReasonMessage;
    throw new RejectionError(
      'safety_blocked',
      `Gemini blocked the document: ${blockReason}${message ? ` (${message})` : ''}`,
      { usage },
    );
  }
  const finishReason = response.candidates?.[0]?.finishReason;
  if (finishReason && SAFETY_FINISH_REASONS.includes(finishReason)) {
    throw new RejectionError('safety_blocked', `Gemini withheld its answer: ${finishReason}`, { usage });
  }
}

function readAnswer(response: GenerateContentResponse): ReturnType<typeof parseAnalysis> {
  const parts = response.candidates?.[0]?.content?.parts ?? [];
  // Thought parts are not the answer; the SDK's `text` getter skips them the same way.
  const text = parts
    .filter((p) => typeof p.text === 'string' && !p.thought)
    .map((p) => p.text)
    .join('');
  if (!text) {
    return {
      ok: false,
      problems: `no answer (finishReason ${response.candidates?.[0]?.finishReason ?? 'none'})`,
    };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, problems: 'the answer is not JSON' };
  }
  return parseAnalysis(value);
}

function addUsage(total: Usage, response: GenerateContentResponse): void {
  const u = response.usageMetadata;
  if (!u) return;
  // Thinking tokens are billed as output.
  const output = (u.candidatesTokenCount ?? 0) + (u.thoughtsTokenCount ?? 0);
  total.promptTokens += u.promptTokenCount ?? 0;
  total.outputTokens += output;
  total.totalTokens += u.totalTokenCount ?? (u.promptTokenCount ?? 0) + output;
}

/** How to reach Gemini; the composition root fills it from the configuration. */
export interface GeminiClientOptions {
  /** API-key mode (Gemini Developer API) when set; Vertex AI otherwise. */
  apiKey?: string | undefined;
  /** Vertex AI project and location (the service's own credentials). */
  project?: string | undefined;
  location?: string | undefined;
  /** A local server, for tests. */
  baseUrl?: string | undefined;
  /** Vertex AI credentials other than the environment's (tests inject a static token). */
  googleAuthOptions?: GoogleGenAIOptions['googleAuthOptions'];
  /** Extra HTTP options (tests pass their `fetch`); never `retryOptions`: Pub/Sub retries. */
  httpOptions?: Omit<HttpOptions, 'retryOptions' | 'baseUrl'>;
}

/**
 * A @google/genai client: Vertex AI with the service's credentials by default, API-key mode when
 * a key is given. No retries inside the SDK (none unless `retryOptions` is set).
 */
export function createGeminiClient(options: GeminiClientOptions): GoogleGenAI {
  const httpOptions =
    options.baseUrl || options.httpOptions
      ? { ...options.httpOptions, ...(options.baseUrl ? { baseUrl: options.baseUrl } : {}) }
      : undefined;
  if (options.apiKey) {
    // @google/genai 3 defaults the Developer API to v1; responseJsonSchema is documented on v1beta.
    return new GoogleGenAI({
      apiKey: options.apiKey,
      apiVersion: 'v1beta',
      ...(httpOptions ? { httpOptions } : {}),
    });
  }
  if (!options.project || !options.location) {
    throw new ConfigurationError(
      'analyzer_configuration',
      'Gemini needs GEMINI_API_KEY, or GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION for Vertex AI',
    );
  }
  return new GoogleGenAI({
    vertexai: true,
    project: options.project,
    location: options.location,
    ...(options.googleAuthOptions ? { googleAuthOptions: options.googleAuthOptions } : {}),
    ...(httpOptions ? { httpOptions } : {}),
  });
}
