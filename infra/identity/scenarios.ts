/**
 * The runs a trust configuration is judged on: the ones that must reach their identity (deploy.yml
 * on main in each environment, the pull request preview) and the ones that must reach none (a pull
 * request that names a deploy environment, a branch that edits deploy.yml, another workflow on
 * main, a tag, a recreated repository of the same name). `trustProblems` evaluates the rendered
 * Google conditions and bindings and the Pulumi policies on each, so a gap shows as the run it lets
 * through.
 */
import {
  type Claims,
  DEPLOY_WORKFLOW,
  googleAccepts,
  IDENTITIES,
  type Identity,
  MAIN,
  PREVIEW_WORKFLOW,
  PROVIDERS,
  type Provider,
  type PulumiPolicy,
  pulumiAllows,
  type Repository,
} from './trust';

/** A trust configuration as Google and Pulumi Cloud hold it. */
export interface TrustConfig {
  readonly repository: Repository;
  readonly pulumiOrganization: string;
  /** Each provider's attribute condition. */
  readonly googleConditions: Readonly<Record<Provider, string>>;
  /** The members granted roles/iam.workloadIdentityUser on each identity's service account. */
  readonly googleMembers: Readonly<Record<Identity, readonly string[]>>;
  readonly pulumiPolicies: readonly PulumiPolicy[];
  readonly pulumiTeams: Readonly<Partial<Record<Identity, string>>>;
}

/** A run: the claims of its token, and the identities it must reach (none for an attack). */
export interface Scenario {
  readonly name: string;
  readonly claims: Claims;
  readonly reaches: readonly Identity[];
}

/** The claims GitHub puts in a job's token, for a run described by its ref, event, workflow and environment. */
export function claimsOf(
  repo: Repository,
  run: { event: string; ref: string; workflow: string; environment?: string; baseRef?: string },
  organization: string,
): Claims {
  const name = `${repo.owner}/${repo.name}`;
  const pr = run.event === 'pull_request' || run.event === 'pull_request_target';
  const sub =
    run.environment !== undefined
      ? `repo:${name}:environment:${run.environment}`
      : pr
        ? `repo:${name}:pull_request`
        : `repo:${name}:ref:${run.ref}`;
  return {
    iss: 'https://token.actions.githubusercontent.com',
    aud: `urn:pulumi:org:${organization}`,
    sub,
    repository: name,
    repository_owner: repo.owner,
    repository_id: repo.id,
    repository_owner_id: repo.ownerId,
    event_name: run.event,
    ref: run.ref,
    ref_type: run.ref.startsWith('refs/tags/') ? 'tag' : 'branch',
    workflow_ref: `${name}/${run.workflow}@${run.ref}`,
    job_workflow_ref: `${name}/${run.workflow}@${run.ref}`,
    base_ref: pr ? (run.baseRef ?? 'main') : '',
    head_ref: pr ? 'feature' : '',
    runner_environment: 'github-hosted',
    ...(run.environment === undefined ? {} : { environment: run.environment }),
  };
}

const ENVIRONMENTS: readonly [string, Identity][] = [
  ['image', 'image'],
  ['dev', 'dev-deploy'],
  ['prod-preview', 'prod-preview'],
  ['prod', 'prod-deploy'],
];

/** Every run the trust configuration is judged on. */
export function scenarios(repo: Repository, organization: string): Scenario[] {
  const c = (run: Parameters<typeof claimsOf>[1]) => claimsOf(repo, run, organization);
  const prRef = 'refs/pull/7/merge';
  const list: Scenario[] = [
    {
      name: 'the pull request preview',
      claims: c({ event: 'pull_request', ref: prRef, workflow: PREVIEW_WORKFLOW }),
      reaches: ['pr-preview'],
    },
    {
      name: 'a pull request job in another workflow file',
      claims: c({ event: 'pull_request', ref: prRef, workflow: '.github/workflows/mine.yml' }),
      reaches: [],
    },
  ];
  for (const [environment, identity] of ENVIRONMENTS) {
    for (const event of ['push', 'workflow_dispatch']) {
      list.push({
        name: `deploy.yml on main (${event}) in environment ${environment}`,
        claims: c({ event, ref: MAIN, workflow: DEPLOY_WORKFLOW, environment }),
        reaches: [identity],
      });
    }
    list.push(
      {
        name: `a pull request job that adds environment: ${environment}`,
        claims: c({ event: 'pull_request', ref: prRef, workflow: PREVIEW_WORKFLOW, environment }),
        reaches: [],
      },
      {
        name: `a branch push of an edited deploy.yml in environment ${environment}`,
        claims: c({ event: 'push', ref: 'refs/heads/feature', workflow: DEPLOY_WORKFLOW, environment }),
        reaches: [],
      },
      {
        name: `another workflow on main in environment ${environment}`,
        claims: c({ event: 'push', ref: MAIN, workflow: '.github/workflows/other.yml', environment }),
        reaches: [],
      },
      {
        name: `a tag push in environment ${environment}`,
        claims: c({ event: 'push', ref: 'refs/tags/v1', workflow: DEPLOY_WORKFLOW, environment }),
        reaches: [],
      },
      {
        name: `a recreated repository of the same name, environment ${environment}`,
        claims: {
          ...c({ event: 'push', ref: MAIN, workflow: DEPLOY_WORKFLOW, environment }),
          repository_id: `${repo.id}0`,
          repository_owner_id: `${repo.ownerId}0`,
        },
        reaches: [],
      },
    );
  }
  return list;
}

/**
 * Whether an IAM member names the token's federated identity: `principal://…/subject/SUB` names one
 * subject, `principalSet://…/*` the whole pool; attribute sets match nothing, since the providers
 * map no attribute but the subject.
 */
function memberMatches(member: string, claims: Claims): boolean {
  if (member.startsWith('principal://')) return member.endsWith(`/subject/${claims.sub}`);
  return member.startsWith('principalSet://') && member.endsWith('/*');
}

/** The identities a token reaches through Google: its provider accepts it, and a binding names its subject. */
export function googleReach(config: TrustConfig, claims: Claims): Identity[] {
  const reached: Identity[] = [];
  for (const provider of PROVIDERS) {
    if (!googleAccepts(config.googleConditions[provider], claims)) continue;
    for (const [identity, spec] of Object.entries(IDENTITIES) as [Identity, { provider: Provider }][]) {
      if (spec.provider !== provider) continue;
      const members = config.googleMembers[identity] ?? [];
      if (members.some((m) => memberMatches(m, claims))) reached.push(identity);
    }
  }
  return reached;
}

/** The identities a token reaches through Pulumi Cloud: the team tokens the issuer's policies grant it. */
export function pulumiReach(config: TrustConfig, claims: Claims): Identity[] {
  return (Object.entries(config.pulumiTeams) as [Identity, string][])
    .filter(([, team]) => pulumiAllows(config.pulumiPolicies, claims, team))
    .map(([identity]) => identity);
}

/** Every run that reaches an identity it must not, or misses the one it must. */
export function trustProblems(config: TrustConfig): string[] {
  const problems: string[] = [];
  for (const scenario of scenarios(config.repository, config.pulumiOrganization)) {
    for (const [where, reached, expected] of [
      ['Google', googleReach(config, scenario.claims), scenario.reaches],
      [
        'Pulumi Cloud',
        pulumiReach(config, scenario.claims),
        scenario.reaches.filter((i) => IDENTITIES[i].pulumi),
      ],
    ] as const) {
      for (const identity of reached.filter((i) => !expected.includes(i))) {
        problems.push(`${scenario.name}: ${where} lets it act as ${identity}`);
      }
      for (const identity of expected.filter((i) => !reached.includes(i))) {
        problems.push(`${scenario.name}: ${where} refuses it ${identity}`);
      }
    }
  }
  return problems;
}
