/**
 * The GitHub workflows, read as a security review reads them: the rules of workflow-rules.ts hold on
 * the real files, and each rule catches the one thing it is for when a copy has it broken.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  codeownersProblems,
  concurrencyProblems,
  gh,
  hygieneProblems,
  installScriptProblems,
  isPreviewJob,
  type Job,
  packSourceProblems,
  pinningProblems,
  previewCredentialProblems,
  previewImageProblems,
  promotionProblems,
  provenanceProblems,
  pullRequestCheckProblems,
  runProblems,
  settingsProblems,
  stackCheckProblems,
  toolVersionProblems,
  type Workflow,
  type WorkflowFile,
} from './workflow-rules';

const ROOT = join(__dirname, '..', '..');
const { load } = require('js-yaml') as { load(text: string): unknown };

function read(file: string): WorkflowFile {
  const text = readFileSync(join(ROOT, '.github', 'workflows', file), 'utf8');
  return { file, workflow: load(text) as Workflow, text };
}

/**
 * A deep copy of a workflow file with one change made to its parsed form: a function of the copy,
 * or the fields to set on some of its jobs (undefined unsets one).
 */
function broken(
  wf: WorkflowFile,
  change: ((w: Workflow) => void) | Record<string, Partial<Job>>,
): WorkflowFile {
  const workflow = structuredClone(wf.workflow);
  if (typeof change === 'function') change(workflow);
  else for (const [job, fields] of Object.entries(change)) Object.assign(workflow.jobs[job]!, fields);
  return { ...wf, workflow };
}

const optional = (path: string) => {
  try {
    return readFileSync(join(ROOT, path), 'utf8');
  } catch {
    return undefined;
  }
};
const repositoryFiles = {
  dependabot: load(readFileSync(join(ROOT, '.github', 'dependabot.yml'), 'utf8')) as never,
  dockerfile: readFileSync(join(ROOT, 'worker', 'Dockerfile'), 'utf8'),
  license: optional('LICENSE'),
  security: optional('SECURITY.md'),
  packageLicense: (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { license?: string })
    .license,
};

const deploy = read('deploy.yml');
const preview = read('preview.yml');
const all = [deploy, preview];
const stepOf = (job: Job, prefix: string) => job.steps.find((s) => s.uses?.startsWith(prefix))!;
/** The pulumi/actions step of a job that runs a command (the first one only installs the CLI). */
const pulumiStep = (job: Job) =>
  job.steps.find((s) => s.uses?.startsWith('pulumi/actions@') && s.with?.command)!;
const withoutStep = (job: Job, pattern: RegExp) => {
  job.steps = job.steps.filter((s) => !pattern.test(`${s.uses ?? ''} ${s.run ?? ''}`));
};

describe('the workflows as they are', () => {
  it.each([
    ['pinning', () => pinningProblems(all)],
    ['tool versions', () => toolVersionProblems(all)],
    ['preview credentials', () => previewCredentialProblems(all)],
    ['concurrency', () => concurrencyProblems(all)],
    ['pack source', () => packSourceProblems(all)],
    ['pull request checks', () => pullRequestCheckProblems(all)],
    ['promotion', () => promotionProblems(deploy)],
    ['install scripts', () => installScriptProblems(all)],
    ['preview image', () => previewImageProblems(all)],
    ['stack check', () => stackCheckProblems(all)],
    ['provenance', () => provenanceProblems(deploy)],
    ['runs', () => runProblems(deploy)],
    ['settings', () => settingsProblems(all)],
    ['hygiene', () => hygieneProblems(repositoryFiles)],
    ['CODEOWNERS', () => codeownersProblems(readFileSync(join(ROOT, '.github', 'CODEOWNERS'), 'utf8'))],
  ])('pass the %s rule', (_rule, problems) => {
    expect(problems()).toEqual([]);
  });

  it('preview with a short-lived token in pull requests and before the prod approval', () => {
    const previews = [
      ...Object.values(preview.workflow.jobs).filter(isPreviewJob),
      ...Object.values(deploy.workflow.jobs).filter(isPreviewJob),
    ];
    expect(previews).toHaveLength(2);
  });

  it('document the deploy identity\u2019s roles, the push account in its actAs set', () => {
    for (const role of [
      'roles/run.admin',
      'roles/iam.serviceAccountUser',
      'roles/serviceusage.serviceUsageAdmin',
    ]) {
      expect(deploy.text).toContain(role);
    }
    expect(deploy.text).toMatch(/actAs: the worker, push, duplicate-check, reconcile and scheduler accounts/);
  });
});

describe('each rule catches what it is for', () => {
  it('an action pinned by tag, or a SHA without the tag it stands for', () => {
    const byTag = broken(preview, (w) => {
      stepOf(w.jobs.test!, 'actions/checkout@').uses = 'actions/checkout@v7';
    });
    expect(pinningProblems([byTag])).toEqual([
      'preview.yml test: actions/checkout@v7 is not pinned to a commit SHA',
    ]);
    const noComment = { ...preview, text: preview.text.replaceAll(' # v7.0.1', '') };
    expect(pinningProblems([noComment])[0]).toMatch(/actions\/checkout@3d3c42e5.* has no "# vX.Y.Z" comment/);
  });

  it('an unpinned Pulumi CLI or Node', () => {
    const cli = broken(deploy, (w) => {
      delete stepOf(w.jobs.prod!, 'pulumi/actions@').with!['pulumi-version'];
    });
    const node = broken(preview, (w) => {
      stepOf(w.jobs.test!, 'actions/setup-node@').with!['node-version'] = 22;
    });
    expect(toolVersionProblems([cli])).toEqual([
      'deploy.yml prod: the Pulumi CLI is not pinned (pulumi-version X.Y.Z)',
    ]);
    expect(toolVersionProblems([node])).toEqual([
      'preview.yml test: Node is not pinned (node-version X.Y.Z)',
    ]);
  });

  it('a preview job that can read the deploy token, runs in a deploy environment, or uses a deploy identity', () => {
    const token = broken(preview, {
      preview: { env: { PULUMI_ACCESS_TOKEN: gh('secrets.PULUMI_ACCESS_TOKEN') } },
    });
    expect(previewCredentialProblems([token])).toEqual([
      'preview.yml preview: a preview job reads secrets.PULUMI_ACCESS_TOKEN',
      'preview.yml preview: a preview job sets PULUMI_ACCESS_TOKEN',
    ]);
    const environment = broken(preview, { preview: { environment: 'dev' } });
    expect(previewCredentialProblems([environment])).toEqual([
      'preview.yml preview: a preview job runs in the deploy environment dev',
    ]);
    const team = broken(deploy, (w) => {
      stepOf(w.jobs['prod-preview']!, 'pulumi/auth-actions@').with!.scope =
        `team:${gh('vars.PROD_PULUMI_DEPLOY_TEAM')}`;
    });
    expect(previewCredentialProblems([team])).toEqual([
      'deploy.yml prod-preview: a preview job exchanges its token for a team that is not a preview team',
    ]);
    const identity = broken(preview, (w) => {
      stepOf(w.jobs.preview!, 'google-github-actions/auth@').with!.service_account = gh(
        'vars.DEV_GCP_DEPLOY_SERVICE_ACCOUNT',
      );
    });
    expect(previewCredentialProblems([identity])).toEqual([
      'preview.yml preview: a preview job acts as an identity that is not a preview identity',
    ]);
    const target = broken(preview, (w) => {
      w.on = { pull_request_target: {} };
    });
    expect(previewCredentialProblems([target])[0]).toMatch(
      /pull_request_target runs with the base repository's secrets/,
    );
  });

  it('concurrency for the whole workflow, a job without a group, a shared group, a deploy that may be cancelled', () => {
    const workflowWide = broken(deploy, (w) => {
      w.concurrency = { group: `deploy-${gh('github.ref')}` };
    });
    expect(concurrencyProblems([workflowWide])).toEqual([
      'deploy.yml: concurrency is set for the whole workflow, not per job',
    ]);
    const shared = broken(deploy, {
      prod: { concurrency: { group: 'deploy-dev', 'cancel-in-progress': false } },
    });
    expect(concurrencyProblems([shared])).toEqual([
      'deploy.yml prod: shares concurrency group deploy-dev with dev',
    ]);
    const cancelled = broken(deploy, {
      dev: { concurrency: { group: 'deploy-dev', 'cancel-in-progress': true } },
    });
    expect(concurrencyProblems([cancelled])).toEqual([
      'deploy.yml dev: a deploy may be cancelled halfway (cancel-in-progress must be false)',
    ]);
    const none = broken(preview, { image: { concurrency: undefined } });
    expect(concurrencyProblems([none])).toEqual(['preview.yml image: no concurrency group']);
  });

  it("a pack loaded from the pull request's tree, or with the pull request's packages", () => {
    const prTree = broken(preview, (w) => {
      pulumiStep(w.jobs.preview!).with!.policyPacks = 'policies';
    });
    expect(packSourceProblems([prTree])).toEqual([
      "preview.yml preview: the policy pack (policies) is loaded from the pull request's tree",
    ]);
    const prPackages = broken(preview, (w) => withoutStep(w.jobs.preview!, /--prefix/));
    expect(packSourceProblems([prPackages])).toEqual([
      "preview.yml preview: the base branch's pack loads the pull request's packages",
    ]);
  });

  it('a pack the pull request can reach: checked out before its install, inside its workspace, or not checked untouched', () => {
    const early = broken(preview, (w) => {
      const steps = w.jobs.preview!.steps;
      const base = steps.findIndex((s) => s.with?.path === '.policy-base');
      const [checkout] = steps.splice(base, 1);
      steps.splice(2, 0, checkout!);
    });
    expect(packSourceProblems([early])).toEqual([
      "preview.yml preview: the base branch's pack is checked out before the pull request's packages are installed",
    ]);
    const inside = broken(preview, (w) => {
      pulumiStep(w.jobs.preview!).with!.policyPacks = '.policy-base/policies';
    });
    expect(packSourceProblems([inside])).toEqual([
      "preview.yml preview: the policy pack (.policy-base/policies) sits in the pull request's workspace, where its modules can resolve to the pull request's node_modules",
    ]);
    const unchecked = broken(preview, (w) => withoutStep(w.jobs.preview!, /check-policy-base\.sh record/));
    expect(packSourceProblems([unchecked])).toEqual([
      "preview.yml preview: the base branch's pack is not checked untouched before the preview",
    ]);
    const notAfter = broken(preview, (w) => {
      w.jobs.preview!.steps.find((s) => s.run?.includes('check-policy-base.sh verify'))!.if = undefined;
    });
    expect(packSourceProblems([notAfter])).toEqual([
      "preview.yml preview: the base branch's pack is not checked untouched after the preview",
    ]);
  });

  it("a job holding a token that runs the packages' lifecycle scripts", () => {
    const scripts = broken(preview, (w) => {
      w.jobs.preview!.steps.find((s) => s.run === 'npm ci --ignore-scripts')!.run = 'npm ci';
    });
    expect(installScriptProblems([scripts])).toEqual([
      'preview.yml preview: `npm ci` runs lifecycle scripts in a job that can obtain a token',
    ]);
    const dev = broken(deploy, (w) => {
      w.jobs.dev!.steps.find((s) => s.run === 'npm ci --ignore-scripts')!.run = 'npm ci';
    });
    expect(installScriptProblems([dev])).toEqual([
      'deploy.yml dev: `npm ci` runs lifecycle scripts in a job that can obtain a token',
    ]);
  });

  it('a pull request preview that builds an image main would not deploy', () => {
    const builds = broken(preview, (w) => {
      delete pulumiStep(w.jobs.preview!).with!['config-map'];
    });
    expect(previewImageProblems([builds])).toEqual([
      'preview.yml preview: the preview builds an image main would not deploy (no docline:promotedImage or docline:image)',
    ]);
  });

  it('a first deploy that assumes the stack exists, or creates it', () => {
    const unchecked = broken(deploy, (w) => withoutStep(w.jobs.prod!, /check-stack\.sh/));
    expect(stackCheckProblems([unchecked])).toEqual([
      'deploy.yml prod: runs Pulumi without first checking the stack exists',
    ]);
    const upsert = broken(deploy, (w) => {
      pulumiStep(w.jobs.dev!).with!.upsert = true;
    });
    expect(stackCheckProblems([upsert])).toEqual([
      'deploy.yml dev: creates the stack when it is missing (upsert)',
    ]);
  });

  it('a deploy of an image without provenance, or of a run older than the deployed one', () => {
    const unattested = broken(deploy, (w) => withoutStep(w.jobs.image!, /attest-build-provenance/));
    expect(provenanceProblems(unattested)).toEqual([
      'the image is pushed without build provenance of the digest built',
    ]);
    const unguarded = broken(deploy, (w) => withoutStep(w.jobs.prod!, /deploy-guard/));
    expect(provenanceProblems(unguarded)).toEqual([
      'prod: deploys without the deploy guard (provenance, no going backwards)',
    ]);
    const everyRunARollback = broken(deploy, (w) => {
      const g = w.jobs.dev!.steps.find((s) => s.run?.includes('deploy-guard'))!;
      g.run =
        'node --import tsx .github/scripts/deploy-guard.ts --stack "$STACK" --image "$IMAGE_REF" --rollback';
      delete g.env!.ROLLBACK_DIGEST;
    });
    expect(provenanceProblems(everyRunARollback)).toEqual([
      'dev: the deploy guard does not know an explicit rollback from a run going backwards',
    ]);
    const shallow = broken(deploy, (w) => {
      delete stepOf(w.jobs.dev!, 'actions/checkout@').with!['fetch-depth'];
    });
    expect(provenanceProblems(shallow)).toEqual([
      'dev: a shallow checkout cannot tell whether the run descends from the deployed commit',
    ]);
    const unrecorded = broken(deploy, (w) => withoutStep(w.jobs.prod!, /stack tag set/));
    expect(provenanceProblems(unrecorded)).toEqual(['prod: does not record the commit it deployed']);
  });

  it("a rollback that waits for main's tests and dev, an unchanged prod asked for approval again", () => {
    const onMain = "github.ref == 'refs/heads/main'";
    const testsFirst = broken(deploy, { test: { if: onMain }, image: { if: onMain } });
    expect(runProblems(testsFirst)).toEqual([
      'a rollback of dev and prod: test runs',
      'a rollback of prod alone: test runs',
    ]);
    const devFirst = broken(deploy, { dev: { if: onMain }, 'prod-preview': { if: onMain } });
    expect(runProblems(devFirst)).toEqual(['a rollback of prod alone: dev runs']);
    const reapproved = broken(deploy, { prod: { if: onMain } });
    expect(runProblems(reapproved)).toEqual(['a push to main that leaves prod unchanged: prod runs']);
  });

  it('pull requests that skip the tests, the pack suite, actionlint or the image build', () => {
    const skipped = broken(preview, (w) => {
      delete w.jobs.test;
      delete w.jobs.image;
      delete w.jobs.workflows;
    });
    expect(pullRequestCheckProblems([deploy, skipped])).toEqual([
      'pull requests skip npm test',
      'pull requests skip the policy-pack suite',
      'pull requests skip actionlint',
      'pull requests build no image',
    ]);
  });

  it('a deploy that builds again, deploys another digest, skips the prod preview, or runs on a branch', () => {
    const rebuild = broken(deploy, (w) => {
      w.jobs.prod!.steps.splice(1, 0, { uses: 'docker/build-push-action@x', with: { push: true } });
    });
    expect(promotionProblems(rebuild)).toContain('not exactly one image build that pushes');
    const other = broken(deploy, (w) => {
      pulumiStep(w.jobs.prod!).with!['config-map'] = "{docline:image: {value: 'x', secret: false}}";
    });
    expect(promotionProblems(other)).toEqual(['prod does not deploy the promoted digest']);
    const noPreview = broken(deploy, { prod: { needs: ['image', 'dev'] } });
    expect(promotionProblems(noPreview)).toEqual(['prod does not wait for prod-preview']);
    const anyBranch = broken(deploy, { prod: { if: undefined } });
    expect(promotionProblems(anyBranch)).toEqual(['prod may run on a branch other than main']);
    const noRollback = broken(deploy, (w) => {
      w.on.workflow_dispatch = null;
    });
    expect(promotionProblems(noRollback)).toEqual(['no rollback input (workflow_dispatch image)']);
  });

  it("a setting not checked for being set, another environment's setting, a silent default", () => {
    const unchecked = broken(deploy, (w) => withoutStep(w.jobs.dev!, /require-settings/));
    expect(settingsProblems([unchecked])).toEqual([
      'deploy.yml dev: reads vars without first failing when one is unset',
    ]);
    const foreign = broken(deploy, (w) => {
      const auth = stepOf(w.jobs.dev!, 'google-github-actions/auth@');
      auth.with!.service_account = gh('vars.PROD_GCP_DEPLOY_SERVICE_ACCOUNT');
    });
    expect(settingsProblems([foreign])).toEqual([
      'deploy.yml dev: vars.PROD_GCP_DEPLOY_SERVICE_ACCOUNT is not checked for being set',
      "deploy.yml dev: reads vars.PROD_GCP_DEPLOY_SERVICE_ACCOUNT, another environment's setting",
    ]);
    const fallback = broken(preview, (w) => {
      pulumiStep(w.jobs.preview!).with!['stack-name'] =
        `${gh("vars.PULUMI_ORGANIZATION || 'org'")}/docline/dev`;
    });
    expect(settingsProblems([fallback])).toEqual([
      'preview.yml preview: a variable falls back to a default when unset',
    ]);
  });

  it('CODEOWNERS without an owner for what a deploy job runs, or un-owned by a later line', () => {
    const real = readFileSync(join(ROOT, '.github', 'CODEOWNERS'), 'utf8');
    const withoutLine = (path: string) =>
      real
        .split('\n')
        .filter((l) => !l.startsWith(`${path} `))
        .join('\n');
    for (const [line, unowned] of [
      ['/package.json', ['package.json']],
      ['/package-lock.json', ['package-lock.json']],
      ['/worker/', ['worker/src/contract/settings.ts', 'worker/Dockerfile']],
      ['/tsconfig.json', ['tsconfig.json']],
    ] as const) {
      expect(codeownersProblems(withoutLine(line))).toEqual(
        unowned.map((p) => `CODEOWNERS has no owner for ${p}`),
      );
    }
    expect(codeownersProblems(`${real}\n/infra/\n`)).toEqual(['CODEOWNERS has no owner for infra/index.ts']);
    expect(codeownersProblems(`${real}\n*.json @someone-else\n`)).toEqual([]);
  });
});

describe("docs/deploy.md's delivery section", () => {
  const doc = readFileSync(join(ROOT, 'docs', 'deploy.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Continuous delivery'));
  const settingsTable = section.slice(
    section.indexOf('**Settings outside this repository'),
    section.indexOf('**Server-side'),
  );

  it('lists the settings outside the repository the design relies on', () => {
    for (const setting of [
      'Deployment branches and tags',
      'Required reviewers',
      'Prevent self-review',
      'Allow administrators to bypass configured protection rules',
      'Require review from Code Owners',
      'OIDC subject claim template',
      'OIDC Issuers',
      'Stack Write',
      'private vulnerability reporting',
    ]) {
      expect(settingsTable).toContain(setting);
    }
  });

  it('names every environment the deploy workflow uses in the environment branch rule', () => {
    const environments = Object.values(deploy.workflow.jobs).flatMap((j) =>
      typeof j.environment === 'string' ? [j.environment] : [],
    );
    expect(new Set(environments)).toEqual(new Set(['image', 'dev', 'prod-preview', 'prod']));
    const row = settingsTable.split('\n').find((l) => l.includes('Deployment branches and tags'))!;
    for (const environment of environments) expect(row).toContain(`\`${environment}\``);
  });
});

describe('hygiene catches', () => {
  it('a Cloud SDK left at latest', () => {
    const latest = broken(preview, (w) => {
      delete stepOf(w.jobs.test!, 'google-github-actions/setup-gcloud@').with!.version;
    });
    expect(toolVersionProblems([latest])).toEqual([
      'preview.yml test: the Cloud SDK is not pinned (version X.Y.Z, not latest)',
    ]);
  });

  it('a base image by tag, a pin no bot updates, no SECURITY.md, a licence other than package.json\u2019s', () => {
    const byTag = repositoryFiles.dockerfile.replace(/@sha256:[0-9a-f]{64} AS runtime/, ' AS runtime');
    expect(hygieneProblems({ ...repositoryFiles, dockerfile: byTag })).toEqual([
      'worker/Dockerfile: FROM node:22-bookworm-slim is not pinned by digest',
    ]);
    const dependabot = {
      updates: (repositoryFiles.dependabot as { updates: { 'package-ecosystem': string }[] }).updates.filter(
        (u) => u['package-ecosystem'] !== 'docker',
      ),
    };
    expect(hygieneProblems({ ...repositoryFiles, dependabot })).toEqual([
      'dependabot does not update docker in /worker',
    ]);
    expect(hygieneProblems({ ...repositoryFiles, security: undefined })).toEqual([
      'no SECURITY.md saying how to report a vulnerability',
    ]);
    expect(hygieneProblems({ ...repositoryFiles, license: 'MIT License' })).toEqual([
      'LICENSE is not the Apache-2.0 text package.json names (Apache-2.0)',
    ]);
  });
});

describe('.github/scripts/require-settings.sh', () => {
  const run = (env: Record<string, string>) =>
    spawnSync('bash', [join(ROOT, '.github', 'scripts', 'require-settings.sh'), 'DEV_A', 'DEV_B'], {
      env: { PATH: process.env.PATH ?? '', ...env },
      encoding: 'utf8',
    });

  it('fails, naming every setting that is unset or empty', () => {
    const result = run({ DEV_A: '' });
    expect(result.status).toBe(1);
    expect(result.stdout.trim().split('\n')).toEqual([
      expect.stringMatching(/^::error title=setting not set::vars\.DEV_A is not set/),
      expect.stringMatching(/^::error title=setting not set::vars\.DEV_B is not set/),
    ]);
  });

  it('passes when every one is set', () => {
    expect(run({ DEV_A: 'a', DEV_B: 'b' }).status).toBe(0);
  });
});
