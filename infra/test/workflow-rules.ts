/**
 * What a security review checks in the GitHub workflows, as pure rules over their parsed YAML (and
 * raw text, for the version comments of pinned actions). Each rule returns the problems it finds;
 * infra/test/workflows.test.ts runs them on the real files and on copies with one thing broken, so
 * every rule is shown to catch what it is for.
 */

/** One step of a job. */
export interface Step {
  id?: string;
  name?: string;
  if?: string;
  run?: string;
  uses?: string;
  with?: Record<string, unknown>;
  env?: Record<string, unknown>;
}

/** One job of a workflow. */
export interface Job {
  name?: string;
  if?: string;
  needs?: string | string[];
  environment?: string | { name: string };
  permissions?: Record<string, string> | string;
  concurrency?: string | { group: string; 'cancel-in-progress'?: boolean | string };
  env?: Record<string, unknown>;
  outputs?: Record<string, string>;
  steps: Step[];
}

/** A parsed workflow file. */
export interface Workflow {
  on: Record<string, unknown>;
  permissions?: unknown;
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
const envName = (j: Job) => (typeof j.environment === 'string' ? j.environment : j.environment?.name);
const needsOf = (j: Job) => (j.needs === undefined ? [] : Array.isArray(j.needs) ? j.needs : [j.needs]);

/** Whether a job previews a stack (and so runs the program) without deploying it. */
export function isPreviewJob(job: Job): boolean {
  const commands = job.steps.filter(isPulumi).map((s) => s.with?.command);
  return commands.length > 0 && commands.every((c) => c === 'preview');
}

/** Every action is pinned to a full commit SHA, with the tag it is named after in a comment. */
export function pinningProblems(files: readonly WorkflowFile[]): string[] {
  const problems: string[] = [];
  for (const wf of files) {
    for (const { job, step } of stepsOf(wf)) {
      const uses = step.uses;
      if (uses === undefined || uses.startsWith('./')) continue;
      if (!FULL_SHA.test(uses)) {
        problems.push(`${wf.file} ${job}: ${uses} is not pinned to a commit SHA`);
      } else if (!new RegExp(`${uses.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} # v\\d`).test(wf.text)) {
        problems.push(`${wf.file} ${job}: ${uses} has no "# vX.Y.Z" comment naming its tag`);
      }
    }
  }
  return problems;
}

/** The Pulumi CLI, the Cloud SDK and Node are pinned to exact versions wherever they are installed. */
export function toolVersionProblems(files: readonly WorkflowFile[]): string[] {
  const problems: string[] = [];
  for (const wf of files) {
    for (const { job, step } of stepsOf(wf)) {
      if (isPulumi(step) && !EXACT_VERSION.test(String(step.with?.['pulumi-version'] ?? ''))) {
        problems.push(`${wf.file} ${job}: the Pulumi CLI is not pinned (pulumi-version X.Y.Z)`);
      }
      if (
        step.uses?.startsWith('google-github-actions/setup-gcloud@') &&
        !EXACT_VERSION.test(String(step.with?.version ?? ''))
      ) {
        problems.push(`${wf.file} ${job}: the Cloud SDK is not pinned (version X.Y.Z, not latest)`);
      }
      if (
        step.uses?.startsWith('actions/setup-node@') &&
        !EXACT_VERSION.test(String(step.with?.['node-version']))
      ) {
        problems.push(`${wf.file} ${job}: Node is not pinned (node-version X.Y.Z)`);
      }
    }
  }
  return problems;
}

/**
 * A preview job (it runs pull request code, or a preview before approval) can read no deploy
 * credential: no secret but GITHUB_TOKEN, no deploy environment, no stored Pulumi token, and its
 * Pulumi token and Google identity are the preview ones.
 */
export function previewCredentialProblems(files: readonly WorkflowFile[]): string[] {
  const problems: string[] = [];
  for (const wf of files) {
    const pr = 'pull_request' in wf.workflow.on || 'pull_request_target' in wf.workflow.on;
    if ('pull_request_target' in wf.workflow.on) {
      problems.push(`${wf.file}: pull_request_target runs with the base repository's secrets`);
    }
    for (const [name, job] of Object.entries(wf.workflow.jobs)) {
      if (!pr && !isPreviewJob(job)) continue;
      const text = JSON.stringify(job);
      const secrets = [...text.matchAll(/secrets\.([A-Za-z0-9_]+)/g)].map((m) => m[1]);
      for (const secret of secrets.filter((s) => s !== 'GITHUB_TOKEN')) {
        problems.push(`${wf.file} ${name}: a preview job reads secrets.${secret}`);
      }
      const environment = envName(job);
      if (environment !== undefined && (DEPLOY_ENVIRONMENTS as readonly string[]).includes(environment)) {
        problems.push(`${wf.file} ${name}: a preview job runs in the deploy environment ${environment}`);
      }
      if (/PULUMI_ACCESS_TOKEN/.test(text)) {
        problems.push(`${wf.file} ${name}: a preview job sets PULUMI_ACCESS_TOKEN`);
      }
      for (const step of job.steps) {
        if (step.uses?.startsWith('pulumi/auth-actions@') && !/PREVIEW_TEAM/.test(String(step.with?.scope))) {
          problems.push(
            `${wf.file} ${name}: a preview job exchanges its token for a team that is not a preview team`,
          );
        }
        if (
          step.uses?.startsWith('google-github-actions/auth@') &&
          !/PREVIEW_SERVICE_ACCOUNT/.test(String(step.with?.service_account))
        ) {
          problems.push(
            `${wf.file} ${name}: a preview job acts as an identity that is not a preview identity`,
          );
        }
      }
      if (job.steps.some(isPulumi) && !job.steps.some((s) => s.uses?.startsWith('pulumi/auth-actions@'))) {
        problems.push(`${wf.file} ${name}: a preview job runs Pulumi without a short-lived token`);
      }
    }
  }
  return problems;
}

/** No workflow-wide concurrency; every job has its own group, deploys never cancelled halfway. */
export function concurrencyProblems(files: readonly WorkflowFile[]): string[] {
  const problems: string[] = [];
  for (const wf of files) {
    if (wf.workflow.concurrency !== undefined) {
      problems.push(`${wf.file}: concurrency is set for the whole workflow, not per job`);
    }
    const groups = new Map<string, string>();
    for (const [name, job] of Object.entries(wf.workflow.jobs)) {
      const c = job.concurrency;
      const group = typeof c === 'string' ? c : c?.group;
      if (group === undefined) {
        problems.push(`${wf.file} ${name}: no concurrency group`);
        continue;
      }
      if (groups.has(group))
        problems.push(`${wf.file} ${name}: shares concurrency group ${group} with ${groups.get(group)}`);
      groups.set(group, name);
      const deploys = job.steps.some((s) => isPulumi(s) && s.with?.command === 'up');
      if (deploys && (typeof c === 'string' || c?.['cancel-in-progress'] !== false)) {
        problems.push(
          `${wf.file} ${name}: a deploy may be cancelled halfway (cancel-in-progress must be false)`,
        );
      }
    }
  }
  return problems;
}

/** In a pull request, the pack is loaded from a checkout of the base branch, with the base's packages. */
export function packSourceProblems(files: readonly WorkflowFile[]): string[] {
  const problems: string[] = [];
  for (const wf of files.filter((f) => 'pull_request' in f.workflow.on)) {
    for (const [name, job] of Object.entries(wf.workflow.jobs)) {
      const base = job.steps.find(
        (s) =>
          s.uses?.startsWith('actions/checkout@') && s.with?.ref === gh('github.event.pull_request.base.sha'),
      );
      const basePath = base === undefined ? undefined : String(base.with?.path ?? '');
      for (const step of job.steps.filter(isPulumi)) {
        const pack = String(step.with?.policyPacks ?? '');
        if (pack === '') {
          problems.push(`${wf.file} ${name}: the preview runs no policy pack`);
        } else if (basePath === undefined || basePath === '' || !pack.startsWith(`${basePath}/`)) {
          problems.push(
            `${wf.file} ${name}: the policy pack (${pack}) is loaded from the pull request's tree`,
          );
        } else if (!job.steps.some((s) => s.run?.includes(`npm ci --ignore-scripts --prefix ${basePath}`))) {
          problems.push(`${wf.file} ${name}: the base branch's pack loads the pull request's packages`);
        }
      }
    }
  }
  return problems;
}

/** Pull requests run the tests, the policy-pack suite, actionlint and an image build. */
export function pullRequestCheckProblems(files: readonly WorkflowFile[]): string[] {
  const pr = files.filter((f) => 'pull_request' in f.workflow.on);
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
  const pulumiJobs = Object.entries(jobs).filter(([, j]) => j.steps.some(isPulumi));
  for (const [name, job] of pulumiJobs) {
    const configMap = String(job.steps.find(isPulumi)?.with?.['config-map'] ?? '');
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
  const problems: string[] = [];
  const own: Record<string, RegExp> = {
    dev: /^(PROD_|IMAGE_GCP)/,
    prod: /^(DEV_|IMAGE_GCP)/,
    'prod-preview': /^(DEV_|IMAGE_GCP)/,
    image: /^(DEV_|PROD_)/,
  };
  for (const wf of files) {
    for (const [name, job] of Object.entries(wf.workflow.jobs)) {
      const used = [
        ...new Set([...JSON.stringify(job).matchAll(/vars\.([A-Za-z0-9_]+)/g)].map((m) => m[1]!)),
      ];
      if (used.length === 0) continue;
      const check = job.steps.find((s) => s.run?.includes('.github/scripts/require-settings.sh'));
      const checkIndex = check === undefined ? -1 : job.steps.indexOf(check);
      const firstUse = job.steps.findIndex((s, i) => i !== checkIndex && /vars\./.test(JSON.stringify(s)));
      if (check === undefined || checkIndex > firstUse) {
        problems.push(`${wf.file} ${name}: reads vars without first failing when one is unset`);
        continue;
      }
      for (const v of used.filter((v) => !new RegExp(`\\b${v}\\b`).test(check.run ?? ''))) {
        problems.push(`${wf.file} ${name}: vars.${v} is not checked for being set`);
      }
      const foreign = own[envName(job) ?? ''];
      for (const v of used.filter((v) => foreign?.test(v))) {
        problems.push(`${wf.file} ${name}: reads vars.${v}, another environment's setting`);
      }
      if (/vars\.[A-Za-z0-9_]+\s*\|\|/.test(JSON.stringify(job))) {
        problems.push(`${wf.file} ${name}: a variable falls back to a default when unset`);
      }
    }
  }
  return problems;
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
export function codeownersProblems(
  codeowners: string,
  paths: readonly string[] = DEPLOY_CRITICAL_PATHS,
): string[] {
  const rules = codeowners
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => l.split(/\s+/));
  return paths
    .filter((path) => {
      const last = rules.filter(([pattern]) => codeownersMatches(pattern!, path)).at(-1);
      return last === undefined || last.length < 2;
    })
    .map((path) => `CODEOWNERS has no owner for ${path}`);
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
