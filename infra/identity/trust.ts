/**
 * Who may become which deploy identity, declared once and rendered for both places that decide it:
 * Google Cloud (each workload identity provider's attribute condition, and the
 * `roles/iam.workloadIdentityUser` binding on each service account) and Pulumi Cloud (the GitHub
 * OIDC issuer's authorization policies, one per team token).
 *
 * GitHub's default `sub` claim names only the repository and the environment
 * (`repo:OWNER/REPO:environment:dev`), so any job that names an environment presents it: a pull
 * request that adds `environment: dev` to its own preview job, or a branch push that edits
 * deploy.yml. The conditions below therefore bind every claim that tells those runs apart: the
 * repository and its owner by their immutable numeric ids, the workflow file and the ref it ran from
 * (`workflow_ref`), the ref, the event and the environment. GitHub's environment branch rules
 * (docs/deploy.md, "Continuous delivery") stop such a job before it gets a token; these conditions
 * refuse the token even where a rule is missing.
 *
 * Claim names and formats: GitHub's OIDC reference ("OIDC token claims"); the CEL condition and the
 * `principal://…/subject/SUBJECT` member: Google's WorkloadIdentityPoolProvider reference; the
 * policy rules and wildcards (`*` any run, `?` zero or one character, `.` exactly one character):
 * Pulumi Cloud's "OIDC issuers" concepts page, where deny always wins over allow.
 */
import { type Dialect, ExpressionError, holds, type Value } from './expression';

/** The repository the workflows run in: names for reading, immutable ids for deciding. */
export interface Repository {
  readonly owner: string;
  readonly name: string;
  /** `repository_owner_id`: never reused, unlike a name that can be deleted and claimed again. */
  readonly ownerId: string;
  /** `repository_id`. */
  readonly id: string;
}

export const MAIN = 'refs/heads/main';
export const DEPLOY_WORKFLOW = '.github/workflows/deploy.yml';
export const PREVIEW_WORKFLOW = '.github/workflows/preview.yml';
/** The events deploy.yml runs on. */
export const DEPLOY_EVENTS = ['push', 'workflow_dispatch'] as const;

/** The only kind of run that may obtain an identity. */
export type Trust =
  | { readonly kind: 'pull-request' }
  | { readonly kind: 'environment'; readonly environment: string };

/** The identities the workflows use, keyed as in docs/deploy.md. */
export const IDENTITIES = {
  'pr-preview': { provider: 'dev', pulumi: true, trust: { kind: 'pull-request' } },
  image: { provider: 'image', pulumi: false, trust: { kind: 'environment', environment: 'image' } },
  'dev-deploy': { provider: 'dev', pulumi: true, trust: { kind: 'environment', environment: 'dev' } },
  'prod-preview': {
    provider: 'prod',
    pulumi: true,
    trust: { kind: 'environment', environment: 'prod-preview' },
  },
  'prod-deploy': { provider: 'prod', pulumi: true, trust: { kind: 'environment', environment: 'prod' } },
} as const satisfies Record<string, { provider: string; pulumi: boolean; trust: Trust }>;

export type Identity = keyof typeof IDENTITIES;
export type Provider = (typeof IDENTITIES)[Identity]['provider'];
export const PROVIDERS: readonly Provider[] = ['dev', 'prod', 'image'];

/** The `sub` GitHub issues for a run of this kind (default subject template). */
export function subjectOf(repo: Repository, trust: Trust): string {
  const base = `repo:${repo.owner}/${repo.name}`;
  return trust.kind === 'pull-request' ? `${base}:pull_request` : `${base}:environment:${trust.environment}`;
}

const q = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

/** The CEL clause that admits exactly one kind of run. */
function trustClause(repo: Repository, trust: Trust): string {
  const workflow = (file: string) => `${repo.owner}/${repo.name}/${file}@`;
  if (trust.kind === 'pull-request') {
    return [
      `assertion.event_name == 'pull_request'`,
      `assertion.sub == ${q(subjectOf(repo, trust))}`,
      `assertion.base_ref == 'main'`,
      `assertion.workflow_ref.startsWith(${q(workflow(PREVIEW_WORKFLOW))})`,
    ].join(' && ');
  }
  return [
    `assertion.event_name in [${DEPLOY_EVENTS.map(q).join(', ')}]`,
    `assertion.sub == ${q(subjectOf(repo, trust))}`,
    `assertion.environment == ${q(trust.environment)}`,
    `assertion.ref == ${q(MAIN)}`,
    `assertion.ref_type == 'branch'`,
    `assertion.workflow_ref == ${q(`${workflow(DEPLOY_WORKFLOW)}${MAIN}`)}`,
  ].join(' && ');
}

/** Google: the provider's attribute mapping and condition (CEL, at most 4096 characters). */
export function googleProvider(repo: Repository, provider: Provider) {
  const clauses = (Object.values(IDENTITIES) as { provider: string; trust: Trust }[])
    .filter((i) => i.provider === provider)
    .map((i) => `(${trustClause(repo, i.trust)})`);
  const attributeCondition = [
    `assertion.repository_owner_id == ${q(repo.ownerId)}`,
    `assertion.repository_id == ${q(repo.id)}`,
    clauses.length === 1 ? clauses[0]! : `(${clauses.join(' || ')})`,
  ].join(' && ');
  if (attributeCondition.length > 4096) {
    throw new Error(
      `the ${provider} provider's condition is ${attributeCondition.length} characters; Google takes 4096`,
    );
  }
  return { attributeMapping: { 'google.subject': 'assertion.sub' }, attributeCondition };
}

/** Where a provider lives: `projects/NUMBER/locations/global/workloadIdentityPools/POOL`. */
export interface Pool {
  /** The number of the project holding the pool (principal identifiers name it by number). */
  readonly projectNumber: string;
  readonly pool: string;
}

/**
 * Google: the one member granted `roles/iam.workloadIdentityUser` on an identity's service account.
 * It names the subject: the provider's condition has already refused every run but the one that
 * subject may come from, so the subject alone tells the identities apart. The pool holds docline's
 * provider only (a subject is a pool-wide name).
 */
export function googleMember(repo: Repository, pool: Pool, identity: Identity): string {
  const path = `projects/${pool.projectNumber}/locations/global/workloadIdentityPools/${pool.pool}`;
  return `principal://iam.googleapis.com/${path}/subject/${subjectOf(repo, IDENTITIES[identity].trust)}`;
}

/** One Pulumi Cloud authorization policy of the GitHub issuer. */
export interface PulumiPolicy {
  readonly decision: 'allow' | 'deny';
  readonly tokenType: 'team';
  readonly teamName: string;
  readonly rules: Readonly<Record<string, string>>;
}

/**
 * Pulumi Cloud: per team, one allow policy per event its run may come from, and deny policies for
 * pull-request events on the deploy and prod-preview teams (deny wins, whatever else matches).
 */
export function pulumiPolicies(
  repo: Repository,
  organization: string,
  teams: Readonly<Partial<Record<Identity, string>>>,
): PulumiPolicy[] {
  const policies: PulumiPolicy[] = [];
  for (const [identity, spec] of Object.entries(IDENTITIES) as [Identity, (typeof IDENTITIES)[Identity]][]) {
    if (!spec.pulumi) continue;
    const teamName = teams[identity];
    if (teamName === undefined) throw new Error(`no Pulumi team given for ${identity}`);
    const common = {
      aud: `urn:pulumi:org:${organization}`,
      repository_owner_id: repo.ownerId,
      repository_id: repo.id,
      sub: subjectOf(repo, spec.trust),
    };
    const trust: Trust = spec.trust;
    const policy = (decision: PulumiPolicy['decision'], rules: Record<string, string>): PulumiPolicy => ({
      decision,
      tokenType: 'team',
      teamName,
      rules,
    });
    if (trust.kind === 'pull-request') {
      const workflow = `${repo.owner}/${repo.name}/${PREVIEW_WORKFLOW}@refs/pull/*/merge`;
      policies.push(
        policy('allow', { ...common, event_name: 'pull_request', base_ref: 'main', workflow_ref: workflow }),
      );
      continue;
    }
    for (const event of DEPLOY_EVENTS) {
      policies.push(
        policy('allow', {
          ...common,
          event_name: event,
          environment: trust.environment,
          ref: MAIN,
          workflow_ref: `${repo.owner}/${repo.name}/${DEPLOY_WORKFLOW}@${MAIN}`,
        }),
      );
    }
    for (const event of ['pull_request', 'pull_request_target'])
      policies.push(policy('deny', { event_name: event }));
  }
  return policies;
}

/** Claims of a GitHub OIDC token, as the token carries them (strings). */
export type Claims = Readonly<Record<string, string>>;

const celFunctions = {
  startsWith: (s: Value, prefix: Value) =>
    typeof s === 'string' && typeof prefix === 'string' && s.startsWith(prefix),
};

/** Whether Google accepts a token: the condition must hold; an error (a missing claim) refuses it. */
export function googleAccepts(condition: string, claims: Claims): boolean {
  try {
    return holds(condition, { variables: { assertion: claims }, functions: celFunctions }, 'cel' as Dialect);
  } catch (e) {
    if (e instanceof ExpressionError) return false;
    throw e;
  }
}

/** Pulumi Cloud's claim wildcards: `*` any run of characters, `?` zero or one, `.` exactly one. */
export function pulumiPatternMatches(pattern: string, value: string): boolean {
  const re = [...pattern]
    .map((c) =>
      c === '*' ? '.*' : c === '?' ? '.?' : c === '.' ? '.' : c.replace(/[+^${}()|[\]\\/]/g, '\\$&'),
    )
    .join('');
  return new RegExp(`^${re}$`, 's').test(value);
}

/** Pulumi Cloud's decision for a team token request: deny wins, then any matching allow. */
export function pulumiAllows(policies: readonly PulumiPolicy[], claims: Claims, teamName: string): boolean {
  const matching = policies.filter(
    (p) =>
      p.teamName === teamName &&
      Object.entries(p.rules).every(
        ([claim, pattern]) => claims[claim] !== undefined && pulumiPatternMatches(pattern, claims[claim]!),
      ),
  );
  return !matching.some((p) => p.decision === 'deny') && matching.some((p) => p.decision === 'allow');
}
