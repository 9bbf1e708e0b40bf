import { OAuth2Client } from 'google-auth-library';
import { createGeminiClient, GeminiAnalyzer } from '../src/adapters/analyzers/gemini-analyzer';
import { INVOICE_PROMPT } from '../src/adapters/analyzers/gemini-prompt';
import { analysisJsonSchema } from '../src/contract/analysis';
import { Deadline } from '../src/core/deadline';
import {
  ConfigurationError,
  DependencyRefusedError,
  ERROR_ANSWERS,
  errorAnswer,
  RejectionError,
  TransientError,
} from '../src/core/errors';
import { isOutage } from '../src/core/outage';
import type { AnalyzerInput } from '../src/core/ports';
import {
  blockedCandidateResponse,
  blockedPromptResponse,
  type FakeGemini,
  type GeminiFailureStatus,
  geminiResponse,
  sampleGeminiAnalysis,
  startFakeGemini,
} from './support/fake-gemini';
import { MemoryLogger } from './support/fakes';

/*
 * GeminiAnalyzer runs through @google/genai against fake-gemini, a local server with
 * generateContent's request and response shapes, in API-key and Vertex AI modes.
 * Not covered: what the real model extracts from real invoices (answers are scripted; the prompt
 * is checked for its content only), streaming, and Vertex AI's credential discovery on Cloud Run
 * (the tests inject a static token through google-auth-library).
 */

/**
 * Jest runs each file in a vm context where undici's global dispatcher, which the SDK reaches for
 * when it brings its own, is missing; handing the SDK Node's fetch (its documented
 * `httpOptions.fetch`) sidesteps that. Everything else is the SDK's own path.
 */
const httpOptions = { fetch: (...args: Parameters<typeof fetch>) => fetch(...args) };

/** A Vertex AI client for acme-dev in europe-west1 with a static token, against `baseUrl`. */
function vertexClient(baseUrl: string) {
  const authClient = new OAuth2Client();
  authClient.setCredentials({ access_token: 'vertex-token', expiry_date: Date.now() + 3_600_000 });
  return createGeminiClient({
    project: 'acme-dev',
    location: 'europe-west1',
    baseUrl,
    // google-auth-library 11's client; the SDK bundles 10, whose types differ but not its use.
    googleAuthOptions: { authClient: authClient as never },
    httpOptions,
  });
}

const PDF = Buffer.from('%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n%%EOF\n');
const input: AnalyzerInput = { bytes: PDF, contentType: 'application/pdf', name: '2026/11/facture-0042.pdf' };

describe('GeminiAnalyzer', () => {
  let fake: FakeGemini;
  let logger: MemoryLogger;
  let analyzer: GeminiAnalyzer;

  beforeEach(async () => {
    fake = await startFakeGemini();
    logger = new MemoryLogger();
    analyzer = new GeminiAnalyzer({
      client: createGeminiClient({ apiKey: 'test-key', baseUrl: fake.url, httpOptions }),
      model: 'gemini-3.5-flash-lite',
      timeoutMs: 2_000,
      logger,
    });
  });
  afterEach(() => fake.stop());

  /** An analyzer on API key 'k' against the stand-in, `options` on top. */
  const withKey = (options: Partial<ConstructorParameters<typeof GeminiAnalyzer>[0]> = {}) =>
    new GeminiAnalyzer({
      client: createGeminiClient({ apiKey: 'k', baseUrl: fake.url, httpOptions }),
      ...options,
    });
  /** The first call is answered (paid) outside the schema, then the next one fails with `status`. */
  const paidThenFails = (status: GeminiFailureStatus) =>
    fake.respondWith(() => {
      fake.failNext(status, 1);
      return geminiResponse('not json at all', { usage: { prompt: 10, candidates: 5, thoughts: 1 } });
    });

  describe('the request', () => {
    it('sends the document inline with its MIME type and base64 bytes, then the prompt', async () => {
      await analyzer.analyze(input);
      const [request] = fake.requests;
      expect(request!.path).toBe('/v1beta/models/gemini-3.5-flash-lite:generateContent');
      expect(request!.headers['x-goog-api-key']).toBe('test-key');
      expect(request!.body.contents).toEqual([
        {
          role: 'user',
          parts: [
            { inlineData: { mimeType: 'application/pdf', data: PDF.toString('base64') } },
            { text: INVOICE_PROMPT },
          ],
        },
      ]);
    });

    it('asks for JSON with the analysis schema as structured output', async () => {
      await analyzer.analyze(input);
      const config = fake.requests[0]!.body.generationConfig!;
      expect(config.responseMimeType).toBe('application/json');
      expect(config.responseJsonSchema).toEqual(analysisJsonSchema());
      expect(config.temperature).toBe(0);
    });

    it('asks for the least thinking the model takes: thinking is billed as output', async () => {
      await analyzer.analyze(input);
      expect(fake.requests[0]!.body.generationConfig!.thinkingConfig).toEqual({ thinkingLevel: 'MINIMAL' });
    });

    it.each([
      ['gemini-2.5-pro', { thinkingBudget: 0 }],
      ['gemini-9-unknown', undefined],
    ])(
      'uses the configured model, and sends %s the thinking setting it takes (an unknown id none: its own default)',
      async (model, expected) => {
        await withKey({ model }).analyze(input);
        expect(fake.requests[0]!.model).toBe(model);
        expect(fake.requests[0]!.body.generationConfig!.thinkingConfig).toEqual(expected);
      },
    );

    it('never sends the object name', async () => {
      await analyzer.analyze(input);
      expect(JSON.stringify(fake.requests[0]!.body)).not.toContain('facture-0042');
    });
  });

  describe('ready() (the start-up check of the model)', () => {
    it('asks Gemini for the configured model once, with models.get: no generateContent, no tokens', async () => {
      await analyzer.ready();
      expect(fake.modelLookups).toEqual([
        { mode: 'api-key', model: 'gemini-3.5-flash-lite', path: '/v1beta/models/gemini-3.5-flash-lite' },
      ]);
      expect(fake.requests).toEqual([]);
    });

    it('throws the configuration fault a delivery would meet when Gemini answers the model 404', async () => {
      fake.retire('gemini-3.5-flash-lite');
      const error = await analyzer.ready().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigurationError);
      expect((error as ConfigurationError).code).toBe('analyzer_model_not_found');
      expect(errorAnswer(error)).toBe(ERROR_ANSWERS.configuration);
      expect((error as Error).message).toMatch(/GEMINI_MODEL \(the stack's docline:geminiModel\)/);
      expect((error as Error).message).toContain(
        'models/gemini-3.5-flash-lite is not found for API version v1beta',
      );
    });

    it('finds a retired model on Vertex AI too, by its publisher model', async () => {
      const vertex = new GeminiAnalyzer({ client: vertexClient(fake.url), model: 'gemini-2.5-flash' });
      fake.retire('gemini-2.5-flash');
      const error = await vertex.ready().catch((e: unknown) => e);
      expect((error as ConfigurationError).code).toBe('analyzer_model_not_found');
      expect((error as Error).message).toContain('Publisher Model `');
      expect(fake.modelLookups.map((l) => l.mode)).toEqual(['vertex']);
    });

    it('starts anyway, with a warning, when the lookup fails for another reason (it says nothing about the model)', async () => {
      const unreachable = new GeminiAnalyzer({
        client: createGeminiClient({ apiKey: 'k', baseUrl: 'http://127.0.0.1:1', httpOptions }),
        logger,
      });
      await expect(unreachable.ready(1_000)).resolves.toBeUndefined();
      expect(logger.entries.filter((e) => e.severity === 'WARNING').map((e) => e.message)).toEqual([
        expect.stringMatching(/^could not check that Gemini serves gemini-3\.5-flash-lite: /),
      ]);
    });

    it('answers a generateContent 404 during a delivery as the same configuration fault, never a rejection', async () => {
      fake.retire('gemini-3.5-flash-lite');
      const error = await analyzer.analyze(input).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigurationError);
      expect(error).not.toBeInstanceOf(RejectionError);
      expect((error as ConfigurationError).code).toBe('analyzer_model_not_found');
    });
  });

  describe('Vertex AI mode', () => {
    it('posts to the project and location with the service credentials', async () => {
      const vertex = new GeminiAnalyzer({ client: vertexClient(fake.url) });
      const result = await vertex.analyze(input);
      expect(result.analysis.invoice_number).toBe('F-2026-0042');
      const [request] = fake.requests;
      expect(request!.path).toBe(
        '/v1beta1/projects/acme-dev/locations/europe-west1/publishers/google/models/gemini-3.5-flash-lite:generateContent',
      );
      expect(request!.headers.authorization).toBe('Bearer vertex-token');
      expect(request!.headers['x-goog-api-key']).toBeUndefined();
    });

    it('needs a project and a location without an API key', () => {
      expect(() => createGeminiClient({ location: 'europe-west1' })).toThrow(ConfigurationError);
    });
  });

  describe('the answer', () => {
    it('returns the validated analysis, the model version and the usage (thinking counted as output)', async () => {
      fake.respondWith(
        geminiResponse(sampleGeminiAnalysis(), {
          usage: { prompt: 1000, candidates: 200, thoughts: 50, total: 1250 },
          modelVersion: 'gemini-2.5-flash-001',
        }),
      );
      const result = await analyzer.analyze(input);
      expect(result.analysis).toEqual(sampleGeminiAnalysis());
      expect(result.model).toBe('gemini-2.5-flash-001');
      expect(result.usage).toEqual({ promptTokens: 1000, outputTokens: 250, totalTokens: 1250 });
    });

    it('asks once more when the answer does not match the schema, and counts both calls', async () => {
      fake.respondWith(
        geminiResponse(
          { ...sampleGeminiAnalysis(), issue_date: '30/11/2026' },
          { usage: { prompt: 10, candidates: 5, thoughts: 0 } },
        ),
        geminiResponse(sampleGeminiAnalysis(), { usage: { prompt: 10, candidates: 5, thoughts: 0 } }),
      );
      const result = await analyzer.analyze(input);
      expect(result.analysis.issue_date).toBe('2026-11-30');
      expect(fake.requests).toHaveLength(2);
      expect(result.usage).toEqual({ promptTokens: 20, outputTokens: 10, totalTokens: 30 });
      expect(logger.entries.find((e) => e.severity === 'WARNING')?.problems).toContain('issue_date');
    });

    it('rejects the document (analysis_failed) after two invalid answers, with the tokens both cost', async () => {
      fake.respondWith(
        geminiResponse('not json at all', { usage: { prompt: 10, candidates: 5, thoughts: 1 } }),
        geminiResponse({ document_type: 'invoice' }, { usage: { prompt: 10, candidates: 5, thoughts: 1 } }),
      );
      const error = await analyzer.analyze(input).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RejectionError);
      expect((error as RejectionError).code).toBe('analysis_failed');
      expect((error as RejectionError).usage).toEqual({
        promptTokens: 20,
        outputTokens: 12,
        totalTokens: 32,
      });
      expect(fake.requests).toHaveLength(2);
    });

    it('interleaving 5: carries the tokens of a paid first call when the second gets a 429, and the next run goes on with the second call only', async () => {
      // The 429 answers the second request: the first is answered (and billed) before it.
      paidThenFails(429);
      const error = (await analyzer.analyze(input).catch((e: unknown) => e)) as TransientError;
      expect(error).toBeInstanceOf(TransientError);
      expect(error).toMatchObject({ code: 'analyzer_rate_limited' });
      expect(error.usage).toEqual({ promptTokens: 10, outputTokens: 6, totalTokens: 16 });
      expect(error.progress).toEqual({ attemptsDone: 1, problems: expect.any(String) });
      // The paid call, then the one refused with a 429.
      expect(fake.requests).toHaveLength(2);
      fake.respondWith(
        geminiResponse({ document_type: 'invoice' }, { usage: { prompt: 10, candidates: 5, thoughts: 0 } }),
      );
      const refused = await analyzer.analyze({ ...input, resume: error.progress }).catch((e: unknown) => e);
      // One more paid call, not two: the first attempt is not paid again, and only this run's tokens.
      expect(fake.requests).toHaveLength(3);
      expect(refused).toBeInstanceOf(RejectionError);
      expect(refused).toMatchObject({
        code: 'analysis_failed',
        usage: { promptTokens: 10, outputTokens: 5, totalTokens: 15 },
      });
    });

    it('interleaving 5: a 404 for the model after a paid first call is a configuration fault that carries how far the analysis got (soak I5, seed 168)', async () => {
      paidThenFails(404);
      const error = (await analyzer.analyze(input).catch((e: unknown) => e)) as ConfigurationError;
      expect(error).toBeInstanceOf(ConfigurationError);
      expect(error.progress).toEqual({ attemptsDone: 1, problems: expect.any(String) });
      expect(error.usage).toEqual({ promptTokens: 10, outputTokens: 6, totalTokens: 16 });
    });

    it('interleaving 5: a resumed run that meets a 429 again still carries how far the analysis got', async () => {
      fake.failNext(429);
      const error = (await analyzer
        .analyze({ ...input, resume: { attemptsDone: 1, problems: 'issue_date' } })
        .catch((e: unknown) => e)) as TransientError;
      expect(error).toMatchObject({ code: 'analyzer_rate_limited' });
      expect(error.progress).toEqual({ attemptsDone: 1, problems: 'issue_date' });
      expect(error.usage).toBeUndefined();
    });

    it("interleaving 3: does not start a second call that could outlive the delivery's deadline", async () => {
      let nowMs = Date.parse('2026-11-30T09:00:00.000Z');
      const clock = { now: () => new Date(nowMs) };
      // 3 s left: enough for one 2 s call, and the first call takes 1.5 s of it.
      const deadline = new Deadline(nowMs + 3_000, clock);
      fake.respondWith(() => {
        nowMs += 1_500;
        return geminiResponse('not json at all', { usage: { prompt: 10, candidates: 5, thoughts: 0 } });
      });
      const error = await analyzer.analyze({ ...input, deadline }).catch((e: unknown) => e);
      expect(fake.requests).toHaveLength(1);
      expect(error).toBeInstanceOf(TransientError);
      expect(error).toMatchObject({ code: 'deadline_exceeded' });
      expect((error as TransientError).usage?.totalTokens).toBe(15);
    });

    it('treats an answer cut off at MAX_TOKENS as invalid', async () => {
      fake.respondWith(
        geminiResponse('{"document_type": "invoice", "lang', { finishReason: 'MAX_TOKENS' }),
        geminiResponse('{"document_type": "invoice", "lang', { finishReason: 'MAX_TOKENS' }),
      );
      await expect(analyzer.analyze(input)).rejects.toMatchObject({ code: 'analysis_failed' });
    });

    it.each(['SAFETY', 'PROHIBITED_CONTENT', 'BLOCKLIST', 'OTHER'])(
      'rejects a prompt blocked for %s as safety_blocked, with the reason',
      async (reason) => {
        fake.respondWith(blockedPromptResponse(reason));
        const error = await analyzer.analyze(input).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(RejectionError);
        expect((error as RejectionError).code).toBe('safety_blocked');
        // A blocked prompt is still billed: the row keeps its tokens.
        expect((error as RejectionError).usage).toMatchObject({ promptTokens: 1290, totalTokens: 1290 });
        expect((error as Error).message).toContain(reason);
        expect(fake.requests).toHaveLength(1);
      },
    );

    it.each(['SAFETY', 'PROHIBITED_CONTENT', 'BLOCKLIST', 'SPII'])(
      'rejects an answer withheld for %s as safety_blocked',
      async (finishReason) => {
        fake.respondWith(blockedCandidateResponse(finishReason));
        const error = await analyzer.analyze(input).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(RejectionError);
        expect((error as RejectionError).code).toBe('safety_blocked');
        expect((error as Error).message).toContain(finishReason);
      },
    );
  });

  describe('error mapping', () => {
    const cases = [
      [408, TransientError, 'analyzer_unavailable'],
      [429, TransientError, 'analyzer_rate_limited'],
      [500, TransientError, 'analyzer_unavailable'],
      [503, TransientError, 'analyzer_unavailable'],
      [504, TransientError, 'analyzer_unavailable'],
      // A bare "invalid argument" does not say it is the document's: every document could get it.
      [400, DependencyRefusedError, 'analyzer_refused_request'],
      [401, DependencyRefusedError, 'analyzer_access_denied'],
      [403, DependencyRefusedError, 'analyzer_access_denied'],
      // A model Gemini does not serve: the operator's setting, alerted as a configuration fault.
      [404, ConfigurationError, 'analyzer_model_not_found'],
      [409, DependencyRefusedError, 'analyzer_refused_request'],
      [499, DependencyRefusedError, 'analyzer_refused_request'],
    ] as const;

    it.each(cases)('maps %i to %p (%s), in one request', async (status, kind, code) => {
      fake.failNext(status);
      const error = await analyzer.analyze(input).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(kind);
      expect((error as { code: string }).code).toBe(code);
      expect(fake.requests).toHaveLength(1); // the SDK does not retry: Pub/Sub does
    });

    it.each([
      ['The document has no pages.'],
      ['Request payload size exceeds the limit: 20971520 bytes.'],
      ['The input token count (1216582) exceeds the maximum number of tokens allowed (1048575).'],
    ])('rejects the document (analysis_failed) for a 400 about the document: %s', async (message) => {
      fake.failNext(400, 1, message);
      const error = await analyzer.analyze(input).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RejectionError);
      expect((error as RejectionError).code).toBe('analysis_failed');
    });

    it.each([
      [
        'Unable to process input image. Please retry or report in https://developers.generativeai.google/guide/troubleshooting',
      ],
      ['The document could not be processed at this time. Try again later.'],
      ['Internal error while processing the PDF, temporarily unavailable.'],
    ])(
      'retries a 400 that asks for a retry (503, counted by the outage breaker), never a rejected row: %s',
      async (message) => {
        fake.failNext(400, 1, message);
        const error = await analyzer.analyze(input).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(TransientError);
        expect(error).not.toBeInstanceOf(RejectionError);
        expect((error as TransientError).code).toBe('analyzer_unavailable');
        expect(isOutage('analyzer', error)).toBe(true);
      },
    );

    it.each([
      ['FAILED_PRECONDITION', 'User location is not supported for the API use.', 'analyzer_precondition'],
      [
        'FAILED_PRECONDITION',
        'Gemini API free tier is not available in your country. Please enable billing on your project in Google AI Studio.',
        'analyzer_precondition',
      ],
      [
        'INVALID_ARGUMENT',
        'The specified schema produces a constraint that has too many states for serving.',
        'analyzer_refused_request',
      ],
      [
        'INVALID_ARGUMENT',
        '* GenerateContentRequest.generation_config.response_schema.properties[total].type: must be specified',
        'analyzer_refused_request',
      ],
      ['INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.', 'analyzer_access_denied'],
    ])(
      'retries a 400 %s that is not about the document (503, alerted), never a rejected row: %s',
      async (state, message, code) => {
        fake.failNext(400, 1, message, state);
        const error = await analyzer.analyze(input).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(DependencyRefusedError);
        expect(error).not.toBeInstanceOf(RejectionError);
        expect((error as DependencyRefusedError).code).toBe(code);
        expect(errorAnswer(error)).toEqual(ERROR_ANSWERS.dependencyRefused);
        expect(errorAnswer(error).http).toBe(503);
      },
    );

    it.each([
      ['Resource exhausted. Please try again later.', true],
      ['Resource exhausted, please try again later.', true],
      ['Too many requests. Exceeded the Provisioned Throughput.', false],
      ['Resource has been exhausted (e.g. check quota).', false],
    ])(
      'tells a 429 of the shared pay-as-you-go pool from a limit of the project’s own: %s → %p',
      async (message, shared) => {
        fake.failNext(429, 1, message);
        const error = await analyzer.analyze(input).catch((e: unknown) => e);
        expect((error as TransientError).code).toBe('analyzer_rate_limited');
        expect((error as TransientError).sharedCapacity).toBe(shared);
      },
    );

    it('gives up after its timeout when Gemini does not answer', async () => {
      const impatient = withKey({ timeoutMs: 200 });
      fake.stallNext();
      const error = await impatient.analyze(input).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TransientError);
      expect((error as TransientError).code).toBe('analyzer_timeout');
    });

    describe('how long a paid call is awaited', () => {
      // The timeout the adapter hands the SDK for each call, read from a client that records it.
      const timeouts: number[] = [];
      const recording = new GeminiAnalyzer({
        client: {
          models: {
            generateContent: async (params: { config?: { httpOptions?: { timeout?: number } } }) => {
              timeouts.push(params.config?.httpOptions?.timeout ?? -1);
              return {
                candidates: [{ content: { parts: [{ text: JSON.stringify(sampleGeminiAnalysis()) }] } }],
              };
            },
          },
        } as unknown as ConstructorParameters<typeof GeminiAnalyzer>[0]['client'],
        timeoutMs: 2_000,
        afterAnswerMs: 15_000,
      });
      const nowMs = Date.parse('2026-11-30T09:00:00.000Z');
      const clock = { now: () => new Date(nowMs) };
      beforeEach(() => timeouts.splice(0));

      it('until the delivery deadline less what the delivery needs after the answer', async () => {
        await recording.analyze({ ...input, deadline: new Deadline(nowMs + 60_000, clock) });
        expect(timeouts).toEqual([45_000]);
      });

      it('never for less than its own timeout, which a call needs to be started at all', async () => {
        await recording.analyze({ ...input, deadline: new Deadline(nowMs + 10_000, clock) });
        expect(timeouts).toEqual([2_000]);
      });

      it('for its own timeout when there is no delivery deadline', async () => {
        await recording.analyze(input);
        expect(timeouts).toEqual([2_000]);
      });
    });

    it('treats an unreachable Gemini as transient', async () => {
      await fake.stop();
      await expect(analyzer.analyze(input)).rejects.toBeInstanceOf(TransientError);
      fake = await startFakeGemini();
    });
  });
});

describe('INVOICE_PROMPT', () => {
  it.each([
    ['invoice words', ['facture', 'invoice', 'avoir', 'credit note']],
    ['tax words', ['HT', 'TTC', 'TVA', 'net', 'VAT', 'total']],
    ['French company ids', ['SIREN', '9 digits', 'SIRET', '14 digits']],
    ['intra-EU VAT ids', ['FR', '2 key characters', '9-digit SIREN']],
    ['day-first dates to ISO', ['30/11/2026', '2026-11-30', 'YYYY-MM-DD', 'day first']],
    ['both amount formats', ['1 234,56 €', '€1,234.56', '1234.56', 'narrow no-break space', 'comma']],
    ['no guessing', ['null', 'never guess']],
  ])('covers %s', (_topic, words) => {
    for (const word of words) expect(INVOICE_PROMPT).toContain(word);
  });
});
