import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findValidator } from '../../src/adapters/e-invoice/validation/saxon-runner';
import { loadConfig } from '../../src/config';
import { type Adapters, buildAdapters } from '../../src/main';
import { fixture, validated } from '../support/e-invoices';
import { MemoryLogger } from '../support/fakes';

/**
 * The validator as the worker image runs it: the runtime stage's ENV of worker/Dockerfile as it is
 * written (NODE_ENV=production, EN16931_VALIDATOR), the installed folder copied to the path that ENV
 * names (under a scratch root standing for the image's `/`, as its COPY does), the cloud's settings
 * (BigQuery, Cloud Storage, Gemini: so no picture comparison), and the production composition root
 * (buildAdapters). The repository's .tools/en16931 must not be what runs: the test finds the runner
 * process and checks its folder. It also measures that process's memory, with the EN 16931 CII and
 * UBL stylesheets compiled, against what docs/e-invoices.md says.
 */

const REPO_ROOT = path.join(__dirname, '..', '..', '..');

/** The lines of one stage of worker/Dockerfile (the last one when unnamed), continuations joined. */
function stageLines(name?: string): string[] {
  const text = readFileSync(path.join(REPO_ROOT, 'worker/Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
  const lines = text.split('\n').map((l) => l.trim());
  const from = name
    ? lines.findIndex((l) => /^FROM\s/i.test(l) && l.endsWith(` AS ${name}`))
    : lines.findLastIndex((l) => /^FROM\s/i.test(l));
  const next = lines.findIndex((l, i) => i > from && /^FROM\s/i.test(l));
  return lines.slice(from + 1, next === -1 ? undefined : next).filter((l) => l && !l.startsWith('#'));
}

/** KEY=VALUE pairs of the ENV lines of the Dockerfile's last stage (the runtime). */
function runtimeEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of stageLines().filter((l) => /^ENV\s/i.test(l)))
    for (const pair of line.replace(/^ENV\s+/i, '').split(/\s+/)) {
      const [key = '', ...value] = pair.split('=');
      env[key] = value.join('=');
    }
  return env;
}

/** The budget docs/e-invoices.md gives the runner's resident memory (heap cap 256 MiB + the rest). */
const RSS_BUDGET_MIB = 512;

const installed = findValidator();
if (!installed) throw new Error('the validator is not installed: run `bash scripts/install-en16931.sh`');

const env = runtimeEnv();
const imageRoot = mkdtempSync(path.join(os.tmpdir(), 'docline-image-'));
let adapters: Adapters;

/** The runner processes this test started: their command line names the image's copy of the folder. */
function runnerProcesses(): Array<{ pid: number; args: string[] }> {
  const found = [];
  for (const entry of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    let args: string[];
    try {
      args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    if (args.includes('Validate') && args.some((a) => a.startsWith(imageRoot)))
      found.push({ pid: Number(entry), args });
  }
  return found;
}

const kib = (pid: number, field: 'VmRSS' | 'VmHWM') =>
  Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);

beforeAll(async () => {
  // COPY --from=validator … EN16931_VALIDATOR: the same folder, at the path the ENV names.
  cpSync(installed.dir, path.join(imageRoot, env.EN16931_VALIDATOR!), { recursive: true });
  const config = loadConfig({
    ...env,
    EN16931_VALIDATOR: path.join(imageRoot, env.EN16931_VALIDATOR!),
    DOCLINE_DATA_DIR: path.join(imageRoot, 'data'),
    BIGQUERY_TABLE: 'acme-dev.docline.rows',
    DOCLINE_READER: 'gcs',
    GEMINI_API_KEY: 'test-key',
    MEMO_BUCKET: 'acme-dev-docline-memo',
  });
  adapters = await buildAdapters(config, new MemoryLogger());
});

afterAll(async () => {
  // The runner is the worker's child, and the worker never closes it (it ends with the worker).
  for (const { pid } of runnerProcesses()) process.kill(pid, 'SIGKILL');
  await adapters?.store.close?.();
  rmSync(imageRoot, { recursive: true, force: true });
});

const read = async (folder: 'cii' | 'ubl', file: string) =>
  (await validated(adapters.eInvoices!, fixture(folder, file))).v;

describe('the validator as the worker image runs it', () => {
  it('is set up by the runtime ENV: production, and a folder of its own outside the repository', () => {
    expect(env).toMatchObject({ NODE_ENV: 'production' });
    expect(env.EN16931_VALIDATOR).toMatch(/^\//);
    expect(path.resolve(env.EN16931_VALIDATOR!)).not.toBe(path.resolve('/app', '.tools/en16931'));
  });

  it('gives real verdicts on the shared fixtures: valid and invalid CII and UBL', async () => {
    const verdicts = [
      await read('cii', 'EN16931_Einfach.cii.xml'),
      await read('cii', 'EN16931_ElektronischeAdresse.cii.xml'),
      await read('ubl', 'EN16931_Einfach.ubl.xml'),
      await read('ubl', 'EN16931_ElektronischeAdresse.ubl.xml'),
      await read('cii', 'EN16931_Rabatte.cii.xml'),
      await read('ubl', 'EN16931_Rabatte.ubl.xml'),
    ];
    expect(verdicts.map((v) => [v.syntax, v.verdict, v.failed])).toEqual([
      ['cii', 'valid', []],
      ['cii', 'invalid', ['BR-CL-25']],
      ['ubl', 'valid', []],
      ['ubl', 'invalid', ['BR-CL-25']],
      ['cii', 'valid', []],
      ['ubl', 'valid', []],
    ]);
    // The cloud's analyzer is Gemini: the picture is never compared there.
    expect(verdicts.every((v) => v.picture === undefined)).toBe(true);
  });

  it("runs the image's copy of the runner, with the heap capped, in the memory the docs give it", () => {
    const runners = runnerProcesses();
    expect(runners).toHaveLength(1);
    const { pid, args } = runners[0]!;
    expect(args).toContain(path.join(imageRoot, env.EN16931_VALIDATOR!, 'artefacts'));
    expect(args.some((a) => a.includes(installed.dir))).toBe(false);
    expect(args).toContain('-Xmx256m');
    const rss = kib(pid, 'VmRSS');
    const peak = kib(pid, 'VmHWM');
    process.stdout.write(
      `validator runner with the EN 16931 CII and UBL stylesheets compiled: RSS ${Math.round(rss / 1024)} MiB, peak ${Math.round(peak / 1024)} MiB\n`,
    );
    expect(peak / 1024).toBeLessThan(RSS_BUDGET_MIB);
  });
});

describe("the image's validator stage", () => {
  it('installs the same validator from only what it copies: the install script and Validate.java', () => {
    // The stage's WORKDIR laid out under a scratch root with exactly its COPY lines, then its RUN.
    const lines = stageLines('validator');
    const stageRoot = mkdtempSync(path.join(os.tmpdir(), 'docline-validator-stage-'));
    try {
      let workdir = '/';
      let ran = false;
      for (const line of lines) {
        const [op = '', ...words] = line.split(/\s+/);
        if (op === 'WORKDIR') workdir = path.posix.resolve(workdir, words[0]!);
        if (op === 'COPY') {
          const dest = path.join(stageRoot, path.posix.resolve(workdir, words.at(-1)!));
          mkdirSync(dest, { recursive: true });
          for (const source of words.slice(0, -1))
            cpSync(path.join(REPO_ROOT, source), path.join(dest, path.basename(source)));
        }
        if (op === 'RUN' && line.includes('install-en16931.sh')) {
          const script = /bash (\S+)/.exec(line)![1]!;
          execFileSync('bash', [script], {
            cwd: path.join(stageRoot, workdir),
            env: { ...process.env, EN16931_FORCE: '1' },
            stdio: 'pipe',
          });
          ran = true;
        }
      }
      expect(ran).toBe(true);
      // What the runtime copies (COPY --from=validator SOURCE): the same artefacts, byte for byte.
      const copy = stageLines()
        .find((l) => l.startsWith('COPY --from=validator '))!
        .split(/\s+/)[2]!;
      const built = findValidator(path.join(stageRoot, copy));
      expect(built?.manifest.artefacts).toEqual(installed.manifest.artefacts);
      expect(built?.manifest.classpath).toEqual(installed.manifest.classpath);
    } finally {
      rmSync(stageRoot, { recursive: true, force: true });
    }
  }, 300_000);
});
