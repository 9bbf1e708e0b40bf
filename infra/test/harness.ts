import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as pulumi from '@pulumi/pulumi';

import docline = require('../index');

import {
  computedOutputs,
  invokeResult,
  MOCK_PROJECT_NUMBER,
  MOCK_STORAGE_AGENT,
} from './support/computed-outputs';

export { MOCK_PROJECT_NUMBER, MOCK_STORAGE_AGENT };

/**
 * Runs the real docline Pulumi program under Pulumi's mocks, without the CLI or any provider, and
 * captures every resource it registers: type, name, URN, parent, inputs, the outputs the mocks
 * gave it, and its dependencies (all of them, and per input property).
 *
 * How the dependencies are obtained: `Mocks.newResource` only sees the resolved inputs, but the mock
 * monitor's `registerResource(request, callback)` receives the full RegisterResourceRequest. The
 * harness wraps that method on the monitor `setMocks` installed and reads `getDependenciesList()`,
 * `getPropertydependenciesMap()` and `getParent()` from the request, then the URN from the response.
 * This relies on @pulumi/pulumi's MockMonitor shape (checked with 3.276); the wrapper fails loudly
 * if the method is missing.
 *
 * Preview mode (`preview: true`) models a first `pulumi preview`: the mocks answer with the inputs
 * only, so every computed output (a bucket's name, a service's URL, an account's email) stays
 * unknown, as it does before anything exists. `rawInputs` then holds Pulumi's unknown sentinel
 * (`UNKNOWN`) where a value is unknown, and `inputs` holds `undefined` there.
 */

/** The project name from Pulumi.yaml; config keys are `docline:*`. */
export const PROJECT_NAME = 'docline';

/** Pulumi's wire sentinel for an unknown value (`pulumi.runtime.unknownValue`). */
export const UNKNOWN = pulumi.runtime.unknownValue;

const REPO_ROOT = join(__dirname, '..', '..');

/** The resource options the engine acts on in a replacement or a destroy, as registered. */
export interface CapturedOptions {
  readonly protect: boolean;
  readonly deleteBeforeReplace: boolean;
  readonly retainOnDelete: boolean;
  readonly ignoreChanges: readonly string[];
  readonly replaceOnChanges: readonly string[];
  /** The URNs its aliases name, resolved the way the engine resolves an alias spec. */
  readonly aliases: readonly string[];
}

/** One resource the program registered. */
export interface CapturedResource {
  /** Type token, e.g. `gcp:storage/bucket:Bucket` or `docline:index:DocumentBucket`. */
  readonly type: string;
  /** Logical name. */
  readonly name: string;
  readonly urn: string;
  /** True for provider-managed resources, false for components (and the stack). */
  readonly custom: boolean;
  /** URN of the parent resource (the stack or a component). */
  readonly parent: string | undefined;
  /** Inputs as the provider would receive them; unknown values are `undefined`. */
  readonly inputs: Record<string, unknown>;
  /** Inputs in wire form; unknown values are {@link UNKNOWN}. Feed this to code that must see unknowns. */
  readonly rawInputs: Record<string, unknown>;
  /** What the mocks answered (empty for components). */
  readonly outputs: Record<string, unknown>;
  /** URNs of every resource this one depends on (explicit `dependsOn` and through its inputs). */
  readonly dependencies: readonly string[];
  /** URNs each input property depends on. */
  readonly propertyDependencies: Readonly<Record<string, readonly string[]>>;
  /** Its resource options (protect, deleteBeforeReplace, retainOnDelete, …). */
  readonly options: CapturedOptions;
  /** The provider reference it was registered with (`URN::ID`), empty for the default provider. */
  readonly provider: string;
}

/** One provider function call (invoke) the program made. */
export interface CapturedInvoke {
  readonly token: string;
  /**
   * URNs of the resources whose registration had completed when the call was made. An invoke with
   * `dependsOn` waits for those registrations, so they are always in here; one without may run first.
   */
  readonly registeredBefore: readonly string[];
}

/** What one run of the program produced. */
export interface ProgramRun {
  readonly resources: readonly CapturedResource[];
  readonly invokes: readonly CapturedInvoke[];
  /** The stack outputs, resolved (unknown ones are `undefined`). */
  readonly outputs: Record<string, unknown>;
  readonly preview: boolean;
}

/** Options of {@link runProgram}. */
export interface RunOptions {
  /** Run as a first `pulumi preview` (computed outputs unknown). Default false (an update). */
  preview?: boolean;
  /** Stack name. Default `dev`. */
  stack?: string;
  /**
   * The outputs of the stack's last `up`, as its reference to itself reads them. Default: a stack
   * deployed before `deployedSettings` existed, running {@link MOCK_DEPLOYED_IMAGE}; `{}`: never deployed.
   */
  deployed?: Record<string, unknown>;
  /**
   * Buckets that exist in the cloud, by name, as `gcp.storage.getBucket` reads them (labels and
   * location); any other name is not found. Default none.
   */
  buckets?: Record<string, { location: string; labels: Record<string, string> }>;
  /** Another program to run instead of docline (a component alone); default the docline program. */
  program?: () => Promise<Record<string, unknown>>;
}

/** The resources a failed run had registered before its error: attached to the error it throws. */
export const REGISTERED_BEFORE_FAILURE = Symbol('registeredBeforeFailure');

/** The image the mocked last `up` deployed (what a promoted-image stack keeps running). */
export const MOCK_DEPLOYED_IMAGE = `europe-west1-docker.pkg.dev/p/docline-images/worker@sha256:${'cd'.repeat(32)}`;

interface MonitorLike {
  registerResource(
    request: RegisterRequest,
    callback: (err: unknown, response: RegisterResponse) => void,
  ): unknown;
}
interface RegisterRequest {
  getType(): string;
  getName(): string;
  getParent(): string;
  getCustom(): boolean;
  getObject(): { toJavaScript(): Record<string, unknown> } | undefined;
  getDependenciesList(): string[];
  getProtect(): boolean | undefined;
  getDeletebeforereplace(): boolean;
  getRetainondelete(): boolean | undefined;
  getIgnorechangesList(): string[];
  getReplaceonchangesList(): string[];
  getAliasesList(): AliasProto[];
  getProvider(): string;
  getPropertydependenciesMap(): {
    forEach(fn: (value: { getUrnsList(): string[] }, key: string) => void): void;
  };
}
interface AliasProto {
  getUrn(): string;
  getSpec():
    | {
        getName(): string;
        getType(): string;
        getStack(): string;
        getProject(): string;
        getParenturn(): string;
        getNoparent(): boolean;
      }
    | undefined;
}

/**
 * The URN an alias names, resolved as the engine does: what the spec leaves empty is the
 * resource's own (name, type, stack, project, parent); a parent that is the stack adds no type.
 */
function aliasUrn(alias: AliasProto, own: { name: string; type: string; parent: string }): string {
  const spec = alias.getSpec();
  if (spec === undefined) return alias.getUrn();
  const [, stackPart, projectPart] = /^urn:pulumi:([^:]*)::([^:]*)::/.exec(own.parent) ?? [];
  const stack = spec.getStack() || stackPart || '';
  const project = spec.getProject() || projectPart || '';
  const parent = spec.getNoparent() ? '' : spec.getParenturn() || own.parent;
  const parentType = parent === '' ? '' : (parent.split('::')[2] ?? '');
  const chain = parentType === '' || parentType === 'pulumi:pulumi:Stack' ? '' : `${parentType}$`;
  return `urn:pulumi:${stack}::${project}::${chain}${spec.getType() || own.type}::${spec.getName() || own.name}`;
}

interface RegisterResponse {
  getUrn(): string;
  getObject(): { toJavaScript(): Record<string, unknown> } | undefined;
}

/**
 * Runs the program once under mocks with the given config (full keys: `gcp:project`,
 * `docline:image`, …; lists as JSON strings, as the CLI passes them) and returns what it registered.
 * Runs are sequential: Pulumi's runtime state is per process, so do not start two at once.
 */
export async function runProgram(
  config: Record<string, string>,
  options: RunOptions = {},
): Promise<ProgramRun> {
  const preview = options.preview ?? false;
  const stack = options.stack ?? 'dev';
  const project = config['gcp:project'] ?? 'project';
  const invokes: CapturedInvoke[] = [];
  const resources: CapturedResource[] = [];
  const registered: string[] = [];

  await pulumi.runtime.setMocks(
    {
      newResource(args) {
        // The stack's reference to itself (infra/stack-guards.ts) reads its last outputs.
        if (args.type === 'pulumi:pulumi:StackReference') {
          return {
            id: String(args.inputs.name),
            state: {
              name: args.inputs.name,
              outputs: options.deployed ?? { image: MOCK_DEPLOYED_IMAGE },
              secretOutputNames: [],
            },
          };
        }
        const computed = preview ? {} : computedOutputs(args.type, args.name, args.inputs, project);
        const state = { ...args.inputs, ...computed };
        // A provider id where the type has a meaningful one (a topic's id is its full path).
        const id = preview ? undefined : typeof computed.id === 'string' ? computed.id : `${args.name}-id`;
        return { id, state };
      },
      call(args) {
        if (args.token === 'gcp:storage/getBucket:getBucket') {
          const bucket = options.buckets?.[String(args.inputs.name)];
          // What the provider answers for a bucket that does not exist.
          if (bucket === undefined)
            throw new Error(`googleapi: Error 404: The specified bucket does not exist.`);
          invokes.push({ token: args.token, registeredBefore: [...registered] });
          return { name: args.inputs.name, ...bucket };
        }
        const result = invokeResult(args.token, args.inputs, project);
        invokes.push({ token: args.token, registeredBefore: [...registered] });
        return result;
      },
    },
    PROJECT_NAME,
    stack,
    preview,
    // The CLI's organization for a self-managed backend (Pulumi Cloud passes the real one).
    'organization',
  );
  const monitor = pulumi.runtime.getMonitor() as unknown as MonitorLike | undefined;
  if (monitor === undefined || typeof monitor.registerResource !== 'function') {
    throw new Error(
      'the Pulumi mock monitor has no registerResource(); the harness needs updating for this SDK',
    );
  }
  const register = monitor.registerResource.bind(monitor);
  monitor.registerResource = (request, callback) =>
    register(request, (err, response) => {
      if (!err) {
        const urn = response.getUrn();
        registered.push(urn);
        const propertyDependencies: Record<string, string[]> = {};
        request.getPropertydependenciesMap().forEach((value, key) => {
          propertyDependencies[key] = value.getUrnsList();
        });
        const rawInputs = request.getObject()?.toJavaScript() ?? {};
        const rawOutputs = response.getObject()?.toJavaScript() ?? {};
        resources.push({
          type: request.getType(),
          name: request.getName(),
          urn,
          custom: request.getCustom(),
          parent: request.getParent() || undefined,
          inputs: withoutUnknowns(rawInputs) as Record<string, unknown>,
          rawInputs,
          outputs: withoutUnknowns(rawOutputs) as Record<string, unknown>,
          dependencies: request.getDependenciesList(),
          propertyDependencies,
          provider: request.getProvider(),
          options: {
            protect: request.getProtect() ?? false,
            deleteBeforeReplace: request.getDeletebeforereplace(),
            retainOnDelete: request.getRetainondelete() ?? false,
            ignoreChanges: request.getIgnorechangesList(),
            replaceOnChanges: request.getReplaceonchangesList(),
            aliases: request.getAliasesList().map((alias) =>
              aliasUrn(alias, {
                name: request.getName(),
                type: request.getType(),
                parent: request.getParent(),
              }),
            ),
          },
        });
      }
      callback(err, response);
    });

  pulumi.runtime.setAllConfig(config);
  // An error thrown inside the stack's init would surface as an unhandled rejection (it is how the
  // CLI reports it), so the program's own error is caught here and rethrown after the run.
  let failure: { error: unknown } | undefined;
  const outputs = (await pulumi.runtime.runInPulumiStack(async () => {
    try {
      // The program is a function that reads its config when called, so one loaded module serves every run.
      return await (options.program ?? docline)();
    } catch (error) {
      failure = { error };
      return {};
    }
  })) as Record<string, unknown> | undefined;
  // Registrations still in flight finish before the run counts as done.
  await pulumi.runtime.disconnect();
  const registeredResources = resources.filter((r) => r.type !== 'pulumi:pulumi:Stack');
  if (failure !== undefined) {
    if (failure.error !== null && typeof failure.error === 'object') {
      Object.defineProperty(failure.error, REGISTERED_BEFORE_FAILURE, { value: registeredResources });
    }
    throw failure.error;
  }
  return {
    resources: registeredResources,
    invokes,
    outputs: outputs ?? {},
    preview,
  };
}

/** {@link runProgram} with the config of a stack file (see {@link stackConfig}), as that stack. */
export function runStack(
  stack: string,
  overrides: Record<string, string> = {},
  options: Omit<RunOptions, 'stack'> = {},
): Promise<ProgramRun> {
  return runProgram(stackConfig(stack, overrides), { ...options, stack });
}

/** The error a run that must fail throws, with what it registered before; a run that succeeds fails the test. */
export async function failure(
  attempt: Promise<unknown>,
): Promise<Error & { [REGISTERED_BEFORE_FAILURE]?: unknown[] }> {
  try {
    await attempt;
  } catch (error) {
    return error as Error;
  }
  throw new Error('the run was expected to fail');
}

/** Replaces Pulumi's unknown sentinel by `undefined`, recursively. */
function withoutUnknowns(value: unknown): unknown {
  if (value === UNKNOWN) return undefined;
  if (Array.isArray(value)) return value.map(withoutUnknowns);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withoutUnknowns(v)]));
  }
  return value;
}

/**
 * The config of a stack file (`Pulumi.<stack>.yaml`) in the form {@link runProgram} takes, with
 * lists and objects JSON-encoded as the CLI does. `overrides` replace or add keys.
 */
export function stackConfig(stack: string, overrides: Record<string, string> = {}): Record<string, string> {
  // js-yaml comes with jest and @pulumi/pulumi; the harness only needs `load`.
  const { load } = require('js-yaml') as { load(text: string): unknown };
  const file = load(readFileSync(join(REPO_ROOT, `Pulumi.${stack}.yaml`), 'utf8')) as {
    config?: Record<string, unknown>;
  };
  const config: Record<string, string> = {};
  for (const [key, value] of Object.entries(file.config ?? {})) {
    config[key] = typeof value === 'string' ? value : JSON.stringify(value);
  }
  return { ...config, ...overrides };
}

/** Type tokens of the resources the tests look at. */
export const T = {
  api: 'gcp:projects/service:Service',
  identity: 'gcp:projects/serviceIdentity:ServiceIdentity',
  projectIam: 'gcp:projects/iAMMember:IAMMember',
  account: 'gcp:serviceaccount/account:Account',
  accountIam: 'gcp:serviceaccount/iAMMember:IAMMember',
  bucket: 'gcp:storage/bucket:Bucket',
  bucketIam: 'gcp:storage/bucketIAMMember:BucketIAMMember',
  notification: 'gcp:storage/notification:Notification',
  topic: 'gcp:pubsub/topic:Topic',
  topicIam: 'gcp:pubsub/topicIAMMember:TopicIAMMember',
  subscription: 'gcp:pubsub/subscription:Subscription',
  subscriptionIam: 'gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember',
  dataset: 'gcp:bigquery/dataset:Dataset',
  datasetIam: 'gcp:bigquery/datasetIamMember:DatasetIamMember',
  table: 'gcp:bigquery/table:Table',
  transfer: 'gcp:bigquery/dataTransferConfig:DataTransferConfig',
  run: 'gcp:cloudrunv2/service:Service',
  runIam: 'gcp:cloudrunv2/serviceIamMember:ServiceIamMember',
  job: 'gcp:cloudrunv2/job:Job',
  jobIam: 'gcp:cloudrunv2/jobIamMember:JobIamMember',
  scheduler: 'gcp:cloudscheduler/job:Job',
  image: 'docker-build:index:Image',
  repository: 'gcp:artifactregistry/repository:Repository',
  repositoryIam: 'gcp:artifactregistry/repositoryIamMember:RepositoryIamMember',
  sleep: 'time:index/sleep:Sleep',
  metric: 'gcp:logging/metric:Metric',
  alert: 'gcp:monitoring/alertPolicy:AlertPolicy',
  dashboard: 'gcp:monitoring/dashboard:Dashboard',
  budget: 'gcp:billing/budget:Budget',
  logBucket: 'gcp:logging/projectBucketConfig:ProjectBucketConfig',
  sink: 'gcp:logging/projectSink:ProjectSink',
  exclusion: 'gcp:logging/projectExclusion:ProjectExclusion',
};

/** Resources of one type. */
export function ofType(run: ProgramRun, type: string): CapturedResource[] {
  return run.resources.filter((r) => r.type === type);
}

/** The one resource of a type whose logical name ends with `suffix`; throws if there is not exactly one. */
export function one(run: ProgramRun, type: string, suffix = ''): CapturedResource {
  const found = ofType(run, type).filter((r) => r.name.endsWith(suffix));
  if (found.length !== 1) {
    throw new Error(
      `expected one ${type} named *${suffix}, found ${found.length}: ${found.map((r) => r.name).join(', ')}`,
    );
  }
  return found[0]!;
}

/** Everything `resource` waits for, transitively, with components expanded to their descendants. */
export function waitsFor(run: ProgramRun, resource: CapturedResource): Set<string> {
  const byUrn = new Map(run.resources.map((r) => [r.urn, r]));
  const childrenOf = (urn: string) => run.resources.filter((r) => r.parent === urn).map((r) => r.urn);
  const seen = new Set<string>();
  const direct = (r: CapturedResource) => [
    ...r.dependencies,
    ...Object.values(r.propertyDependencies).flat(),
  ];
  const queue = [...direct(resource)];
  while (queue.length > 0) {
    const urn = queue.pop()!;
    if (seen.has(urn)) continue;
    seen.add(urn);
    const dep = byUrn.get(urn);
    if (dep === undefined) continue;
    queue.push(...direct(dep));
    if (!dep.custom) queue.push(...childrenOf(urn));
  }
  return seen;
}
