import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../lib/worker-process';

/**
 * The table of local commands in docs/operations.md against package.json: every command it lists
 * is an npm script that runs a file of local/commands or the worker, and every such script a user
 * runs is listed. Every other script is named below with the reason it is not in that table, so a
 * new script has to be put in one place or the other.
 */
const NOT_LOCAL_COMMANDS: Record<string, string> = {
  typecheck: 'a check of the code (tsc), described in docs/testing.md',
  lint: 'a check of the code (Biome), described in docs/testing.md',
  format: 'rewrites the code (Biome), described in docs/testing.md',
  test: 'the test suites, described in docs/testing.md',
  'test:unit': 'the test suites, described in docs/testing.md',
  'test:policy-pack': 'the test suites, described in docs/testing.md',
  'test:emulators': 'the test suites, described in docs/testing.md',
  'test:reliability': 'the test suites, described in docs/testing.md',
  'test:sim': 'the test suites, described in docs/testing.md',
  'test:engine': 'the test suites, described in docs/testing.md',
  'test:validation': 'the test suites, described in docs/testing.md',
  'test:browser': 'the test suites (the review page in Chromium), described in docs/operations.md',
  sim: 'the fault simulator (replay a seed, the soak, the named scenarios), described in docs/testing.md',
  build: 'compiles the worker for its container image; nobody runs it by hand',
  bench: 'the benchmark, described in bench/README.md',
  eval: 'a measurement of the analyzers against e-invoice XML, described in docs/e-invoices.md',
  settings:
    "writes Pulumi.yaml's config block and docs/configuration.md from the settings table, described there",
  'check:notifications': "checks a deployed bucket's notifications in the cloud, described in docs/deploy.md",
};

const scripts = (
  JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  }
).scripts;

/** The rows between the local-commands markers: the first cell without its backticks, and the script it runs. */
function listedRows(): Array<{ command: string; script: string }> {
  const doc = readFileSync(path.join(REPO_ROOT, 'docs/operations.md'), 'utf8');
  const section =
    doc.split('<!-- local-commands:start -->')[1]?.split('<!-- local-commands:end -->')[0] ?? '';
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => {
      const command = (line.split('|')[1] ?? '').trim().replace(/^`|`$/g, '');
      const script = /^npm (?:start\b|run ([\w:-]+))/.exec(command);
      if (!script)
        throw new Error(`docs/operations.md lists a command that is not an npm script: ${command}`);
      return { command, script: script[1] ?? 'start' };
    });
}

/** The file a script runs through the tsx loader, relative to the repository; undefined for other scripts. */
const fileRunBy = (script: string) => /--import tsx (\S+\.ts)(?:\s|$)/.exec(scripts[script] ?? '')?.[1];

const isLocalCommandFile = (file: string | undefined) =>
  file !== undefined && (file.startsWith('local/commands/') || file.startsWith('worker/src/'));

describe('the local commands table of docs/operations.md', () => {
  const rows = listedRows();
  const listed = new Set(rows.map((r) => r.script));

  it('is found between its markers', () => {
    expect(rows.length).toBeGreaterThan(5);
  });

  it.each(rows)(
    '$command: an npm script that runs a local command or the worker, whose file exists',
    ({ script }) => {
      expect(scripts[script]).toBeDefined();
      const file = fileRunBy(script);
      expect(isLocalCommandFile(file)).toBe(true);
      expect(existsSync(path.join(REPO_ROOT, file!))).toBe(true);
    },
  );

  it('lists every script of package.json that is not named, with its reason, as something else', () => {
    const unlisted = Object.keys(scripts).filter((s) => !listed.has(s) && !(s in NOT_LOCAL_COMMANDS));
    expect(unlisted).toEqual([]);
  });

  it('lists no script it also names as something else, and names only scripts that exist', () => {
    for (const script of Object.keys(NOT_LOCAL_COMMANDS)) {
      expect({ script, listed: listed.has(script), exists: script in scripts }).toEqual({
        script,
        listed: false,
        exists: true,
      });
    }
  });

  it('lists every script that runs a file of local/commands or the worker', () => {
    const running = Object.keys(scripts).filter((s) => isLocalCommandFile(fileRunBy(s)));
    expect(running.filter((s) => !listed.has(s))).toEqual([]);
  });

  it('covers every file of local/commands', () => {
    const run = new Set([...listed].map(fileRunBy));
    const files = readdirSync(path.join(REPO_ROOT, 'local/commands'))
      .filter((f) => f.endsWith('.ts'))
      .map((f) => `local/commands/${f}`);
    expect(files.filter((f) => !run.has(f))).toEqual([]);
  });

  it.each(rows)('$command: shows only flags its command declares', ({ command, script }) => {
    const source = readFileSync(path.join(REPO_ROOT, fileRunBy(script)!), 'utf8');
    const flags = [...command.matchAll(/(?:^|[\s[])--([a-z][a-z-]*)/g)].map((m) => m[1]!);
    const undeclared = flags.filter(
      (flag) => !new RegExp(`(?:'${flag}'|\\b${flag})\\s*:\\s*\\{\\s*type:`).test(source),
    );
    expect(undeclared).toEqual([]);
  });

  it.each(rows)('$command: passes its arguments after a single --', ({ command }) => {
    // npm hands the command everything after the first `--`; a second one ends its options, and
    // the strict parser of the local commands then refuses the flags that follow it.
    expect(command.match(/(?:^|[\s[])--(?=[\s\]]|$)/g)?.length ?? 0).toBeLessThanOrEqual(1);
  });
});
