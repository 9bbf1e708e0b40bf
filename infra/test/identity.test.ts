/**
 * The workload identity conditions of infra/identity, judged on the runs that matter: each
 * identity is reachable by the one run it is for, and by no pull request, branch, other workflow,
 * tag or recreated repository. Each gap the delivery review found (the subject alone, no ref, no
 * workflow, names instead of ids) is put back in a copy and shown to let its run through.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExpressionError, evaluate, holds } from '../identity/expression';
import { configOf, type IdentitySettings, render } from '../identity/main';
import { claimsOf, googleReach, pulumiReach, type TrustConfig, trustProblems } from '../identity/scenarios';
import { DEPLOY_WORKFLOW, MAIN, PREVIEW_WORKFLOW, pulumiPatternMatches } from '../identity/trust';

const ROOT = join(__dirname, '..', '..');
const settings = JSON.parse(
  readFileSync(join(ROOT, 'infra', 'identity', 'example.json'), 'utf8'),
) as IdentitySettings;
const config = configOf(settings);
const repo = settings.repository;
const claims = (run: Parameters<typeof claimsOf>[1]) => claimsOf(repo, run, settings.pulumiOrganization);

describe('the expression evaluator', () => {
  it('reads CEL as Google does: a missing claim is an error, absorbed when the other side decides', () => {
    const scope = { variables: { assertion: { a: 'x' } } };
    expect(() => evaluate('assertion.environment == "dev"', scope, 'cel')).toThrow(ExpressionError);
    expect(holds("assertion.a == 'y' && assertion.environment == 'dev'", scope, 'cel')).toBe(false);
    expect(holds("assertion.environment == 'dev' || assertion.a == 'x'", scope, 'cel')).toBe(true);
    expect(holds("assertion.a in ['x', 'z'] && 'a' + 'b' == 'ab'", scope, 'cel')).toBe(true);
  });

  it('reads GitHub conditions as Actions does: a missing member is null, strings compare case-insensitively', () => {
    const scope = { variables: { inputs: { image: '' } }, functions: { cancelled: () => false } };
    expect(holds("inputs.image == '' && !cancelled() && inputs.absent == null", scope, 'github')).toBe(true);
    expect(holds("inputs.image != ''", scope, 'github')).toBe(false);
    expect(holds("'Main' == 'main'", scope, 'github')).toBe(true);
  });
});

describe('the trust conditions as rendered', () => {
  it('let every run reach exactly its identity, and no other run any', () => {
    expect(trustProblems(config)).toEqual([]);
  });

  it('give the dev deploy identity to deploy.yml on main in environment dev only', () => {
    const deploy = claims({ event: 'push', ref: MAIN, workflow: DEPLOY_WORKFLOW, environment: 'dev' });
    expect(googleReach(config, deploy)).toEqual(['dev-deploy']);
    expect(pulumiReach(config, deploy)).toEqual(['dev-deploy']);
    const pr = claims({
      event: 'pull_request',
      ref: 'refs/pull/3/merge',
      workflow: PREVIEW_WORKFLOW,
      environment: 'dev',
    });
    expect(googleReach(config, pr)).toEqual([]);
    expect(pulumiReach(config, pr)).toEqual([]);
  });

  it('read Pulumi Cloud wildcards as documented: * any run, ? zero or one, . exactly one character', () => {
    expect(pulumiPatternMatches('a/preview.yml@refs/pull/*/merge', 'a/preview.yml@refs/pull/12/merge')).toBe(
      true,
    );
    expect(pulumiPatternMatches('a/preview.yml@refs/pull/*/merge', 'a/preview.yml@refs/heads/x')).toBe(false);
    expect(pulumiPatternMatches('v?1', 'v1')).toBe(true);
    expect(pulumiPatternMatches('a.b', 'aXb')).toBe(true);
  });
});

describe('each gap of the review, put back, lets its run through', () => {
  const withCondition = (dev: string): TrustConfig => ({
    ...config,
    googleConditions: { ...config.googleConditions, dev },
  });

  it('a provider that checks only the owner (the subject carries no ref): a pull request adding environment: dev deploys dev', () => {
    const problems = trustProblems(withCondition("assertion.repository_owner == 'acme'"));
    expect(problems).toContain(
      'a pull request job that adds environment: dev: Google lets it act as dev-deploy',
    );
    expect(problems).toContain(
      'a branch push of an edited deploy.yml in environment dev: Google lets it act as dev-deploy',
    );
  });

  it('a condition without the ref and the workflow: a branch that edits deploy.yml deploys dev', () => {
    const dev = config.googleConditions.dev
      .replace(" && assertion.ref == 'refs/heads/main'", '')
      .replace(" && assertion.ref_type == 'branch'", '')
      .replace(/ && assertion\.workflow_ref == '[^']*'/, '');
    expect(trustProblems(withCondition(dev))).toEqual([
      'a branch push of an edited deploy.yml in environment dev: Google lets it act as dev-deploy',
      'another workflow on main in environment dev: Google lets it act as dev-deploy',
      'a tag push in environment dev: Google lets it act as dev-deploy',
    ]);
  });

  it('names instead of the numeric ids: a recreated repository of the same name deploys', () => {
    const dev = config.googleConditions.dev.replace(
      /assertion\.repository_owner_id == '\d+' && assertion\.repository_id == '\d+'/,
      "assertion.repository == 'acme/docline'",
    );
    expect(trustProblems(withCondition(dev))).toEqual([
      'a recreated repository of the same name, environment dev: Google lets it act as dev-deploy',
    ]);
  });

  it('Pulumi Cloud policies on the subject alone: a pull request adding environment: prod gets the prod deploy team', () => {
    const subjectOnly = config.pulumiPolicies
      .filter((p) => p.decision === 'allow')
      .map((p) => ({ ...p, rules: { aud: p.rules.aud!, sub: p.rules.sub! } }));
    const problems = trustProblems({ ...config, pulumiPolicies: subjectOnly });
    expect(problems).toContain(
      'a pull request job that adds environment: prod: Pulumi Cloud lets it act as prod-deploy',
    );
    expect(problems).toContain(
      'a branch push of an edited deploy.yml in environment prod: Pulumi Cloud lets it act as prod-deploy',
    );
  });

  it('a binding on the whole pool: the pull request preview becomes the dev deploy identity', () => {
    const pool = `principalSet://iam.googleapis.com/projects/111111111111/locations/global/workloadIdentityPools/github/*`;
    const loose: TrustConfig = {
      ...config,
      googleMembers: { ...config.googleMembers, 'dev-deploy': [pool] },
    };
    expect(trustProblems(loose)).toContain('the pull request preview: Google lets it act as dev-deploy');
  });
});

describe('infra/identity/main.ts', () => {
  const run = (...args: string[]) =>
    spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'infra', 'identity', 'main.ts'), ...args], {
      encoding: 'utf8',
      cwd: ROOT,
    });

  it('prints the gcloud commands and the Pulumi Cloud policies, and exits 0 when they have no gap', () => {
    const result = run(join(ROOT, 'infra', 'identity', 'example.json'));
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toBe(`${render(settings)}\n`);
    expect(result.stdout).toContain('--attribute-condition=');
    expect(result.stdout).toContain('"teamName": "docline-prod-deploy"');
  });

  it('says which identities a token reaches', () => {
    const file = join(tmpdir(), `claims-${process.pid}.json`);
    writeFileSync(
      file,
      JSON.stringify(
        claims({ event: 'workflow_dispatch', ref: MAIN, workflow: DEPLOY_WORKFLOW, environment: 'prod' }),
      ),
    );
    const result = run(join(ROOT, 'infra', 'identity', 'example.json'), file);
    expect(JSON.parse(result.stdout)).toEqual({ google: ['prod-deploy'], pulumi: ['prod-deploy'] });
  });
});
