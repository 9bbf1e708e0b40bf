/**
 * Runs in each deploy job before `pulumi up`, and refuses the deploy unless:
 *   1. the image is one this pipeline built: its build provenance (attested by the image job with
 *      actions/attest-build-provenance) verifies with `gh attestation verify`, signed by
 *      .github/workflows/deploy.yml of this repository on refs/heads/main, on a GitHub-hosted runner,
 *      for exactly this digest (a rollback digest included);
 *   2. the run does not go backwards: the commit this run deploys descends from the one the stack
 *      last deployed (its `docline:deployed-commit` tag, set after each successful `up`), so an older
 *      run, re-run or delayed, cannot overwrite a newer deploy. Only an explicit rollback (the
 *      workflow's `image` input) may deploy from a commit that does not.
 *
 *   node --import tsx .github/scripts/deploy-guard.ts --stack ORG/docline/dev --image REPO/worker@sha256:… [--rollback]
 *
 * Reads GITHUB_REPOSITORY and GITHUB_SHA; needs gh (GH_TOKEN, attestations: read), the Pulumi CLI
 * and its token, docker credentials for the registry (gh reads the digest there), and the full git
 * history (checkout with fetch-depth: 0).
 */
import { spawnSync } from 'node:child_process';

export const DEPLOYED_COMMIT_TAG = 'docline:deployed-commit';

/** Who must have built the image. */
export interface Builder {
  /** OWNER/REPO. */
  readonly repository: string;
  /** The workflow file that signs, relative to the repository. */
  readonly workflow: string;
  readonly ref: string;
}

export const PIPELINE = (repository: string): Builder => ({
  repository,
  workflow: '.github/workflows/deploy.yml',
  ref: 'refs/heads/main',
});

/** A refused deploy, with the reason the job prints. */
export class GuardError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GuardError';
  }
}

interface Certificate {
  buildSignerURI?: string;
  sourceRepositoryURI?: string;
  sourceRepositoryRef?: string;
  sourceRepositoryDigest?: string;
  runnerEnvironment?: string;
}

interface VerifiedAttestation {
  verificationResult?: {
    signature?: { certificate?: Certificate };
    statement?: { predicateType?: string; subject?: { digest?: Record<string, string> }[] };
  };
}

/**
 * The commit an image was built from, read from `gh attestation verify --format json` (gh has
 * already checked the signatures and the signer's repository and workflow): every attestation must
 * name this digest, the pipeline's workflow on main, a GitHub-hosted runner and the same commit.
 */
export function provenanceCommit(verified: unknown, digest: string, builder: Builder): string {
  if (!Array.isArray(verified) || verified.length === 0) {
    throw new GuardError(`no verified build provenance for ${digest}: this pipeline did not build it`);
  }
  const hex = digest.replace(/^sha256:/, '');
  const signer = `https://github.com/${builder.repository}/${builder.workflow}@${builder.ref}`;
  const commits = new Set<string>();
  for (const entry of verified as VerifiedAttestation[]) {
    const cert = entry.verificationResult?.signature?.certificate ?? {};
    const subjects = entry.verificationResult?.statement?.subject ?? [];
    if (!subjects.some((s) => s.digest?.sha256 === hex)) {
      throw new GuardError(`an attestation does not name ${digest}`);
    }
    if (cert.buildSignerURI !== signer || cert.sourceRepositoryRef !== builder.ref) {
      throw new GuardError(
        `${digest} was built by ${cert.buildSignerURI ?? 'an unknown workflow'} from ${cert.sourceRepositoryRef ?? 'an unknown ref'}, not by ${signer}`,
      );
    }
    if (cert.runnerEnvironment !== 'github-hosted') {
      throw new GuardError(`${digest} was built on a ${cert.runnerEnvironment ?? 'unknown'} runner`);
    }
    if (!/^[0-9a-f]{40}$/.test(cert.sourceRepositoryDigest ?? '')) {
      throw new GuardError(`the provenance of ${digest} names no commit`);
    }
    commits.add(cert.sourceRepositoryDigest!);
  }
  if (commits.size !== 1) throw new GuardError(`the attestations of ${digest} name several commits`);
  return [...commits][0]!;
}

/** Why a deploy from `candidate` would go backwards, or undefined when it may go ahead. */
export function orderProblem(order: {
  readonly deployed: string | undefined;
  readonly candidate: string;
  readonly rollback: boolean;
  /** Whether `deployed` is `candidate` or one of its ancestors; undefined when git does not know it. */
  readonly descends: boolean | undefined;
}): string | undefined {
  if (order.deployed === undefined || order.rollback || order.descends === true) return undefined;
  const why =
    order.descends === undefined
      ? `the stack last deployed ${order.deployed}, a commit this checkout does not have (deployed from outside main?)`
      : `the stack last deployed ${order.deployed}, which is newer than (or not an ancestor of) this run's ${order.candidate}`;
  return `${why}: refusing to go backwards. To deploy an older image on purpose, run the workflow with the image input (rollback).`;
}

/** A command's result, as spawnSync gives it. */
export interface Ran {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}
export type Runner = (command: string, args: readonly string[]) => Ran;

const spawn: Runner = (command, args) => {
  const r = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? String(r.error ?? '') };
};

/** Checks one deploy; returns the lines to print, throws GuardError when it must not go ahead. */
export function guard(
  options: { stack: string; image: string; rollback: boolean; repository: string; sha: string },
  run: Runner = spawn,
): string[] {
  const digest = /@(sha256:[0-9a-f]{64})$/.exec(options.image)?.[1];
  if (digest === undefined) throw new GuardError(`${options.image} is not an image reference by digest`);
  const builder = PIPELINE(options.repository);
  const verify = run('gh', [
    'attestation',
    'verify',
    `oci://${options.image}`,
    '--repo',
    options.repository,
    '--signer-workflow',
    `${options.repository}/${builder.workflow}`,
    '--deny-self-hosted-runners',
    '--format',
    'json',
  ]);
  if (verify.status !== 0) {
    throw new GuardError(
      `the build provenance of ${digest} does not verify (${verify.stderr.trim() || verify.stdout.trim()}): this pipeline did not build it`,
    );
  }
  const built = provenanceCommit(JSON.parse(verify.stdout), digest, builder);
  const tag = run('pulumi', ['stack', 'tag', 'get', DEPLOYED_COMMIT_TAG, '--stack', options.stack]);
  const deployed = tag.status === 0 && tag.stdout.trim() !== '' ? tag.stdout.trim() : undefined;
  let descends: boolean | undefined;
  if (deployed !== undefined) {
    const ancestry = run('git', ['merge-base', '--is-ancestor', deployed, options.sha]);
    descends = ancestry.status === 0 ? true : ancestry.status === 1 ? false : undefined;
  }
  const problem = orderProblem({ deployed, candidate: options.sha, rollback: options.rollback, descends });
  if (problem !== undefined) throw new GuardError(problem);
  return [
    `${digest} was built by ${builder.workflow} on ${builder.ref} from ${built}`,
    deployed === undefined
      ? `${options.stack} has no deployed commit yet: first deploy from CI`
      : options.rollback && descends !== true
        ? `rollback: ${options.stack} goes back from ${deployed} on purpose`
        : `${options.sha} descends from ${deployed}, the commit ${options.stack} runs`,
  ];
}

function main(argv: readonly string[]): number {
  const arg = (name: string) => {
    const i = argv.indexOf(name);
    return i === -1 ? undefined : argv[i + 1];
  };
  const stack = arg('--stack');
  const image = arg('--image');
  const repository = process.env.GITHUB_REPOSITORY;
  const sha = process.env.GITHUB_SHA;
  if (stack === undefined || image === undefined || repository === undefined || sha === undefined) {
    process.stderr.write(
      'usage: deploy-guard.ts --stack STACK --image REF@sha256:… [--rollback] (GITHUB_REPOSITORY, GITHUB_SHA set)\n',
    );
    return 2;
  }
  try {
    for (const line of guard({ stack, image, rollback: argv.includes('--rollback'), repository, sha })) {
      process.stdout.write(`${line}\n`);
    }
    return 0;
  } catch (e) {
    if (!(e instanceof GuardError)) throw e;
    process.stdout.write(`::error title=deploy refused::${e.message}\n`);
    return 1;
  }
}

if (require.main === module) process.exitCode = main(process.argv.slice(2));
