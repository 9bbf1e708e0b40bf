/**
 * What a security review checks in the GitHub workflows, as pure rules over their parsed YAML (and
 * raw text, for the version comments of pinned actions). Each rule returns the problems it finds;
 * infra/test/workflows.test.ts runs them on the real files and on copies with one thing broken, so
 * every rule is shown to catch what it is for.
 */
import { holds } from '../identity/expression';

/** One step of a job. */
export interface Step {
  id?: string;
  if?: string;
  run?: string;
  uses?: string;
  with?: Record<string, unknown>;
  env?: Record<string, unknown>;
}

/** One job of a workflow. */
export interface Job {
  if?: string;
  needs?: string | string[];
  environment?: string | { name: string };
  permissions?: Record<string, string> | string;
  concurrency?: string | { group: string; 'cancel-in-progress'?: boolean | string };
  env?: Record<string, unknown>;
  steps: Step[];
}

/** A parsed workflow file. */
export interface Workflow {
  on: Record<string, unknown>;
  concurrency?: unknown;
  jobs: Record<string, Job>;
}

/** A workflow as the rules read it: its file name, parsed form and text. */
export interface WorkflowFile {
  readonly file: string;
  readonly workflow: Workflow;
  readonly text: string;
}

/** The environments whose identities may change a stack. */
export const DEPLOY_ENVIRONMENTS = ['dev', 'prod', 'image'] as const;

/** A GitHub expression, `${{ inner }}`, written without a template-like string literal. */
export const gh = (inner: string): string => `\${{ ${inner} }}`;

const FULL_SHA = /^[A-Za-z0-9_.-]+\/[A-Za-z0-9_./-]+@[0-9a-f]{40}$/;
const EXACT_VERSION = /^\d+\.\d+\.\d+$/;

const stepsOf = (wf: WorkflowFile) =>
  Object.entries(wf.workflow.jobs).flatMap(([job, j]) => j.steps.map((step) => ({ job, step })));
const isPulumi = (s: Step) => s.uses?.startsWith('pulumi/actions@') === true;
/** A pulumi/actions step that runs a command (without one it only installs the CLI). */
const isPulumiCommand = (s: Step) => isPulumi(s) && s.with?.command !== undefined;
const envName = (j: Job) => (typeof j.environment === 'string' ? j.environment : j.environment?.name);
const needsOf = (j: Job) => (j.needs === undefined ? [] : Array.isArray(j.needs) ? j.needs : [j.needs]);
const onPullRequests = (files: readonly WorkflowFile[]) =>
  files.filter((f) => 'pull_request' in f.workflow.on);

/** What `check` reports for each job of each file, every problem prefixed with the file and the job. */
function perJob(
  files: readonly WorkflowFile[],
  check: (job: Job, problem: (text: string) => void, wf: WorkflowFile, name: string) => void,
): string[] {
  const problems: string[] = [];
  for (const wf of files) {
    for (const [name, job] of Object.entries(wf.workflow.jobs)) {
      check(job, (text) => problems.push(`${wf.file} ${name}: ${text}`), wf, name);
    }
  }
  return problems;
}

/** Whether a job previews a stack (and so runs the program) without deploying it. */
export function isPreviewJob(job: Job): boolean {
  const commands = job.steps.filter(isPulumiCommand).map((s) => s.with?.command);
  return commands.length > 0 && commands.every((c) => c === 'preview');
}

/** Every action is pinned to a full commit SHA, with the tag it is named after in a comment. */
export function pinningProblems(files: readonly WorkflowFile[]): string[] {
  return perJob(files, (job, problem, wf) => {
    for (const { uses } of job.steps) {
      if (uses === undefined || uses.startsWith('./')) continue;
      if (!FULL_SHA.test(uses)) {
        problem(`${uses} is not pinned to a commit SHA`);
      } else if (!new RegExp(`${uses.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} # v\\d`).test(wf.text)) {
        problem(`${uses} has no "# vX.Y.Z" comment naming its tag`);
      }
    }
  });
}

/** The Pulumi CLI, the Cloud SDK and Node are pinned to exact versions wherever they are installed. */
export function toolVersionProblems(files: readonly WorkflowFile[]): string[] {
  return perJob(files, (job, problem) => {
    for (const step of job.steps) {
      if (isPulumi(step) && !EXACT_VERSION.test(String(step.with?.['pulumi-version'] ?? ''))) {
        problem('the Pulumi CLI is not pinned (pulumi-version X.Y.Z)');
      }
      if (
        step.uses?.startsWith('google-github-actions/setup-gcloud@') &&
        !EXACT_VERSION.test(String(step.with?.version ?? ''))
      ) {
        problem('the Cloud SDK is not pinned (version X.Y.Z, not latest)');
      }
      if (
        step.uses?.startsWith('actions/setup-node@') &&
        !EXACT_VERSION.test(String(step.with?.['node-version']))
      ) {
        problem('Node is not pinned (node-version X.Y.Z)');
      }
    }
  });
}

/**
 * A preview job (it runs pull request code, or a preview before approval) can read no deploy
 * credential: no secret but GITHUB_TOKEN, no deploy environment, no stored Pulumi token, and its
 * Pulumi token and Google identity are the preview ones.
 */
export function previewCredentialProblems(files: readonly WorkflowFile[]): string[] {
  const targets = files
    .filter((wf) => 'pull_request_target' in wf.workflow.on)
    .map((wf) => `${wf.file}: pull_request_target runs with the base repository's secrets`);
  return [
    ...targets,
    ...perJob(files, (job, problem, wf) => {
      const pr = 'pull_request' in wf.workflow.on || 'pull_request_target' in wf.workflow.on;
      if (!pr && !isPreviewJob(job)) return;
      const text = JSON.stringify(job);
      const secrets = [...text.matchAll(/secrets\.([A-Za-z0-9_]+)/g)].map((m) => m[1]);
      for (const secret of secrets.filter((s) => s !== 'GITHUB_TOKEN')) {
        problem(`a preview job reads secrets.${secret}`);
      }
      const environment = envName(job);
      if (environment !== undefined && (DEPLOY_ENVIRONMENTS as readonly string[]).includes(environment)) {
        problem(`a preview job runs in the deploy environment ${environment}`);
      }
      if (/PULUMI_ACCESS_TOKEN/.test(text)) {
        problem(`a preview job sets PULUMI_ACCESS_TOKEN`);
      }
      for (const step of job.steps) {
        if (step.uses?.startsWith('pulumi/auth-actions@') && !/PREVIEW_TEAM/.test(String(step.with?.scope))) {
          problem(`a preview job exchanges its token for a team that is not a preview team`);
        }
        if (
          step.uses?.startsWith('google-github-actions/auth@') &&
          !/PREVIEW_SERVICE_ACCOUNT/.test(String(step.with?.service_account))
        ) {
          problem(`a preview job acts as an identity that is not a preview identity`);
        }
      }
      if (job.steps.some(isPulumi) && !job.steps.some((s) => s.uses?.startsWith('pulumi/auth-actions@'))) {
        problem(`a preview job runs Pulumi without a short-lived token`);
      }
    }),
  ];
}

/** No workflow-wide concurrency; every job has its own group, deploys never cancelled halfway. */
export function concurrencyProblems(files: readonly WorkflowFile[]): string[] {
  const wide = files
    .filter((wf) => wf.workflow.concurrency !== undefined)
    .map((wf) => `${wf.file}: concurrency is set for the whole workflow, not per job`);
  // By file and group: the job last seen in it.
  const groups = new Map<string, string>();
  return [
    ...wide,
    ...perJob(files, (job, problem, wf, name) => {
      const c = job.concurrency;
      const group = typeof c === 'string' ? c : c?.group;
      if (group === undefined) return problem('no concurrency group');
      const other = groups.get(`${wf.file} ${group}`);
      if (other !== undefined) problem(`shares concurrency group ${group} with ${other}`);
      groups.set(`${wf.file} ${group}`, name);
      const deploys = job.steps.some((s) => isPulumiCommand(s) && s.with?.command === 'up');
      if (deploys && (typeof c === 'string' || c?.['cancel-in-progress'] !== false)) {
        problem('a deploy may be cancelled halfway (cancel-in-progress must be false)');
      }
    }),
  ];
}

/**
 * In a pull request, the pack is the base branch's and nothing of the pull request touches it: the
 * base is checked out after the pull request's packages are installed, copied outside the
 * workspace (Node's module lookup from the pack would otherwise climb into the pull request's
 * node_modules), installed with scripts off, checked untouched before the preview and again after
 * it (the pull request's program runs during the preview).
 */
export function packSourceProblems(files: readonly WorkflowFile[]): string[] {
  return perJob(onPullRequests(files), (job, problem) => {
    const steps = job.steps;
    const at = (pred: (s: Step) => boolean) => steps.findIndex(pred);
    const base = at(
      (s) =>
        s.uses?.startsWith('actions/checkout@') === true &&
        s.with?.ref === gh('github.event.pull_request.base.sha'),
    );
    for (const step of steps.filter(isPulumiCommand)) {
      const preview = steps.indexOf(step);
      const pack = String(step.with?.policyPacks ?? '');
      if (pack === '') {
        problem(`the preview runs no policy pack`);
        continue;
      }
      if (base === -1 || !pack.startsWith(`${gh('runner.temp')}/`)) {
        problem(
          base === -1 || !pack.includes(String(steps[base]!.with?.path ?? '\0'))
            ? `the policy pack (${pack}) is loaded from the pull request's tree`
            : `the policy pack (${pack}) sits in the pull request's workspace, where its modules can resolve to the pull request's node_modules`,
        );
        continue;
      }
      const prInstalls = steps.flatMap((s, i) => (/\bnpm ci\b(?!.*--prefix)/.test(s.run ?? '') ? [i] : []));
      if (prInstalls.some((i) => i > base)) {
        problem(`the base branch's pack is checked out before the pull request's packages are installed`);
      }
      const baseInstall = at((s) => /npm ci --ignore-scripts --prefix .*policy-base/.test(s.run ?? ''));
      if (baseInstall === -1) {
        problem(`the base branch's pack loads the pull request's packages`);
        continue;
      }
      const record = at((s) => /check-policy-base\.sh record/.test(s.run ?? ''));
      if (record === -1 || record < baseInstall || record > preview) {
        problem(`the base branch's pack is not checked untouched before the preview`);
      }
      const verify = at((s) => /check-policy-base\.sh verify/.test(s.run ?? ''));
      if (verify === -1 || verify < preview || !/failure\(\)|always\(\)/.test(steps[verify]!.if ?? '')) {
        problem(`the base branch's pack is not checked untouched after the preview`);
      }
    }
  });
}

/**
 * A job that can obtain a token (id-token: write) runs no package lifecycle script: a dependency's
 * install script would run with the token request at hand, and in a pull request it could rewrite
 * the pack installed after it.
 */
export function installScriptProblems(files: readonly WorkflowFile[]): string[] {
  return perJob(files, (job, problem) => {
    const perms = typeof job.permissions === 'object' ? job.permissions : {};
    if (perms['id-token'] !== 'write') return;
    for (const step of job.steps) {
      for (const m of (step.run ?? '').matchAll(/\bnpm (ci|install|i)\b[^\n&|;]*/g)) {
        if (!m[0].includes('--ignore-scripts')) {
          problem(`\`${m[0].trim()}\` runs lifecycle scripts in a job that can obtain a token`);
        }
      }
    }
  });
}

/**
 * A pull request's preview shows only what merging would do: it keeps the image the dev stack runs
 * (docline:promotedImage) or names one (docline:image); it never builds a repository and an image
 * that main, which deploys a promoted digest, would not.
 */
export function previewImageProblems(files: readonly WorkflowFile[]): string[] {
  return perJob(onPullRequests(files), (job, problem) => {
    for (const step of job.steps.filter(isPulumiCommand)) {
      const configMap = String(step.with?.['config-map'] ?? '');
      if (
        !/docline:promotedImage: \{value: 'true'/.test(configMap) &&
        !/docline:image: \{value:/.test(configMap)
      ) {
        problem(
          'the preview builds an image main would not deploy (no docline:promotedImage or docline:image)',
        );
      }
    }
  });
}

/**
 * CI never creates a stack (a mistyped organization would start a second, empty one): every job
 * that runs a Pulumi command first checks the stack exists and its file names a real project.
 */
export function stackCheckProblems(files: readonly WorkflowFile[]): string[] {
  return perJob(files, (job, problem) => {
    const first = job.steps.findIndex(isPulumiCommand);
    if (first === -1) return;
    const check = job.steps.findIndex((s) => /\.github\/scripts\/check-stack\.sh/.test(s.run ?? ''));
    if (check === -1 || check > first) problem('runs Pulumi without first checking the stack exists');
    if (job.steps.some((s) => isPulumiCommand(s) && String(s.with?.upsert) === 'true')) {
      problem('creates the stack when it is missing (upsert)');
    }
  });
}

/** Pull requests run the tests, the policy-pack suite, actionlint and an image build. */
export function pullRequestCheckProblems(files: readonly WorkflowFile[]): string[] {
  const pr = onPullRequests(files);
  const steps = pr.flatMap(stepsOf).map(({ step }) => step);
  const problems: string[] = [];
  if (pr.length === 0) return ['no workflow runs on pull requests'];
  if (!steps.some((s) => /\bnpm test\b/.test(s.run ?? ''))) problems.push('pull requests skip npm test');
  if (!steps.some((s) => /npm run test:policy-pack/.test(s.run ?? '')))
    problems.push('pull requests skip the policy-pack suite');
  if (!steps.some((s) => /actionlint/.test(s.run ?? ''))) problems.push('pull requests skip actionlint');
  if (!steps.some((s) => s.uses?.startsWith('docker/build-push-action@') && s.with?.push === false)) {
    problems.push('pull requests build no image');
  }
  return problems;
}

/**
 * The deploy workflow builds one image and promotes its digest: dev, the prod preview and prod all
 * deploy the image job's output; a manual run deploys main only and may name a digest to roll back to.
 */
export function promotionProblems(deploy: WorkflowFile): string[] {
  const problems: string[] = [];
  const jobs = deploy.workflow.jobs;
  const builds = stepsOf(deploy).filter(({ step }) => step.uses?.startsWith('docker/build-push-action@'));
  if (builds.length !== 1 || builds[0]!.step.with?.push !== true)
    problems.push('not exactly one image build that pushes');
  const imageJob = builds[0]?.job;
  if (imageJob !== undefined && !/steps\.tag\.outputs\.tag/.test(String(builds[0]!.step.with?.tags))) {
    problems.push('the image is not tagged by content');
  }
  const pulumiJobs = Object.entries(jobs).filter(([, j]) => j.steps.some(isPulumiCommand));
  for (const [name, job] of pulumiJobs) {
    const configMap = String(job.steps.find(isPulumiCommand)?.with?.['config-map'] ?? '');
    if (!configMap.includes(`docline:image: {value: '\${{ needs.${imageJob}.outputs.ref }}'`)) {
      problems.push(`${name} does not deploy the promoted digest`);
    }
    if (imageJob === undefined || !needsOf(job).includes(imageJob))
      problems.push(`${name} does not wait for the image job`);
  }
  const order: [string, string][] = [
    ['prod-preview', 'dev'],
    ['prod', 'prod-preview'],
  ];
  for (const [job, before] of order) {
    if (!needsOf(jobs[job] ?? { steps: [] }).includes(before))
      problems.push(`${job} does not wait for ${before}`);
  }
  if (envName(jobs.prod ?? { steps: [] }) !== 'prod')
    problems.push('prod does not run in the prod environment (approval)');
  for (const [name, job] of Object.entries(jobs)) {
    if (!(job.if ?? '').includes("github.ref == 'refs/heads/main'"))
      problems.push(`${name} may run on a branch other than main`);
  }
  const dispatch = deploy.workflow.on.workflow_dispatch as
    | { inputs?: Record<string, unknown> }
    | null
    | undefined;
  if (dispatch?.inputs?.image === undefined) problems.push('no rollback input (workflow_dispatch image)');
  const ref = imageJob === undefined ? undefined : jobs[imageJob]!.steps.find((s) => s.id === 'ref');
  if (!/inputs\.image/.test(JSON.stringify(ref?.env ?? {})))
    problems.push('the rollback input does not feed the promoted digest');
  return problems;
}

/**
 * Each job's settings are its own: a job reads only variables of its environment (DEV_, PROD_,
 * IMAGE_ or shared ones), and checks every one it reads is set before using it.
 */
export function settingsProblems(files: readonly WorkflowFile[]): string[] {
  const own: Record<string, RegExp> = {
    dev: /^(PROD_|IMAGE_GCP)/,
    prod: /^(DEV_|IMAGE_GCP)/,
    'prod-preview': /^(DEV_|IMAGE_GCP)/,
    image: /^(DEV_|PROD_)/,
  };
  return perJob(files, (job, problem) => {
    const used = [...new Set([...JSON.stringify(job).matchAll(/vars\.([A-Za-z0-9_]+)/g)].map((m) => m[1]!))];
    if (used.length === 0) return;
    const check = job.steps.find((s) => s.run?.includes('.github/scripts/require-settings.sh'));
    const checkIndex = check === undefined ? -1 : job.steps.indexOf(check);
    const firstUse = job.steps.findIndex((s, i) => i !== checkIndex && /vars\./.test(JSON.stringify(s)));
    if (check === undefined || checkIndex > firstUse) {
      problem(`reads vars without first failing when one is unset`);
      return;
    }
    for (const v of used.filter((v) => !new RegExp(`\\b${v}\\b`).test(check.run ?? ''))) {
      problem(`vars.${v} is not checked for being set`);
    }
    const foreign = own[envName(job) ?? ''];
    for (const v of used.filter((v) => foreign?.test(v))) {
      problem(`reads vars.${v}, another environment's setting`);
    }
    if (/vars\.[A-Za-z0-9_]+\s*\|\|/.test(JSON.stringify(job))) {
      problem(`a variable falls back to a default when unset`);
    }
  });
}

/**
 * Files that decide a deploy or run in a job holding a deploy identity, one concrete path each: the
 * workflows, the program, the pack, the worker (the pack's defaults come from its contract, and it
 * is the image CI deploys), the stack files, and what `npm ci` and `npm run` read in a deploy job.
 */
export const DEPLOY_CRITICAL_PATHS = [
  '.github/workflows/deploy.yml',
  '.github/CODEOWNERS',
  'infra/index.ts',
  'policies/index.ts',
  'worker/src/contract/settings.ts',
  'worker/Dockerfile',
  'scripts/install-actionlint.sh',
  'Pulumi.yaml',
  'Pulumi.prod.yaml',
  'package.json',
  'package-lock.json',
  'tsconfig.json',
  '.npmrc',
] as const;

/** Whether a CODEOWNERS pattern (the subset docline uses: `/dir/`, `/file`, `*` in a segment) matches a path. */
function codeownersMatches(pattern: string, path: string): boolean {
  const anchored = pattern.startsWith('/');
  const body = pattern.replace(/^\//, '');
  const dir = body.endsWith('/');
  const glob = (dir ? body.slice(0, -1) : body)
    .split('*')
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
    .join('[^/]*');
  const re = new RegExp(`${anchored ? '^' : '(^|/)'}${glob}${dir ? '/' : '(/|$)'}`);
  return re.test(path);
}

/**
 * CODEOWNERS gives an owner to every deploy-critical path. GitHub applies the *last* matching line,
 * so a later pattern without owners (or with none of these) un-owns a path an earlier line covered.
 */
export function codeownersProblems(codeowners: string): string[] {
  const rules = codeowners
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => l.split(/\s+/));
  return DEPLOY_CRITICAL_PATHS.filter((path) => {
    const last = rules.filter(([pattern]) => codeownersMatches(pattern!, path)).at(-1);
    return last === undefined || last.length < 2;
  }).map((path) => `CODEOWNERS has no owner for ${path}`);
}

/** The repository files around the workflows that a security review reads. */
export interface RepositoryFiles {
  /** .github/dependabot.yml, parsed. */
  readonly dependabot: { updates?: { 'package-ecosystem'?: string; directory?: string }[] } | undefined;
  /** worker/Dockerfile. */
  readonly dockerfile: string;
  /** LICENSE, or undefined when missing. */
  readonly license: string | undefined;
  /** SECURITY.md, or undefined when missing. */
  readonly security: string | undefined;
  /** package.json's `license`. */
  readonly packageLicense: string | undefined;
}

/**
 * Hygiene: every pin has a bot that proposes its updates (npm, the actions, the base image), the
 * base image is pinned by digest in every FROM, and the repository says how to report a
 * vulnerability and under which licence it is published (the one package.json names).
 */
export function hygieneProblems(files: RepositoryFiles): string[] {
  const problems: string[] = [];
  const updates = files.dependabot?.updates ?? [];
  for (const [ecosystem, directory] of [
    ['npm', '/'],
    ['github-actions', '/'],
    ['docker', '/worker'],
  ] as const) {
    if (!updates.some((u) => u['package-ecosystem'] === ecosystem && u.directory === directory)) {
      problems.push(`dependabot does not update ${ecosystem} in ${directory}`);
    }
  }
  const froms = [...files.dockerfile.matchAll(/^FROM\s+(?:--\S+\s+)*(\S+)/gm)].map((m) => m[1]!);
  if (froms.length === 0) problems.push('worker/Dockerfile has no FROM');
  for (const image of froms.filter((f) => !/@sha256:[0-9a-f]{64}$/.test(f))) {
    problems.push(`worker/Dockerfile: FROM ${image} is not pinned by digest`);
  }
  if (files.security === undefined || !/vulnerabilit/i.test(files.security)) {
    problems.push('no SECURITY.md saying how to report a vulnerability');
  }
  if (files.packageLicense !== 'Apache-2.0' || !/Apache License\s+Version 2\.0/.test(files.license ?? '')) {
    problems.push(`LICENSE is not the Apache-2.0 text package.json names (${files.packageLicense})`);
  }
  return problems;
}

/**
 * Only an image this pipeline built reaches a stack, and never backwards: the image job attests the
 * digest it builds; every `up` is preceded by the deploy guard (provenance, and the run's commit
 * descending from the stack's deployed one unless it is a rollback) on the promoted digest, with the
 * full history checked out, and followed by recording the deployed commit.
 */
export function provenanceProblems(deploy: WorkflowFile): string[] {
  const problems: string[] = [];
  const jobs = deploy.workflow.jobs;
  const build = stepsOf(deploy).find(({ step }) => step.uses?.startsWith('docker/build-push-action@'));
  const imageJob = build === undefined ? undefined : jobs[build.job]!;
  const attest = imageJob?.steps.find((s) => s.uses?.startsWith('actions/attest-build-provenance@'));
  if (
    attest === undefined ||
    attest.with?.['subject-digest'] !== gh(`steps.${build!.step.id}.outputs.digest`)
  ) {
    problems.push('the image is pushed without build provenance of the digest built');
  }
  const perms = (j: Job) => (typeof j.permissions === 'object' ? j.permissions : {});
  if (imageJob !== undefined && perms(imageJob).attestations !== 'write') {
    problems.push(`${build!.job}: no attestations: write to attest the image`);
  }
  for (const [name, job] of Object.entries(jobs)) {
    const up = job.steps.findIndex((s) => isPulumiCommand(s) && s.with?.command === 'up');
    if (up === -1) continue;
    const guard = job.steps.findIndex((s) => /\.github\/scripts\/deploy-guard\.ts/.test(s.run ?? ''));
    const g = job.steps[guard];
    if (g === undefined || guard > up) {
      problems.push(`${name}: deploys without the deploy guard (provenance, no going backwards)`);
    } else {
      if (
        g.env?.IMAGE_REF !== gh(`needs.${build?.job}.outputs.ref`) ||
        !/--image "\$IMAGE_REF"/.test(g.run ?? '')
      ) {
        problems.push(`${name}: the deploy guard does not check the promoted digest`);
      }
      if (g.env?.ROLLBACK_DIGEST !== gh('inputs.image') || !/--rollback/.test(g.run ?? '')) {
        problems.push(
          `${name}: the deploy guard does not know an explicit rollback from a run going backwards`,
        );
      }
    }
    if (perms(job).attestations !== 'read')
      problems.push(`${name}: no attestations: read to verify the image`);
    const checkout = job.steps.find((s) => s.uses?.startsWith('actions/checkout@'));
    if (String(checkout?.with?.['fetch-depth']) !== '0') {
      problems.push(
        `${name}: a shallow checkout cannot tell whether the run descends from the deployed commit`,
      );
    }
    const record = job.steps.findIndex((s) =>
      /pulumi stack tag set docline:deployed-commit "\$GITHUB_SHA"/.test(s.run ?? ''),
    );
    if (record === -1 || record < up) problems.push(`${name}: does not record the commit it deployed`);
  }
  return problems;
}

/** A run of the deploy workflow: its event, and what its jobs produce. */
export interface RunCase {
  readonly name: string;
  readonly event: 'push' | 'workflow_dispatch';
  readonly ref: string;
  readonly inputs?: Readonly<Record<string, string | boolean>>;
  /** Jobs that fail when they run (the others succeed). */
  readonly failing?: readonly string[];
  /** Outputs of jobs that run. */
  readonly outputs?: Readonly<Record<string, Readonly<Record<string, string>>>>;
}

const STATUS_FUNCTION = /\b(success|failure|always|cancelled)\(\)/;

/**
 * The jobs that run for a case, as GitHub Actions decides: in dependency order, a job whose `if`
 * names no status function also needs every job it needs to have succeeded; its `if` is evaluated
 * with github, inputs and needs (results and outputs) of the case.
 */
export function jobsThatRun(workflow: Workflow, run: RunCase): string[] {
  const result = new Map<string, 'success' | 'failure' | 'skipped'>();
  const pending = Object.keys(workflow.jobs);
  while (pending.length > 0) {
    const i = pending.findIndex((j) => needsOf(workflow.jobs[j]!).every((n) => result.has(n)));
    if (i === -1) throw new Error('the jobs need each other in a cycle');
    const [name] = pending.splice(i, 1) as [string];
    const job = workflow.jobs[name]!;
    const needs = needsOf(job);
    const needsContext = Object.fromEntries(
      needs.map((n) => [
        n,
        { result: result.get(n)!, outputs: result.get(n) === 'skipped' ? {} : (run.outputs?.[n] ?? {}) },
      ]),
    );
    const allSucceeded = needs.every((n) => result.get(n) === 'success');
    const condition = job.if ?? 'success()';
    const scope = {
      variables: {
        github: { ref: run.ref, event_name: run.event },
        inputs: { ...(run.inputs ?? {}) },
        needs: needsContext,
      },
      functions: {
        success: () => allSucceeded,
        failure: () => needs.some((n) => result.get(n) === 'failure'),
        always: () => true,
        cancelled: () => false,
      },
    };
    const runs = (STATUS_FUNCTION.test(condition) || allSucceeded) && holds(condition, scope, 'github');
    result.set(name, !runs ? 'skipped' : run.failing?.includes(name) ? 'failure' : 'success');
  }
  return Object.keys(workflow.jobs).filter((j) => result.get(j) !== 'skipped');
}

const DIGEST = `sha256:${'a'.repeat(64)}`;
const PUSH = { event: 'push', ref: 'refs/heads/main' } as const;
const DISPATCH = { event: 'workflow_dispatch', ref: 'refs/heads/main' } as const;

/** The runs the deploy workflow must handle, and the jobs each must run. */
export const DEPLOY_RUNS: readonly (RunCase & { readonly runs: readonly string[] })[] = [
  {
    name: 'a push to main that changes prod',
    ...PUSH,
    outputs: { 'prod-preview': { changes: 'true' } },
    runs: ['test', 'image', 'dev', 'prod-preview', 'prod'],
  },
  {
    name: 'a push to main that leaves prod unchanged',
    ...PUSH,
    outputs: { 'prod-preview': { changes: 'false' } },
    runs: ['test', 'image', 'dev', 'prod-preview'],
  },
  {
    name: 'a push to main whose tests fail',
    ...PUSH,
    failing: ['test'],
    runs: ['test'],
  },
  {
    name: 'a push whose dev deploy fails',
    ...PUSH,
    failing: ['dev'],
    runs: ['test', 'image', 'dev'],
  },
  {
    name: 'a rollback of dev and prod',
    ...DISPATCH,
    inputs: { image: DIGEST, prod_only: false },
    outputs: { 'prod-preview': { changes: 'true' } },
    runs: ['image', 'dev', 'prod-preview', 'prod'],
  },
  {
    name: 'a rollback of prod alone',
    ...DISPATCH,
    inputs: { image: DIGEST, prod_only: true },
    outputs: { 'prod-preview': { changes: 'true' } },
    runs: ['image', 'prod-preview', 'prod'],
  },
  {
    name: 'a manual run without an image that asks for prod alone',
    ...DISPATCH,
    inputs: { image: '', prod_only: true },
    outputs: { 'prod-preview': { changes: 'true' } },
    runs: ['test', 'image', 'dev', 'prod-preview', 'prod'],
  },
  {
    name: 'a manual run on a branch',
    event: 'workflow_dispatch',
    ref: 'refs/heads/feature',
    inputs: { image: DIGEST, prod_only: true },
    runs: [],
  },
];

/** Each run of DEPLOY_RUNS runs exactly its jobs. */
export function runProblems(deploy: WorkflowFile): string[] {
  const problems: string[] = [];
  for (const run of DEPLOY_RUNS) {
    const ran = jobsThatRun(deploy.workflow, run);
    for (const job of run.runs.filter((j) => !ran.includes(j)))
      problems.push(`${run.name}: ${job} does not run`);
    for (const job of ran.filter((j) => !run.runs.includes(j))) problems.push(`${run.name}: ${job} runs`);
  }
  return problems;
}
