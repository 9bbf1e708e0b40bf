/**
 * Grants: the pipeline's service accounts get the narrowest grants that work. Owner/editor let a
 * leaked worker token rewrite the project; token creator on the whole project lets an account
 * impersonate every other account in it (the Pub/Sub agent needs it on the push account only).
 */
import type * as gcp from '@pulumi/gcp';
import type { ResourceValidationArgs, ResourceValidationPolicy } from '@pulumi/policy';
import { configOf, peek, propsOf, stringListSchema } from './support';

/** One role and the principals it is granted to, as a member, binding or policy resource says. */
export interface Grant {
  role: string;
  /** Principals; an entry is undefined when its value is unknown until the update runs. */
  members: Array<string | undefined>;
}

/** Whether a type token names an IAM member, binding or policy resource of any service. */
export function isIamType(type: string): boolean {
  return /(IAM|Iam)(Member|Binding|Policy)$/.test(type.split(':').pop() ?? '');
}

/** Whether a type token grants at project, folder or organization level (beyond one resource). */
export function isProjectWideIamType(type: string): boolean {
  const module = type.split(':')[1]?.split('/')[0];
  return isIamType(type) && (module === 'projects' || module === 'folder' || module === 'organizations');
}

/**
 * The grants an IAM resource makes. Roles and principals whose values are unknown during a preview
 * are left out or undefined: primitive roles and public principals are fixed strings in a program,
 * while unknown ones come from other resources' outputs (custom roles, created accounts).
 */
export function iamGrants(resource: { props: Record<string, unknown> }, type: string): Grant[] {
  // Every service's IAM resources share the project ones' property names (role, member, members, policyData).
  const props = propsOf<
    gcp.projects.IAMMemberState & gcp.projects.IAMBindingState & gcp.projects.IAMPolicyState
  >(resource);
  const kind = /(Member|Binding|Policy)$/.exec(type)?.[1];
  if (kind === 'Policy') {
    const data = peek(() => props.policyData);
    if (!data.known || typeof data.value !== 'string') return [];
    try {
      const policy = JSON.parse(data.value) as { bindings?: Array<{ role?: unknown; members?: unknown }> };
      return (policy.bindings ?? [])
        .filter((b) => typeof b.role === 'string')
        .map((b) => ({
          role: b.role as string,
          members: Array.isArray(b.members)
            ? b.members.map((m) => (typeof m === 'string' ? m : undefined))
            : [],
        }));
    } catch {
      return [];
    }
  }
  const role = peek(() => props.role);
  if (!role.known || typeof role.value !== 'string') return [];
  if (kind === 'Member') {
    const member = peek(() => props.member);
    return [
      {
        role: role.value,
        members: [member.known && typeof member.value === 'string' ? member.value : undefined],
      },
    ];
  }
  // Read member by member: one unknown principal must not hide a literal allUsers beside it.
  const count = peek(() => (Array.isArray(props.members) ? props.members.length : 0));
  const members: Array<string | undefined> = [];
  if (!count.known) members.push(undefined);
  for (let i = 0; count.known && i < count.value; i++) {
    const m = peek(() => (props.members as unknown[])[i]);
    members.push(m.known && typeof m.value === 'string' ? m.value : undefined);
  }
  return [{ role: role.value, members }];
}

function grantsOf(args: ResourceValidationArgs): Grant[] {
  return isIamType(args.type) ? iamGrants(args, args.type) : [];
}

const primitiveRolesSchema = stringListSchema(
  'forbiddenRoles',
  ['roles/owner', 'roles/editor'],
  'Basic (primitive) roles the stack may never grant.',
);

/** No owner/editor grant anywhere in the stack: a leaked token of the account could rewrite the project. */
export const noPrimitiveRoles: ResourceValidationPolicy = {
  name: 'no-primitive-roles',
  description: 'The stack grants no primitive roles (owner, editor).',
  enforcementLevel: 'mandatory',
  configSchema: primitiveRolesSchema,
  validateResource: (args, reportViolation) => {
    const { forbiddenRoles } = configOf(primitiveRolesSchema, args);
    for (const grant of grantsOf(args)) {
      if (forbiddenRoles.includes(grant.role)) {
        reportViolation(
          `'${args.name}' grants ${grant.role}${grant.members[0] ? ` to ${grant.members.filter(Boolean).join(', ')}` : ''}. Grant the narrow roles the account needs instead (the worker: roles/bigquery.dataEditor on the dataset, roles/bigquery.jobUser, roles/storage.objectViewer on the bucket).`,
        );
      }
    }
  },
};

const tokenCreatorSchema = stringListSchema(
  'tokenCreatorRoles',
  ['roles/iam.serviceAccountTokenCreator', 'roles/iam.serviceAccountOpenIdTokenCreator'],
  'Roles that let a principal mint tokens for service accounts.',
);

/** Token creator only on the one account that needs it, never project-wide, where it impersonates every account. */
export const noProjectWideTokenCreator: ResourceValidationPolicy = {
  name: 'no-project-wide-token-creator',
  description: 'Token-creator roles are granted on a single service account, never on the whole project.',
  enforcementLevel: 'mandatory',
  configSchema: tokenCreatorSchema,
  validateResource: (args, reportViolation) => {
    if (!isProjectWideIamType(args.type)) return;
    const { tokenCreatorRoles } = configOf(tokenCreatorSchema, args);
    for (const grant of grantsOf(args)) {
      if (tokenCreatorRoles.includes(grant.role)) {
        reportViolation(
          `'${args.name}' grants ${grant.role} on the whole project, which lets the principal impersonate every service account in it. Grant it on the push service account only, with gcp.serviceaccount.IAMMember { serviceAccountId: pushAccount.name, role: '${grant.role}', member: the Pub/Sub service agent }.`,
        );
      }
    }
  },
};
