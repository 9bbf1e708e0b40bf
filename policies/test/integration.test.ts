/**
 * The pack against the real infra program: the program runs under Pulumi's mocks (infra's harness),
 * every registered resource is captured with its inputs, URN and dependencies, and the captured
 * stack goes through the pack's resource and stack validations the way the engine sends them, in
 * update mode (outputs known) and in a first preview (computed outputs unknown).
 */
import { type CapturedResource, type ProgramRun, runStack } from '../../infra/test/harness';
import { TYPES } from '../rules/types';
import { type StackResource, UNKNOWN, urnOf } from './harness';
import { check, summary } from './run';

type Mode = 'update' | 'preview';

/**
 * What the engine hands a policy pack: in an update, each resource's state (inputs plus the
 * provider's outputs); in a preview, the inputs in wire form, with the unknown sentinel where a value
 * comes from an output that does not exist yet.
 */
function asPolicyResources(run: ProgramRun): StackResource[] {
  return run.resources.map((r: CapturedResource) => ({
    type: r.type,
    name: r.name,
    urn: r.urn,
    props: run.preview ? r.rawInputs : { ...r.rawInputs, ...r.outputs },
    ...(r.parent ? { parent: r.parent } : {}),
    dependencies: [...r.dependencies],
    propertyDependencies: Object.fromEntries(
      Object.entries(r.propertyDependencies).map(([k, v]) => [k, [...v]]),
    ),
    options: { protect: r.options.protect, deleteBeforeReplace: r.options.deleteBeforeReplace },
  }));
}

function only(stack: StackResource[], type: string): StackResource & { urn: string } {
  const found = stack.filter((r) => r.type === type && (type !== TYPES.subscription || r.props.pushConfig));
  if (found.length !== 1 || !found[0]) throw new Error(`expected one ${type}, found ${found.length}`);
  return { ...found[0], urn: urnOf(found[0]) };
}

const runs = new Map<Mode, StackResource[]>();

beforeAll(async () => {
  // Program runs share Pulumi's per-process runtime state, so they run one after the other.
  for (const mode of ['update', 'preview'] as const) {
    runs.set(mode, asPolicyResources(await runStack('dev', {}, { preview: mode === 'preview' })));
  }
});

describe.each(['update', 'preview'] as const)('the policy pack on the shipped stack (%s)', (mode) => {
  const stack = () => runs.get(mode) ?? [];

  it('captures the resources every rule looks at', () => {
    const types = new Set(stack().map((r) => r.type));
    expect(
      [
        TYPES.bucket,
        TYPES.notification,
        TYPES.topic,
        TYPES.subscription,
        TYPES.table,
        TYPES.runService,
        TYPES.runServiceIamMember,
      ].filter((t) => !types.has(t)),
    ).toEqual([]);
  });

  it('finds no violation at all', async () => {
    expect(summary(await check(stack()))).toEqual([]);
  });

  it('reports a second notification on the same bucket, exactly once', async () => {
    const notification = only(stack(), TYPES.notification);
    const second = {
      ...structuredClone(notification),
      name: `${notification.name}-2`,
      urn: `${notification.urn}-2`,
    };
    const diagnostics = await check([...stack(), second]);
    expect(summary(diagnostics)).toEqual([`one-notification-per-bucket @ ${second.name}`]);
  });

  it('reports a public invoker on the worker, exactly once', async () => {
    const service = only(stack(), TYPES.runService);
    const invoker = only(stack(), TYPES.runServiceIamMember);
    const open = {
      ...structuredClone(invoker),
      name: 'public-invoker',
      urn: `${invoker.urn.replace(/::[^:]+$/, '')}::public-invoker`,
      props: { ...invoker.props, member: 'allUsers' },
      propertyDependencies: { name: [service.urn] },
    };
    const diagnostics = await check([...stack(), open]);
    expect(summary(diagnostics)).toEqual(['worker-not-public @ public-invoker']);
  });

  it('reports a push subscription without a dead-letter policy, exactly once', async () => {
    const push = only(stack(), TYPES.subscription);
    const { deadLetterPolicy: _, ...props } = push.props;
    const { deadLetterPolicy: __, ...propertyDependencies } = push.propertyDependencies ?? {};
    const mutated = stack().map((r) =>
      urnOf(r) === push.urn ? { ...push, props, propertyDependencies } : r,
    );
    const diagnostics = await check(mutated);
    expect(summary(diagnostics)).toEqual([`push-subscription-delivery @ ${push.name}`]);
  });
});

describe.each(['update', 'preview'] as const)(
  'the shipped stack plus one notification on the memo bucket (%s)',
  (mode) => {
    it('is refused: only the documents bucket feeds the pipeline', async () => {
      const stack = runs.get(mode) ?? [];
      const memo = stack.find((r) => r.type === TYPES.bucket && r.name.endsWith('-memo-bucket'));
      const notification = only(stack, TYPES.notification);
      expect(memo).toBeDefined();
      const memoUrn = urnOf(memo!);
      const onMemo = {
        ...notification,
        name: 'memo-events',
        urn: notification.urn.replace(/::[^:]+$/, '::memo-events'),
        props: { ...notification.props, bucket: memo!.props.name },
        dependencies: [memoUrn],
        propertyDependencies: { ...notification.propertyDependencies, bucket: [memoUrn] },
      };
      expect(summary(await check([...stack, onMemo]))).toEqual([
        'only-documents-bucket-notifies @ memo-events',
      ]);
    });
  },
);

describe('the captured first preview', () => {
  it('leaves the bucket name unknown, so only the dependency can tell the notification\u2019s bucket', () => {
    const notification = only(runs.get('preview') ?? [], TYPES.notification);
    // The documents bucket is auto-named; the memo bucket has a given name.
    const bucket = (runs.get('preview') ?? []).find(
      (r) => r.type === TYPES.bucket && r.name.endsWith('-documents-bucket'),
    );
    expect(bucket).toBeDefined();
    expect(notification.props.bucket).toBe(UNKNOWN);
    expect(notification.propertyDependencies?.bucket).toEqual([urnOf(bucket!)]);
  });
});

describe('the prod stack file, which keeps its data', () => {
  it('passes with its data protected, and is refused when the program stops protecting it', async () => {
    const prod = asPolicyResources(await runStack('prod'));
    expect(summary(await check(prod))).toEqual([]);

    const unprotected = prod.map((r) => ({ ...r, options: { ...r.options, protect: false } }));
    expect(summary(await check(unprotected)).sort()).toEqual([
      'kept-data-protected @ docline-prod-documents-bucket',
      'kept-data-protected @ docline-prod-warehouse-corrections',
      'kept-data-protected @ docline-prod-warehouse-dataset',
      'kept-data-protected @ docline-prod-warehouse-table',
    ]);
  });
});
