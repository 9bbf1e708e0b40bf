/**
 * The worker is not publicly invokable. Pub/Sub reaches it with an OIDC token for the push
 * account; anyone else who can call /push can forge document events and spend analysis money.
 */
import type * as gcp from '@pulumi/gcp';
import type { ResourceValidationPolicy } from '@pulumi/policy';
import { iamGrants } from './iam';
import { configOf, peek, propsOf, stringListSchema } from './support';
import { TYPES } from './types';

/** IAM resources that grant access to a Cloud Run service. */
const RUN_IAM_TYPES: readonly string[] = [
  TYPES.runServiceIamMember,
  TYPES.runServiceIamBinding,
  TYPES.runServiceIamPolicy,
  TYPES.runV1IamMember,
  TYPES.runV1IamBinding,
  TYPES.runV1IamPolicy,
];

const workerNotPublicSchema = stringListSchema(
  'publicPrincipals',
  ['allUsers', 'allAuthenticatedUsers'],
  'Principals that make a service public.',
);

/** The worker service grants run.invoker to no public member (allUsers, allAuthenticatedUsers). */
export const workerNotPublic: ResourceValidationPolicy = {
  name: 'worker-not-public',
  description: 'The Cloud Run service is not publicly invokable (no allUsers/allAuthenticatedUsers grant).',
  enforcementLevel: 'mandatory',
  configSchema: workerNotPublicSchema,
  validateResource: (args, reportViolation) => {
    const { publicPrincipals } = configOf(workerNotPublicSchema, args);
    if (args.type === TYPES.runService) {
      // With invoker IAM disabled Cloud Run serves every caller without checking a token at all.
      const disabled = peek(() => propsOf<gcp.cloudrunv2.ServiceState>(args).invokerIamDisabled);
      if (!disabled.known || disabled.value === true) {
        reportViolation(
          `Service '${args.name}' sets invokerIamDisabled${disabled.known ? '' : ' from a value unknown until the update runs'}, which lets anyone invoke it. Remove invokerIamDisabled and grant roles/run.invoker to the push service account only.`,
        );
      }
      return;
    }
    if (!RUN_IAM_TYPES.includes(args.type)) return;
    for (const grant of iamGrants(args, args.type)) {
      const open = grant.members.filter((m): m is string => m !== undefined && publicPrincipals.includes(m));
      if (open.length > 0) {
        reportViolation(
          `'${args.name}' grants ${grant.role} on the worker service to ${open.join(', ')}, so anyone can call /push. Grant roles/run.invoker to the push subscription's service account only (member: serviceAccount:<push account email>).`,
        );
      }
    }
  },
};
