import { add, type Mode, mutate, FIXTURE_TYPES as T, validStack } from './fixtures';
import { UNKNOWN } from './harness';
import { check, summary } from './run';

const MODES: Mode[] = ['update', 'preview'];

function grant(type: string, name: string, props: Record<string, unknown>) {
  return { type, name, props };
}

describe.each(MODES)('the service rule (%s)', (mode) => {
  it('reports an allUsers invoker on the worker', async () => {
    const stack = add(
      validStack(mode),
      grant(T.runIam, 'public', { name: 'worker', role: 'roles/run.invoker', member: 'allUsers' }),
    );
    const diagnostics = await check(stack);
    expect(summary(diagnostics)).toEqual(['worker-not-public @ public']);
    expect(diagnostics[0]?.message).toMatch(
      /grants roles\/run\.invoker on the worker service to allUsers.*push subscription's service account only/,
    );
  });

  it('reports allAuthenticatedUsers in an invoker binding', async () => {
    const stack = add(
      validStack(mode),
      grant('gcp:cloudrunv2/serviceIamBinding:ServiceIamBinding', 'binding', {
        name: 'worker',
        role: 'roles/run.invoker',
        members: [UNKNOWN, 'allAuthenticatedUsers'],
      }),
    );
    expect(summary(await check(stack))).toEqual(['worker-not-public @ binding']);
  });

  it('reports a public principal in a service IAM policy document', async () => {
    const policyData = JSON.stringify({ bindings: [{ role: 'roles/run.invoker', members: ['allUsers'] }] });
    const stack = add(
      validStack(mode),
      grant('gcp:cloudrunv2/serviceIamPolicy:ServiceIamPolicy', 'policy', { name: 'worker', policyData }),
    );
    expect(summary(await check(stack))).toEqual(['worker-not-public @ policy']);
  });

  it('reports a service with invoker IAM disabled', async () => {
    const stack = mutate(validStack(mode), 'worker', T.service, { props: { invokerIamDisabled: true } });
    const diagnostics = await check(stack);
    expect(summary(diagnostics)).toEqual(['worker-not-public @ worker']);
    expect(diagnostics[0]?.message).toMatch(/invokerIamDisabled/);
  });
});

describe.each(MODES)('the IAM rules (%s)', (mode) => {
  const member = mode === 'preview' ? UNKNOWN : 'serviceAccount:docline-worker@p.iam.gserviceaccount.com';

  it('report an editor grant on the project', async () => {
    const stack = add(
      validStack(mode),
      grant(T.projectIam, 'worker-editor', { project: 'p', role: 'roles/editor', member }),
    );
    const diagnostics = await check(stack);
    expect(summary(diagnostics)).toEqual(['no-primitive-roles @ worker-editor']);
    expect(diagnostics[0]?.message).toMatch(/grants roles\/editor.*narrow roles/);
  });

  it('report an owner grant on a single resource too', async () => {
    const stack = add(
      validStack(mode),
      grant('gcp:storage/bucketIAMMember:BucketIAMMember', 'bucket-owner', {
        bucket: 'b',
        role: 'roles/owner',
        member,
      }),
    );
    expect(summary(await check(stack))).toEqual(['no-primitive-roles @ bucket-owner']);
  });

  it('report token creator granted on the whole project', async () => {
    const stack = add(
      validStack(mode),
      grant(T.projectIam, 'agent-token-creator', {
        project: 'p',
        role: 'roles/iam.serviceAccountTokenCreator',
        member,
      }),
    );
    const diagnostics = await check(stack);
    expect(summary(diagnostics)).toEqual(['no-project-wide-token-creator @ agent-token-creator']);
    expect(diagnostics[0]?.message).toMatch(/on the whole project.*gcp\.serviceaccount\.IAMMember/);
  });

  it('report token creator in a project binding', async () => {
    const stack = add(
      validStack(mode),
      grant('gcp:projects/iAMBinding:IAMBinding', 'creators', {
        project: 'p',
        role: 'roles/iam.serviceAccountTokenCreator',
        members: [member],
      }),
    );
    expect(summary(await check(stack))).toEqual(['no-project-wide-token-creator @ creators']);
  });

  it('allow token creator on the push service account alone (the shipped stack grants it)', async () => {
    const shipped = validStack(mode).filter((r) => r.type === T.accountIam);
    expect(shipped.map((r) => r.props.role)).toEqual(['roles/iam.serviceAccountTokenCreator']);
    expect(await check(validStack(mode))).toEqual([]);
  });
});
