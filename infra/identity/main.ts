/**
 * Prints the workload identity conditions docline's delivery relies on, for one repository and its
 * projects, as the commands and the policy document an administrator applies once (and re-applies
 * after a change here, reviewed like any change to infra/), then checks them on every run of
 * scenarios.ts and exits non-zero on a gap:
 *
 *   node --import tsx infra/identity/main.ts SETTINGS.json            # print, and check what it prints
 *   node --import tsx infra/identity/main.ts SETTINGS.json CLAIMS.json # which identities a token reaches
 *
 * SETTINGS.json (infra/identity/example.json has the shape): the repository's owner, name and numeric
 * ids (`gh api repos/OWNER/REPO --jq '{id, owner: .owner.id}'`), the Pulumi organization and teams,
 * and per provider (dev, prod, image) the project number, pool and provider ids and the service
 * accounts. CLAIMS.json: the decoded payload of a job's OIDC token.
 */
import { readFileSync } from 'node:fs';
import { googleReach, pulumiReach, type TrustConfig, trustProblems } from './scenarios';
import {
  type Claims,
  googleMember,
  googleProvider,
  IDENTITIES,
  type Identity,
  type Pool,
  PROVIDERS,
  type Provider,
  pulumiPolicies,
  type Repository,
} from './trust';

/** What an administrator fills in once per repository. */
export interface IdentitySettings {
  readonly repository: Repository;
  readonly pulumiOrganization: string;
  readonly pulumiTeams: Readonly<Partial<Record<Identity, string>>>;
  readonly providers: Readonly<
    Record<Provider, Pool & { readonly projectId: string; readonly provider: string }>
  >;
  readonly serviceAccounts: Readonly<Record<Identity, string>>;
}

/** The trust configuration these settings give. */
export function configOf(settings: IdentitySettings): TrustConfig {
  const { repository } = settings;
  const googleConditions = Object.fromEntries(
    PROVIDERS.map((p) => [p, googleProvider(repository, p).attributeCondition]),
  ) as Record<Provider, string>;
  const googleMembers = Object.fromEntries(
    (Object.keys(IDENTITIES) as Identity[]).map((i) => [
      i,
      [googleMember(repository, settings.providers[IDENTITIES[i].provider], i)],
    ]),
  ) as Record<Identity, string[]>;
  return {
    repository,
    pulumiOrganization: settings.pulumiOrganization,
    googleConditions,
    googleMembers,
    pulumiPolicies: pulumiPolicies(repository, settings.pulumiOrganization, settings.pulumiTeams),
    pulumiTeams: settings.pulumiTeams,
  };
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** The gcloud commands that apply the Google side, and the Pulumi Cloud policy document. */
export function render(settings: IdentitySettings): string {
  const { repository } = settings;
  const lines: string[] = ['# Google Cloud: each provider accepts only the runs it serves.'];
  for (const p of PROVIDERS) {
    const where = settings.providers[p];
    const { attributeMapping, attributeCondition } = googleProvider(repository, p);
    lines.push(
      `gcloud iam workload-identity-pools providers update-oidc ${where.provider} --project=${where.projectId} \\`,
      `  --location=global --workload-identity-pool=${where.pool} \\`,
      `  --attribute-mapping=${shellQuote(
        Object.entries(attributeMapping)
          .map(([k, v]) => `${k}=${v}`)
          .join(','),
      )} \\`,
      `  --attribute-condition=${shellQuote(attributeCondition)}`,
    );
  }
  lines.push('', '# Each service account may be impersonated by the one subject its provider admits.');
  for (const i of Object.keys(IDENTITIES) as Identity[]) {
    const where = settings.providers[IDENTITIES[i].provider];
    lines.push(
      `gcloud iam service-accounts add-iam-policy-binding ${settings.serviceAccounts[i]} \\`,
      `  --role=roles/iam.workloadIdentityUser --member=${shellQuote(googleMember(repository, where, i))}`,
    );
  }
  lines.push(
    '',
    '# Pulumi Cloud, Settings -> Access Management -> OIDC Issuers -> the GitHub issuer: these policies',
    '# (the OidcIssuer resource of the Pulumi Service provider and the REST API take the same list).',
    JSON.stringify(
      { policies: pulumiPolicies(repository, settings.pulumiOrganization, settings.pulumiTeams) },
      null,
      2,
    ),
  );
  return lines.join('\n');
}

function main(argv: readonly string[]): number {
  const [settingsPath, claimsPath] = argv;
  if (settingsPath === undefined) {
    process.stderr.write('usage: main.ts SETTINGS.json [CLAIMS.json]\n');
    return 2;
  }
  const settings = JSON.parse(readFileSync(settingsPath, 'utf8')) as IdentitySettings;
  const config = configOf(settings);
  if (claimsPath !== undefined) {
    const claims = JSON.parse(readFileSync(claimsPath, 'utf8')) as Claims;
    process.stdout.write(
      `${JSON.stringify({ google: googleReach(config, claims), pulumi: pulumiReach(config, claims) })}\n`,
    );
    return 0;
  }
  process.stdout.write(`${render(settings)}\n`);
  const problems = trustProblems(config);
  for (const p of problems) process.stderr.write(`trust gap: ${p}\n`);
  return problems.length === 0 ? 0 : 1;
}

if (require.main === module) process.exitCode = main(process.argv.slice(2));
