import { ApiError } from '@google/genai';
import { VirtualTime } from '../../sim/faults/virtual-time';
import {
  GeminiPortModel,
  SharedCapacity,
  sweepLatencies,
  TierQuota,
  windowFullBody,
} from '../../sim/models/gemini';
import { GEMINI_LATENCIES } from '../../sim/models/latency';
import { geminiError } from '../../worker/src/adapters/analyzers/gemini-analyzer';
import { isRateLimited, type TransientError } from '../../worker/src/core/errors';
import type { AnalyzerInput } from '../../worker/src/core/ports';

/**
 * A 429 that names its wait (the Gemini API's `google.rpc.RetryInfo`, sent when a window of the
 * project's tier is full) and one that does not (Vertex AI's shared capacity): the adapter reads
 * the wait from the SDK's error, and the sweep's models answer each the way its API does.
 */
describe("a 429's named wait (RetryInfo)", () => {
  it("is read from the SDK's ApiError: whole seconds of retryDelay, JSON or JSON quoted in a string", () => {
    const named = geminiError(new ApiError({ message: windowFullBody(58_934), status: 429 }));
    expect(isRateLimited(named)).toBe(true);
    expect((named as TransientError).retryAfterMs).toBe(58_000);
    const quoted = JSON.stringify({
      error: { message: JSON.stringify(JSON.parse(windowFullBody(1_500)), null, 2) },
    });
    expect((geminiError(new ApiError({ message: quoted, status: 429 })) as TransientError).retryAfterMs).toBe(
      1_000,
    );
    const vertex = JSON.stringify({
      error: {
        code: 429,
        message: 'Resource exhausted, please try again later.',
        status: 'RESOURCE_EXHAUSTED',
      },
    });
    const unnamed = geminiError(new ApiError({ message: vertex, status: 429 }));
    expect(isRateLimited(unnamed)).toBe(true);
    expect((unnamed as TransientError).retryAfterMs).toBeUndefined();
  });

  async function refusal(gemini: GeminiPortModel, time: VirtualTime): Promise<TransientError> {
    const analyzer = gemini.analyzer();
    const input = (name: string): AnalyzerInput => ({
      name,
      bytes: Buffer.from('x'),
      contentType: 'application/pdf',
    });
    // Both at the same moment: the first takes the quota's place, the second is refused.
    void analyzer.analyze(input('a'));
    let error: unknown;
    void analyzer.analyze(input('b')).catch((e: unknown) => {
      error = e;
    });
    await time.run(() => error !== undefined, 600_000);
    return error as TransientError;
  }

  it("names the wait until the tier's window frees, in whole seconds; the shared capacity names none", async () => {
    const time = new VirtualTime();
    const tier = new GeminiPortModel(
      time,
      new TierQuota(time, { requestsPerMinute: 1, tokensPerMinute: 1e9 }),
      sweepLatencies(GEMINI_LATENCIES.fast, 1),
    );
    const named = await refusal(tier, time);
    expect(isRateLimited(named)).toBe(true);
    // Both calls at the same moment: the first holds the one place of the 60 s window until then.
    expect(named.retryAfterMs).toBe(60_000);

    const shared = new VirtualTime();
    const vertex = new GeminiPortModel(
      shared,
      new SharedCapacity(shared, { requestsPerMinute: 1, seed: 1, horizonMs: 0 }),
      sweepLatencies(GEMINI_LATENCIES.fast, 1),
    );
    const unnamed = await refusal(vertex, shared);
    expect(isRateLimited(unnamed)).toBe(true);
    expect(unnamed.retryAfterMs).toBeUndefined();
  });
});
