import path from 'node:path';
import { parseCommandArgs, USAGE_EXIT_CODE, UsageError } from '../lib/args';
import { REPO_ROOT } from '../lib/worker-process';
import { runLocalCommand } from './support/command';

/** A data folder that holds no pipeline: a command that got past its arguments fails with 1. */
const NO_PIPELINE = path.join(REPO_ROOT, '.no-such-dir');

describe('parseCommandArgs', () => {
  const options = { copies: { type: 'string' }, json: { type: 'boolean' } } as const;

  it('returns typed values for known flags', () => {
    expect(parseCommandArgs(['--copies', '2', '--json'], options, 'usage: x').values).toEqual({
      copies: '2',
      json: true,
    });
  });

  it('refuses an unknown flag with the usage', () => {
    expect(() => parseCommandArgs(['--copise', '2'], options, 'usage: x')).toThrow(
      expect.objectContaining({ code: 'usage', message: "Unknown option '--copise'. usage: x" }),
    );
  });

  it('refuses a value after a boolean flag instead of swallowing it', () => {
    expect(() => parseCommandArgs(['--json', 'yes'], options, 'usage: x')).toThrow(
      expect.objectContaining({ code: 'usage', message: "Unexpected argument 'yes'. usage: x" }),
    );
  });

  it('refuses a string flag without its value', () => {
    expect(() => parseCommandArgs(['--copies'], options, 'usage: x')).toThrow(UsageError);
  });
});

describe('the local commands refuse a command line they cannot take', () => {
  it.each([
    ['start.ts', ['--double-notifications', 'x'], /^docline: Unexpected argument 'x'\. usage: npm start /],
    ['start.ts', ['--dedup-key', 'moon'], /^docline: --dedup-key must be one of object, message\. usage:/],
    ['upload.ts', ['a.txt', '--copise', '2'], /^upload: Unknown option '--copise'\. usage: npm run upload /],
    ['rows.ts', ['--json', 'yes'], /^rows: Unexpected argument 'yes'\. usage: npm run rows /],
    ['dlq.ts', ['list', 'everything'], /^dlq: Unexpected argument 'everything'\. usage: npm run dlq /],
    [
      'e2e.ts',
      ['--target', 'moon'],
      /^e2e: --target must be local or cloud \(got moon\)\. usage: npm run e2e /,
    ],
  ])(
    '%s %j: exit 2 and a clear message',
    async (script, args, message) => {
      const result = await runLocalCommand(script, args, NO_PIPELINE);
      expect(result.code).toBe(USAGE_EXIT_CODE);
      expect(result.stderr.trim()).toMatch(message);
    },
    30_000,
  );

  it('still answers a known command line with the command’s own outcome (no pipeline: exit 1)', async () => {
    const result = await runLocalCommand('dlq.ts', ['list'], NO_PIPELINE);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^dlq: no running pipeline found/);
  }, 30_000);
});
