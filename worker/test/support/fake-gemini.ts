import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sampleAnalysis } from '../../../sim/samples';

/**
 * A local stand-in for Gemini's generateContent, in both URL shapes @google/genai uses:
 * API-key mode `POST /v1beta/models/MODEL:generateContent` and Vertex AI
 * `POST /v1beta1/projects/P/locations/L/publishers/google/models/MODEL:generateContent`.
 * It answers what the test scripts (`respondWith`), or by default a valid analysis; it can fail
 * with the documented error bodies (`failNext`) or never answer (`stallNext`). Every request is
 * recorded with its parsed body.
 *
 * It also answers `models.get` (`GET /v1beta/models/MODEL`, Vertex AI
 * `GET /v1beta1/…/publishers/google/models/MODEL`): the model's resource, or for a model the test
 * retired (`retire`) the 404 Google answers for a retired or unknown model, which generateContent
 * answers too ("API requests referencing a retired model ID typically return a 404", Google's model
 * lifecycle page). Both shapes of that 404 are the ones the two APIs document.
 *
 * Not modelled: the model itself (answers are scripted), streaming, the Files API, token counting.
 */

export interface RecordedGeminiRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: GenerateContentBody;
  /** Which URL shape the request used. */
  mode: 'api-key' | 'vertex';
  model: string;
}

export interface GenerateContentBody {
  contents?: Array<{ role?: string; parts?: Array<Record<string, unknown>> }>;
  generationConfig?: Record<string, unknown>;
  [key: string]: unknown;
}

export type GeminiAnswer =
  | Record<string, unknown>
  | ((request: RecordedGeminiRequest) => Record<string, unknown>);

export type GeminiFailureStatus = 400 | 401 | 403 | 404 | 408 | 409 | 429 | 499 | 500 | 503 | 504;

export interface FakeGemini {
  /** The `httpOptions.baseUrl` to give the client. */
  url: string;
  requests: RecordedGeminiRequest[];
  /** Queues answers for the next requests, in order; after them the default answer is used. */
  respondWith(...answers: GeminiAnswer[]): void;
  /**
   * The next `times` requests answer this status with the documented error body; `state` replaces
   * the body's `status` (a 400 may be `FAILED_PRECONDITION` as well as `INVALID_ARGUMENT`).
   */
  failNext(status: GeminiFailureStatus, times?: number, message?: string, state?: string): void;
  /** The next `times` requests are never answered. */
  stallNext(times?: number): void;
  /** From now on the model is gone: `models.get` and generateContent answer it 404. */
  retire(model: string): void;
  /** The `models.get` requests, in order: the mode and the model asked for. */
  modelLookups: Array<{ mode: 'api-key' | 'vertex'; model: string; path: string }>;
  stop(): Promise<void>;
}

const STATUS: Record<GeminiFailureStatus, [string, string]> = {
  400: ['INVALID_ARGUMENT', 'Request contains an invalid argument.'],
  401: [
    'UNAUTHENTICATED',
    'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
  ],
  403: [
    'PERMISSION_DENIED',
    "Permission 'aiplatform.endpoints.predict' denied on resource '//aiplatform.googleapis.com/projects/acme-dev/locations/europe-west1/publishers/google/models/gemini-2.5-flash' (or it may not exist).",
  ],
  404: [
    'NOT_FOUND',
    'models/gemini-0.0-nonexistent is not found for API version v1beta, or is not supported for generateContent.',
  ],
  408: ['DEADLINE_EXCEEDED', 'Request timed out.'],
  409: ['ABORTED', 'The operation was aborted, typically due to a concurrency issue.'],
  499: ['CANCELLED', 'The operation was cancelled.'],
  429: ['RESOURCE_EXHAUSTED', 'Resource exhausted. Please try again later.'],
  500: [
    'INTERNAL',
    'An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting',
  ],
  503: ['UNAVAILABLE', 'The model is overloaded. Please try again later.'],
  504: ['DEADLINE_EXCEEDED', 'The request timed out. Please try again.'],
};

/** The documented error body of a status. */
export function geminiErrorBody(status: GeminiFailureStatus, message?: string, state?: string) {
  const [documented, text] = STATUS[status];
  return { error: { code: status, message: message ?? text, status: state ?? documented } };
}

/** A valid analysis, as the model would return it. */
export function sampleGeminiAnalysis(): Record<string, unknown> {
  // The shared sample analysis, with a full supplier identity and one line, as Gemini fills it in.
  return sampleAnalysis({
    supplier_name: 'Papeterie Dupont SARL',
    supplier_vat_id: 'FR32123456789',
    supplier_siren: '123456789',
    supplier_siret: '12345678900017',
    customer_name: 'Acme SAS',
    line_items: [
      { description: 'Ramettes A4', quantity: 40, unit_price: 25.72, amount: 1028.8, vat_rate: 20 },
    ],
  });
}

/** A generateContent response whose answer is `answer` (JSON-encoded unless a string). */
export function geminiResponse(
  answer: unknown,
  options: {
    finishReason?: string;
    usage?: { prompt?: number; candidates?: number; thoughts?: number; total?: number };
    modelVersion?: string;
  } = {},
): Record<string, unknown> {
  const usage = { prompt: 1290, candidates: 210, thoughts: 96, ...options.usage };
  return {
    candidates: [
      {
        content: {
          role: 'model',
          parts: [{ text: typeof answer === 'string' ? answer : JSON.stringify(answer) }],
        },
        finishReason: options.finishReason ?? 'STOP',
        index: 0,
      },
    ],
    usageMetadata: {
      promptTokenCount: usage.prompt,
      candidatesTokenCount: usage.candidates,
      thoughtsTokenCount: usage.thoughts,
      totalTokenCount: usage.total ?? usage.prompt + usage.candidates + usage.thoughts,
      promptTokensDetails: [{ modality: 'DOCUMENT', tokenCount: usage.prompt }],
    },
    modelVersion: options.modelVersion ?? 'gemini-2.5-flash',
    responseId: 'fake-response-id',
  };
}

/** A response where the prompt itself was blocked (no candidates). */
export function blockedPromptResponse(blockReason: string): Record<string, unknown> {
  return {
    promptFeedback: { blockReason, safetyRatings: [] },
    usageMetadata: { promptTokenCount: 1290, totalTokenCount: 1290 },
    modelVersion: 'gemini-2.5-flash',
  };
}

/** A response whose candidate stopped for a safety reason, with no content. */
export function blockedCandidateResponse(finishReason: string): Record<string, unknown> {
  return {
    candidates: [
      {
        finishReason,
        index: 0,
        safetyRatings: [{ category: 'HARM_CATEGORY_DANGEROUS_CONTENT', probability: 'HIGH', blocked: true }],
      },
    ],
    usageMetadata: { promptTokenCount: 1290, totalTokenCount: 1290 },
    modelVersion: 'gemini-2.5-flash',
  };
}

const API_KEY_PATH = /^\/v1beta\/models\/([^/:]+):generateContent$/;
const VERTEX_PATH =
  /^\/v1beta1\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/google\/models\/([^/:]+):generateContent$/;
const API_KEY_MODEL = /^\/v1beta\/models\/([^/:]+)$/;
const VERTEX_MODEL =
  /^\/v1beta1\/(?:projects\/[^/]+\/locations\/[^/]+\/)?publishers\/google\/models\/([^/:]+)$/;

/**
 * The 404 of a model that does not exist (or no longer does), as each API words it: the Gemini API
 * names `models/MODEL` and the API version; Vertex AI names the publisher model's full resource.
 */
export function modelNotFoundBody(mode: 'api-key' | 'vertex', model: string, resource = model) {
  const message =
    mode === 'api-key'
      ? `models/${model} is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.`
      : `Publisher Model \`${resource}\` was not found or your project does not have access to it. Please ensure you are using a valid model version. For more information, see: https://cloud.google.com/vertex-ai/generative-ai/docs/learn/model-versions`;
  return { error: { code: 404, message, status: 'NOT_FOUND' } };
}

/** The model resource `models.get` answers, in each API's shape. */
function modelResource(mode: 'api-key' | 'vertex', model: string): Record<string, unknown> {
  return mode === 'api-key'
    ? {
        name: `models/${model}`,
        baseModelId: model,
        version: '001',
        displayName: model,
        inputTokenLimit: 1_048_576,
        outputTokenLimit: 65_536,
        supportedGenerationMethods: ['generateContent', 'countTokens'],
        thinking: true,
      }
    : { name: `publishers/google/models/${model}`, versionId: 'default', launchStage: 'GA' };
}

/** Starts the fake on 127.0.0.1 on a free port. */
export async function startFakeGemini(): Promise<FakeGemini> {
  const requests: RecordedGeminiRequest[] = [];
  const answers: GeminiAnswer[] = [];
  const failures: Array<{ status: GeminiFailureStatus; message?: string; state?: string }> = [];
  const stalled = new Set<ServerResponse>();
  const retired = new Set<string>();
  const modelLookups: FakeGemini['modelLookups'] = [];
  let stalls = 0;

  function send(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
    res.end(JSON.stringify(body));
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const lookup = API_KEY_MODEL.exec(url.pathname) ?? VERTEX_MODEL.exec(url.pathname);
    if (req.method === 'GET' && lookup) {
      const mode = url.pathname.startsWith('/v1beta1/') ? 'vertex' : 'api-key';
      const model = lookup[1]!;
      modelLookups.push({ mode, model, path: url.pathname });
      if (retired.has(model)) return send(res, 404, modelNotFoundBody(mode, model, url.pathname.slice(9)));
      return send(res, 200, modelResource(mode, model));
    }
    const apiKey = API_KEY_PATH.exec(url.pathname);
    const vertex = VERTEX_PATH.exec(url.pathname);
    if (req.method !== 'POST' || (!apiKey && !vertex)) {
      return send(res, 404, geminiErrorBody(404, `Not found: ${req.method} ${url.pathname}`));
    }
    const request: RecordedGeminiRequest = {
      method: req.method,
      path: url.pathname,
      headers: req.headers,
      body: text ? (JSON.parse(text) as GenerateContentBody) : {},
      mode: apiKey ? 'api-key' : 'vertex',
      model: (apiKey ? apiKey[1] : vertex![3])!,
    };
    requests.push(request);
    if (retired.has(request.model)) {
      const resource = url.pathname.slice(9).replace(/:generateContent$/, '');
      return send(res, 404, modelNotFoundBody(request.mode, request.model, resource));
    }
    if (stalls > 0) {
      stalls -= 1;
      stalled.add(res);
      return;
    }
    const failure = failures.shift();
    if (failure)
      return send(res, failure.status, geminiErrorBody(failure.status, failure.message, failure.state));
    const answer = answers.shift() ?? geminiResponse(sampleGeminiAnalysis());
    return send(res, 200, typeof answer === 'function' ? answer(request) : answer);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) =>
      send(res, 500, { error: { code: 500, message: String(error) } }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    respondWith(...next) {
      answers.push(...next);
    },
    failNext(status, times = 1, message, state) {
      for (let i = 0; i < times; i += 1)
        failures.push({ status, ...(message ? { message } : {}), ...(state ? { state } : {}) });
    },
    stallNext(times = 1) {
      stalls += times;
    },
    retire(model) {
      retired.add(model);
    },
    modelLookups,
    stop: () =>
      new Promise<void>((resolve, reject) => {
        for (const res of stalled) res.destroy();
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
