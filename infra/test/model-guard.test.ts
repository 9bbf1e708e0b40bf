/**
 * The stack's preview checks docline:geminiModel against the dated table of known models
 * (worker/src/contract/models.ts): it refuses a retired model and warns before one retires, read
 * from what the program does under Pulumi's mocks.
 */
import * as pulumi from '@pulumi/pulumi';
import { StackConfigError } from '../config';
import { failure, REGISTERED_BEFORE_FAILURE, runStack } from './harness';

/** Only `Date` is faked: the Pulumi runtime's timers keep running. */
function runOn(date: string): void {
  jest.useFakeTimers({
    now: new Date(`${date}T09:00:00Z`),
    doNotFake: [
      'hrtime',
      'nextTick',
      'performance',
      'queueMicrotask',
      'requestAnimationFrame',
      'cancelAnimationFrame',
      'requestIdleCallback',
      'cancelIdleCallback',
      'setImmediate',
      'clearImmediate',
      'setInterval',
      'clearInterval',
      'setTimeout',
      'clearTimeout',
    ],
  });
}

describe('docline:geminiModel at preview', () => {
  let warn: jest.SpyInstance;
  beforeEach(() => {
    warn = jest.spyOn(pulumi.log, 'warn').mockImplementation(async () => undefined);
  });
  afterEach(() => {
    warn.mockRestore();
    jest.useRealTimers();
  });
  const warnings = () => warn.mock.calls.map(([message]) => String(message));

  it('refuses a retired model before anything is declared, naming the key, the date and the replacement', async () => {
    runOn('2026-12-03');
    const error = await failure(
      runStack('dev', { 'docline:geminiModel': 'gemini-2.5-flash' }, { preview: true }),
    );
    expect(error).toBeInstanceOf(StackConfigError);
    expect(error.message).toMatch(/docline:geminiModel \(gemini-2\.5-flash\) was retired on 2026-06-17/);
    expect(error.message).toContain('Set docline:geminiModel to gemini-3.5-flash-lite');
    expect(error[REGISTERED_BEFORE_FAILURE]).toEqual([]);
  });

  it('warns, and still previews, when the model retires within 60 days of the run', async () => {
    runOn('2027-06-15');
    const run = await runStack('dev', { 'docline:geminiModel': 'gemini-3.5-flash-lite' }, { preview: true });
    expect(run.resources.length).toBeGreaterThan(0);
    expect(warnings()).toEqual([
      expect.stringMatching(
        /^docline:geminiModel \(gemini-3\.5-flash-lite\) retires on 2027-07-21 or later, in 36 days/,
      ),
    ]);
  });

  it('says so when the model is not in the table, and previews', async () => {
    runOn('2026-12-03');
    await runStack('dev', { 'docline:geminiModel': 'gemini-3.5-flash-lite-preview-09' }, { preview: true });
    expect(warnings()).toEqual([expect.stringMatching(/is not in docline's table of known models/)]);
  });

  it('previews the default model on the day the table was read without a word', async () => {
    runOn('2026-12-03');
    await runStack('dev', {}, { preview: true });
    expect(warnings().filter((w) => w.includes('geminiModel'))).toEqual([]);
  });
});

describe('the Gemini capacity a volume needs, at preview', () => {
  let info: jest.SpyInstance;
  beforeEach(() => {
    info = jest.spyOn(pulumi.log, 'info').mockImplementation(async () => undefined);
  });
  afterEach(() => info.mockRestore());
  const notes = () =>
    info.mock.calls.map(([message]) => String(message)).filter((m) => m.startsWith('Gemini at'));

  it.each([
    ['1000', /on the Gemini API it needs Tier 1 /],
    ['10000', /on the Gemini API it needs Tier 2 /],
    ['1000000', /on the Gemini API no published tier carries it/],
  ])(
    'says which Gemini API tier documentsPerDay %s needs, and that Vertex AI shares its capacity',
    async (volume, tier) => {
      await runStack('dev', { 'docline:documentsPerDay': volume }, { preview: true });
      expect(notes()).toEqual([expect.stringMatching(tier)]);
      expect(notes()[0]).toContain('On Vertex AI (this stack) it runs on shared capacity');
    },
  );
});
