/**
 * The scripts the workflows run at their trust boundaries, run for real on small fixtures: the
 * base branch's pack checked untouched (.github/scripts/check-policy-base.sh), a stack that must
 * exist before CI deploys it (.github/scripts/check-stack.sh), and the deploy guard that refuses an
 * image this pipeline did not build or a run older than what the stack runs
 * (.github/scripts/deploy-guard.ts).
 */
import { type SpawnSyncReturns, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  GuardError,
  guard,
  orderProblem,
  PIPELINE,
  provenanceCommit,
  type Runner,
} from '../../.github/scripts/deploy-guard';

const ROOT = join(__dirname, '..', '..');
const SCRIPTS = join(ROOT, '.github', 'scripts');
const temps: string[] = [];
const temp = () => {
  const dir = mkdtempSync(join(tmpdir(), 'delivery-'));
  temps.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

const git = (cwd: string, ...args: string[]) => {
  const r = spawnSync(
    'git',
    ['-c', 'user.name=t', '-c', 'user.email=t@example.invalid', '-c', 'commit.gpgsign=false', ...args],
    {
      cwd,
      encoding: 'utf8',
      env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
    },
  );
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
};
const write = (path: string, text: string) => {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, text);
};
const bash = (
  script: string,
  args: string[],
  env: Record<string, string>,
  cwd = ROOT,
): SpawnSyncReturns<string> =>
  spawnSync('bash', [join(SCRIPTS, script), ...args], {
    cwd,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
  });

describe('.github/scripts/check-policy-base.sh', () => {
  /** A base checkout: a commit with the pack, and its installed @pulumi/policy (ignored by git). */
  const baseCheckout = () => {
    const dir = temp();
    git(dir, 'init', '-q');
    write(join(dir, '.gitignore'), 'node_modules/\n');
    write(join(dir, 'policies', 'index.ts'), 'export {};\n');
    git(dir, 'add', '.');
    git(dir, 'commit', '-qm', 'base');
    write(
      join(dir, 'node_modules', '@pulumi', 'policy', 'package.json'),
      '{"name":"@pulumi/policy","main":"index.js"}',
    );
    write(join(dir, 'node_modules', '@pulumi', 'policy', 'index.js'), 'module.exports = {};\n');
    return { dir, sha: git(dir, 'rev-parse', 'HEAD') };
  };
  const record = (dir: string, sha: string) =>
    bash('check-policy-base.sh', ['record', dir], { BASE_SHA: sha });

  it('records a fingerprint of the untouched base, and verifies it after the preview', () => {
    const { dir, sha } = baseCheckout();
    const recorded = record(dir, sha);
    expect(recorded.stderr).toBe('');
    expect(recorded.status).toBe(0);
    const fingerprint = /^fingerprint=([0-9a-f]{64})$/.exec(recorded.stdout.trim())![1]!;
    expect(bash('check-policy-base.sh', ['verify', dir], { EXPECTED: fingerprint }).status).toBe(0);
  });

  it('fails when the pack or its packages changed during the preview', () => {
    const { dir, sha } = baseCheckout();
    const fingerprint = record(dir, sha).stdout.trim().replace('fingerprint=', '');
    write(
      join(dir, 'node_modules', '@pulumi', 'policy', 'index.js'),
      'module.exports = { weakened: true };\n',
    );
    const verified = bash('check-policy-base.sh', ['verify', dir], { EXPECTED: fingerprint });
    expect(verified.status).toBe(1);
    expect(verified.stdout).toMatch(/changed during the preview/);
  });

  it('refuses a base that is not the base commit, has a changed or added file, or a shadowed @pulumi/policy', () => {
    const wrong = baseCheckout();
    expect(record(wrong.dir, 'f'.repeat(40)).stdout).toMatch(/not the base commit/);
    const changed = baseCheckout();
    write(join(changed.dir, 'policies', 'index.ts'), 'export const weakened = true;\n');
    expect(record(changed.dir, changed.sha).stdout).toMatch(/differs from the base commit/);
    const shadowed = baseCheckout();
    write(
      join(shadowed.dir, 'policies', 'node_modules', '@pulumi', 'policy', 'package.json'),
      '{"main":"index.js"}',
    );
    write(
      join(shadowed.dir, 'policies', 'node_modules', '@pulumi', 'policy', 'index.js'),
      'module.exports = {};\n',
    );
    write(join(shadowed.dir, '.gitignore'), 'node_modules/\n');
    const result = record(shadowed.dir, shadowed.sha);
    expect(result.status).toBe(1);
    expect(result.stdout).toMatch(/@pulumi\/policy resolves to .*policies\/node_modules.*, outside/);
  });
});

describe('.github/scripts/check-stack.sh', () => {
  /** A working directory with a stack file, and a `pulumi` on PATH that knows the stack or not. */
  const setup = (project: string, stackExists: boolean) => {
    const dir = temp();
    write(
      join(dir, 'Pulumi.dev.yaml'),
      `config:\n  gcp:project: ${project}\n  docline:region: europe-west1\n`,
    );
    const bin = join(dir, 'bin');
    write(
      join(bin, 'pulumi'),
      stackExists
        ? '#!/bin/sh\necho "{}"\n'
        : '#!/bin/sh\necho "error: no stack named \'acme/docline/dev\' found" >&2\nexit 255\n',
    );
    chmodSync(join(bin, 'pulumi'), 0o755);
    return bash('check-stack.sh', ['dev', 'acme/docline/dev'], { PATH: `${bin}:${process.env.PATH}` }, dir);
  };

  it('passes when the stack exists and its file names a real project', () => {
    const result = setup('docline-dev-1234', true);
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(
      /stack acme\/docline\/dev exists; Pulumi\.dev\.yaml deploys project docline-dev-1234/,
    );
  });

  it('fails, naming the one-time step, on a placeholder project or a stack that does not exist', () => {
    const placeholder = setup('docline-dev-example', true);
    expect(placeholder.status).toBe(1);
    expect(placeholder.stdout).toMatch(/gcp:project to 'docline-dev-example', a placeholder/);
    const missing = setup('docline-dev-1234', false);
    expect(missing.status).toBe(1);
    expect(missing.stdout).toMatch(/does not exist: run 'pulumi stack init acme\/docline\/dev' once/);
  });
});

describe('.github/scripts/deploy-guard.ts', () => {
  const repository = 'acme/docline';
  const digest = `sha256:${'b'.repeat(64)}`;
  const image = `europe-west1-docker.pkg.dev/p/docline-images/worker@${digest}`;
  const builtAt = 'c'.repeat(40);
  const attestation = (over: Record<string, string> = {}, subject = 'b'.repeat(64)) => ({
    verificationResult: {
      signature: {
        certificate: {
          buildSignerURI: `https://github.com/${repository}/.github/workflows/deploy.yml@refs/heads/main`,
          sourceRepositoryURI: `https://github.com/${repository}`,
          sourceRepositoryRef: 'refs/heads/main',
          sourceRepositoryDigest: builtAt,
          runnerEnvironment: 'github-hosted',
          ...over,
        },
      },
      statement: {
        predicateType: 'https://slsa.dev/provenance/v1',
        subject: [{ digest: { sha256: subject } }],
      },
    },
  });

  describe('provenanceCommit', () => {
    it('reads the commit of an image the pipeline built on main', () => {
      expect(provenanceCommit([attestation()], digest, PIPELINE(repository))).toBe(builtAt);
    });

    it.each([
      ['no attestation', [], /this pipeline did not build it/],
      [
        'another workflow',
        [
          attestation({
            buildSignerURI: `https://github.com/${repository}/.github/workflows/x.yml@refs/heads/main`,
          }),
        ],
        /not by https/,
      ],
      [
        'a branch',
        [
          attestation({
            sourceRepositoryRef: 'refs/heads/feature',
            buildSignerURI: `https://github.com/${repository}/.github/workflows/deploy.yml@refs/heads/feature`,
          }),
        ],
        /from refs\/heads\/feature/,
      ],
      ['a self-hosted runner', [attestation({ runnerEnvironment: 'self-hosted' })], /self-hosted runner/],
      ['another digest', [attestation({}, 'd'.repeat(64))], /does not name/],
    ])('refuses an image with %s', (_case, verified, message) => {
      expect(() => provenanceCommit(verified, digest, PIPELINE(repository))).toThrow(message);
    });
  });

  describe('orderProblem', () => {
    it('lets a first deploy, a descendant and an explicit rollback through', () => {
      for (const through of [
        { deployed: undefined, candidate: 'a', rollback: false, descends: undefined },
        { deployed: 'a', candidate: 'b', rollback: false, descends: true },
        { deployed: 'b', candidate: 'a', rollback: true, descends: false },
      ]) {
        expect(orderProblem(through)).toBeUndefined();
      }
    });

    it('refuses a run older than, or unrelated to, what the stack runs', () => {
      expect(orderProblem({ deployed: 'b', candidate: 'a', rollback: false, descends: false })).toMatch(
        /refusing to go backwards.*image input \(rollback\)/,
      );
      expect(orderProblem({ deployed: 'z', candidate: 'a', rollback: false, descends: undefined })).toMatch(
        /a commit this checkout does not have/,
      );
    });
  });

  describe('guard, on a real history', () => {
    /** main: older -> newer; the stack runs `deployed`; gh and pulumi answer as given. */
    const world = (deployedIs: 'older' | 'newer' | 'none', verified: unknown = [attestation()]) => {
      const dir = temp();
      git(dir, 'init', '-q');
      git(dir, 'commit', '-q', '--allow-empty', '-m', 'older');
      const older = git(dir, 'rev-parse', 'HEAD');
      git(dir, 'commit', '-q', '--allow-empty', '-m', 'newer');
      const newer = git(dir, 'rev-parse', 'HEAD');
      const deployed = deployedIs === 'none' ? undefined : deployedIs === 'older' ? older : newer;
      const calls: string[] = [];
      const run: Runner = (command, args) => {
        calls.push(`${command} ${args.join(' ')}`);
        if (command === 'gh') return { status: 0, stdout: JSON.stringify(verified), stderr: '' };
        if (command === 'pulumi') {
          return deployed === undefined
            ? { status: 255, stdout: '', stderr: 'error: stack tag not found' }
            : { status: 0, stdout: `${deployed}\n`, stderr: '' };
        }
        const r = spawnSync(command, args, { cwd: dir, encoding: 'utf8' });
        return { status: r.status, stdout: r.stdout, stderr: r.stderr };
      };
      return { older, newer, run, calls };
    };

    it('verifies the digest as the pipeline\u2019s, then lets a newer run deploy', () => {
      const w = world('older');
      const lines = guard(
        { stack: 'acme/docline/prod', image, rollback: false, repository, sha: w.newer },
        w.run,
      );
      expect(lines).toEqual([
        `${digest} was built by .github/workflows/deploy.yml on refs/heads/main from ${builtAt}`,
        `${w.newer} descends from ${w.older}, the commit acme/docline/prod runs`,
      ]);
      expect(w.calls[0]).toBe(
        `gh attestation verify oci://${image} --repo ${repository} --signer-workflow ${repository}/.github/workflows/deploy.yml --deny-self-hosted-runners --format json`,
      );
    });

    it('refuses an older run after a newer deploy, unless it is a rollback', () => {
      const w = world('newer');
      const options = { stack: 'acme/docline/prod', image, repository, sha: w.older };
      expect(() => guard({ ...options, rollback: false }, w.run)).toThrow(GuardError);
      expect(() => guard({ ...options, rollback: false }, w.run)).toThrow(/refusing to go backwards/);
      expect(guard({ ...options, rollback: true }, w.run)[1]).toBe(
        `rollback: acme/docline/prod goes back from ${w.newer} on purpose`,
      );
    });

    it('refuses a rollback digest this pipeline did not build', () => {
      const w = world('newer', []);
      expect(() =>
        guard({ stack: 'acme/docline/prod', image, rollback: true, repository, sha: w.older }, w.run),
      ).toThrow(/this pipeline did not build it/);
    });

    it('lets the first deploy from CI through', () => {
      const w = world('none');
      expect(
        guard({ stack: 'acme/docline/dev', image, rollback: false, repository, sha: w.older }, w.run)[1],
      ).toBe('acme/docline/dev has no deployed commit yet: first deploy from CI');
    });
  });
});
