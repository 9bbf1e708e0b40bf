import * as gcp from '@pulumi/gcp';
import type { StackValidationPolicy } from '@pulumi/policy';
import { TYPES } from '../rules/types';
import { FIXTURE_TYPES as T, validStack } from './fixtures';
import { analyzeStack, type StackResource, UNKNOWN } from './harness';

/** The rule this pack must not be: duplicates keyed on the bucket's *name*. */
const keyedOnNames: StackValidationPolicy = {
  name: 'keyed-on-names',
  description: 'naive duplicate check',
  enforcementLevel: 'mandatory',
  validateStack: (args, reportViolation) => {
    const seen = new Set<string>();
    for (const r of args.resources.filter((x) => x.type === T.notification)) {
      const bucket = String(r.props.bucket);
      if (seen.has(bucket)) reportViolation('duplicate', r.urn);
      seen.add(bucket);
    }
  },
};

function twoNotifications(bucket: string): StackResource[] {
  const stack = validStack('update').filter((r) => r.type !== T.notification);
  const notification = (name: string) => ({
    type: T.notification,
    name,
    props: { bucket, eventTypes: ['OBJECT_FINALIZE'] },
  });
  return [...stack, notification('a'), notification('b')];
}

describe('the policy harness', () => {
  it('lets a policy read known values', async () => {
    const diagnostics = await analyzeStack(twoNotifications('documents-1'), { policies: [keyedOnNames] });
    expect(diagnostics.map((d) => [d.policyName, d.enforcementLevel, d.message])).toEqual([
      ['keyed-on-names', 'mandatory', 'duplicate'],
    ]);
  });

  it('skips a policy that reads an unknown value with an advisory warning, as the engine does in a preview', async () => {
    const diagnostics = await analyzeStack(twoNotifications(UNKNOWN), { policies: [keyedOnNames] });
    expect(diagnostics.map((d) => d.enforcementLevel)).toEqual(['advisory']);
    expect(diagnostics[0]?.message).toMatch(/can't run policy 'keyed-on-names'.*during preview/);
  });

  it('hands each policy the configuration given for it', async () => {
    const configured: StackValidationPolicy = {
      name: 'configured',
      description: 'echoes its config',
      validateStack: (args, reportViolation) => reportViolation(JSON.stringify(args.getConfig())),
    };
    const diagnostics = await analyzeStack([], {
      policies: [configured],
      config: { configured: { limit: 3 } },
    });
    expect(diagnostics.map((d) => d.message)).toEqual(['{"limit":3}']);
  });
});

describe('the pack type tokens', () => {
  it('name the @pulumi/gcp resource classes they stand for', () => {
    const token = (c: unknown) => (c as { __pulumiType: string }).__pulumiType;
    expect(TYPES).toEqual({
      bucket: token(gcp.storage.Bucket),
      notification: token(gcp.storage.Notification),
      topic: token(gcp.pubsub.Topic),
      subscription: token(gcp.pubsub.Subscription),
      table: token(gcp.bigquery.Table),
      dataset: token(gcp.bigquery.Dataset),
      runService: token(gcp.cloudrunv2.Service),
      runServiceIamMember: token(gcp.cloudrunv2.ServiceIamMember),
      runServiceIamBinding: token(gcp.cloudrunv2.ServiceIamBinding),
      runServiceIamPolicy: token(gcp.cloudrunv2.ServiceIamPolicy),
      runV1Service: token(gcp.cloudrun.Service),
      runV1IamMember: token(gcp.cloudrun.IamMember),
      runV1IamBinding: token(gcp.cloudrun.IamBinding),
      runV1IamPolicy: token(gcp.cloudrun.IamPolicy),
      projectIamMember: token(gcp.projects.IAMMember),
      projectIamBinding: token(gcp.projects.IAMBinding),
      projectIamPolicy: token(gcp.projects.IAMPolicy),
    });
  });
});
