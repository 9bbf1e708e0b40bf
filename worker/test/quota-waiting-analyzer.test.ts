import { QuotaWaitingAnalyzer, RATE_LIMITED } from '../src/adapters/quota-waiting-analyzer';
import { RejectionError, TransientError } from '../src/core/errors';
import { ScriptedAnalyzer } from './support/fakes';

const input = { bytes: Buffer.from('FACTURE'), contentType: 'text/plain', name: 'f.txt' };
const quotaSpent = () => new TransientError(RATE_LIMITED, 'Gemini: 429 RESOURCE_EXHAUSTED');

describe('QuotaWaitingAnalyzer', () => {
  function setup(maxWaitMs: number) {
    const inner = new ScriptedAnalyzer();
    const waits: number[] = [];
    const analyzer = new QuotaWaitingAnalyzer(inner, {
      maxWaitMs,
      initialDelayMs: 1_000,
      maxDelayMs: 4_000,
      sleep: async (ms) => {
        waits.push(ms);
      },
      random: () => 1,
    });
    return { inner, analyzer, waits };
  }

  it('waits out a spent quota inside the request, backing off, and answers once the analyzer does', async () => {
    const { inner, analyzer, waits } = setup(20_000);
    inner.failNext(quotaSpent(), quotaSpent(), quotaSpent(), quotaSpent());
    await expect(analyzer.analyze(input)).resolves.toMatchObject({ model: 'scripted' });
    expect(waits).toEqual([1_000, 2_000, 4_000, 4_000]);
    expect(inner.calls).toHaveLength(5);
  });

  it('gives the 429 back as a transient failure once the next wait would pass maxWaitMs', async () => {
    const { inner, analyzer, waits } = setup(3_500);
    inner.failNext(quotaSpent(), quotaSpent(), quotaSpent());
    await expect(analyzer.analyze(input)).rejects.toMatchObject({ code: RATE_LIMITED });
    expect(waits).toEqual([1_000, 2_000]);
    expect(inner.calls).toHaveLength(3);
  });

  it('does not wait on any other failure', async () => {
    const { inner, analyzer, waits } = setup(20_000);
    inner.failNext(new TransientError('analyzer_unavailable', 'Gemini: 503'));
    await expect(analyzer.analyze(input)).rejects.toMatchObject({ code: 'analyzer_unavailable' });
    inner.failNext(new RejectionError('analysis_failed', 'Gemini: 400'));
    await expect(analyzer.analyze(input)).rejects.toBeInstanceOf(RejectionError);
    expect(waits).toEqual([]);
  });

  it('keeps the analyzer version, so the memo key is the analyzer’s own', () => {
    expect(setup(0).analyzer.version).toBe(new ScriptedAnalyzer().version);
  });
});
