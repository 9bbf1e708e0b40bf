import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_CONTENT_TYPES, DELIVERY_DEFAULTS } from '../../worker/src/contract/settings';
import { CONFIG_KEYS, parseStackConfig, STACK_DEFAULTS, StackConfigError } from '../config';

/** Problems the parser reports for the given raw `docline:*` values. */
function problemsOf(raw: Record<string, string>, stack = 'dev'): readonly string[] {
  try {
    parseStackConfig('p', stack, raw);
  } catch (error) {
    if (error instanceof StackConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('parseStackConfig', () => {
  it('fills every key from the contract defaults when nothing is set', () => {
    const config = parseStackConfig('p', 'dev', {});

    expect(config.delivery).toEqual(DELIVERY_DEFAULTS);
    expect(config.worker.allowedContentTypes).toEqual(DEFAULT_CONTENT_TYPES);
    expect(config.worker.image).toBeUndefined();
    expect(config.prefix).toBe('docline-dev');
    expect(config.deletionProtection).toBe(true);
  });

  it('parses numbers, booleans and lists the way the CLI passes them', () => {
    const config = parseStackConfig('p', 'dev', {
      ackDeadlineSeconds: '300',
      deletionProtection: 'false',
      allowedContentTypes: '["application/pdf"]',
      notificationChannels: '["projects/p/notificationChannels/1"]',
    });

    expect(config.delivery.ackDeadlineSeconds).toBe(300);
    expect(config.deletionProtection).toBe(false);
    expect(config.worker.allowedContentTypes).toEqual(['application/pdf']);
    expect(config.alerts.notificationChannels).toEqual(['projects/p/notificationChannels/1']);
  });

  it('refuses an ack deadline that is not above the worker timeout plus the margin, naming both keys and the fix', () => {
    const problems = problemsOf({ ackDeadlineSeconds: '95', workerTimeoutSeconds: '90' });

    expect(problems).toEqual([
      expect.stringMatching(
        /^ackDeadlineSeconds \(95\) must be at least workerTimeoutSeconds \(90\) \+ 10s margin: raise/,
      ),
    ]);
  });

  it.each([
    ['4', 'maxDeliveryAttempts must be a whole number from 5 to 100 (got 4).'],
    ['101', 'maxDeliveryAttempts must be a whole number from 5 to 100 (got 101).'],
  ])('refuses maxDeliveryAttempts %s', (value, message) => {
    expect(problemsOf({ maxDeliveryAttempts: value })).toEqual([message]);
  });

  it('refuses a byte cap under 10 MiB', () => {
    expect(problemsOf({ maximumBytesBilled: String(10 * 1024 * 1024 - 1) })).toEqual([
      expect.stringMatching(/^maximumBytesBilled must be at least 10485760 \(10 MiB\)/),
    ]);
  });

  it('refuses an unknown dedup key mode', () => {
    expect(problemsOf({ dedupKeyMode: 'content' })).toEqual([
      'dedupKeyMode must be one of object, message (got content).',
    ]);
  });

  it('lists every problem in one error that says how to set a key', () => {
    const attempt = () =>
      parseStackConfig('p', 'dev', { maxDeliveryAttempts: '200', dedupKeyMode: 'x', concurrency: 'many' });

    expect(attempt).toThrow(StackConfigError);
    expect(attempt).toThrow(/3 problems\); set keys with `pulumi config set docline:<key> <value>`/);
    expect(attempt).toThrow(/maxDeliveryAttempts[\s\S]*dedupKeyMode[\s\S]*concurrency must be a number/);
  });

  it('refuses a missing project, with the command that sets it', () => {
    expect(() => parseStackConfig(undefined, 'dev', {})).toThrow(
      'gcp:project is not set: run `pulumi config set gcp:project YOUR_PROJECT_ID`.',
    );
  });

  it('refuses a stack name too long for the service account ids', () => {
    expect(problemsOf({}, 'production-eu-1')).toEqual([
      expect.stringMatching(/stack name "production-eu-1"/),
    ]);
  });

  it('refuses instance bounds that contradict each other', () => {
    expect(problemsOf({ minInstances: '5', maxInstances: '2' })).toEqual([
      'maxInstances must be a whole number, at least 1 and at least minInstances (5) (got 2).',
    ]);
  });

  it('refuses a list that is not a list of strings', () => {
    expect(problemsOf({ allowedContentTypes: 'application/pdf' })).toEqual([
      expect.stringMatching(/^allowedContentTypes must be a list of strings/),
    ]);
  });
});

describe('Pulumi.yaml', () => {
  const { load } = require('js-yaml') as { load(text: string): unknown };
  type Declaration = { type: string; default: unknown; description: string; items?: { type: string } };
  const project = load(readFileSync(join(__dirname, '..', '..', 'Pulumi.yaml'), 'utf8')) as {
    name: string;
    main: string;
    config: Record<string, Declaration>;
  };

  it('names the project docline and points at the infra program', () => {
    expect(project.name).toBe('docline');
    expect(project.main).toBe('infra/');
  });

  it('declares exactly the keys the program reads, each with a type, a default and a description', () => {
    expect(Object.keys(project.config).sort()).toEqual([...CONFIG_KEYS].sort());
    for (const [key, declaration] of Object.entries(project.config)) {
      expect({ key, type: typeof declaration.type, description: typeof declaration.description }).toEqual({
        key,
        type: 'string',
        description: 'string',
      });
      expect(declaration).toHaveProperty('default');
    }
  });

  it('declares the same defaults as the program uses', () => {
    const declared = Object.fromEntries(
      Object.entries(project.config).map(([key, d]) => [
        key,
        Array.isArray(d.default) ? JSON.stringify(d.default) : String(d.default),
      ]),
    );
    // Parsing the declared defaults as if the CLI had passed them must give the built-in defaults.
    const fromYaml = parseStackConfig('p', 'dev', declared);
    const builtIn = parseStackConfig('p', 'dev', {});

    expect(fromYaml).toEqual(builtIn);
    expect(Number(declared.duplicateRatePerMille)).toBe(STACK_DEFAULTS.duplicateRatePerMille);
    expect(Number(declared.ackDeadlineSeconds)).toBe(DELIVERY_DEFAULTS.ackDeadlineSeconds);
  });

  it('is what the README configuration reference lists, key by key, with the same defaults', () => {
    const readme = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');
    const section =
      readme.split('<!-- stack-config:start -->')[1]?.split('<!-- stack-config:end -->')[0] ?? '';
    const listed = section
      .split('\n')
      .filter((l) => l.startsWith('| `docline:'))
      .map((l) => {
        const [key, , fallback] = l
          .split('|')
          .slice(1, 4)
          .map((c) => c.trim().replaceAll('`', ''));
        return [key!.replace('docline:', ''), fallback];
      });
    const declared = Object.entries(project.config).map(([key, d]) => [
      key,
      Array.isArray(d.default) ? JSON.stringify(d.default) : d.default === '' ? '""' : String(d.default),
    ]);
    expect(listed).toEqual(declared);
  });
});
