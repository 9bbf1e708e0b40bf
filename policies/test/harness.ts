/**
 * Runs policies the way the Pulumi engine does, without the CLI: resources are encoded into the
 * analyzer's own protobuf requests (`AnalyzeRequest`, `AnalyzeStackRequest`) and handed to
 * `@pulumi/policy`'s own RPC handlers. The pack therefore sees exactly what it sees under
 * `pulumi preview`: values behind the unknown-checking proxy, dependencies linked into resources,
 * and a policy that reads an unknown value skipped with an advisory "can't run ... during preview".
 */
import type { EnforcementLevel, Policies, Policy, ReportViolation } from '@pulumi/policy';
import * as policyServer from '@pulumi/policy/server';
import * as analyzer from '@pulumi/pulumi/proto/analyzer_pb';
import { unknownValue } from '@pulumi/pulumi/runtime/rpc';
import { Struct } from 'google-protobuf/google/protobuf/struct_pb';

/** How the engine marks a value that is unknown during a preview (the string sentinel it sends). */
export const UNKNOWN = unknownValue;

/** A resource as the engine describes it to an analyzer. */
export interface StackResource {
  type: string;
  name: string;
  /** Defaults to `urn:pulumi:dev::docline::TYPE::NAME`. */
  urn?: string;
  props: Record<string, unknown>;
  parent?: string;
  /** Defaults to the URNs of `propertyDependencies`: the engine's dependencies include them. */
  dependencies?: string[];
  propertyDependencies?: Record<string, string[]>;
  /** Resource options the engine sends along (unset: the engine's defaults). */
  options?: ResourceOptions;
}

/** The resource options a policy can read through `args.opts`. */
export interface ResourceOptions {
  protect?: boolean;
  deleteBeforeReplace?: boolean;
}

/** A diagnostic the pack returned. */
export interface Diagnostic {
  policyName: string;
  /** The policy's own message (without the description the server puts in front). */
  message: string;
  urn?: string;
  enforcementLevel: EnforcementLevel;
}

/** Policy configuration by policy name, as `pulumi preview --policy-pack-config` would give it. */
export type PackConfig = Record<string, Record<string, unknown>>;

export interface RunOptions {
  policies: Policies;
  config?: PackConfig;
}

/** The stable URN the harness gives a resource that names none. */
export function urnOf(resource: { type: string; name: string; urn?: string }): string {
  return resource.urn ?? `urn:pulumi:dev::docline::${resource.type}::${resource.name}`;
}

type RpcFun = (
  call: { request: unknown },
  callback: (error: unknown, response?: analyzer.AnalyzeResponse) => void,
) => Promise<void>;
interface ServerInternals {
  makeAnalyzeRpcFun(name: string, version: string, level: EnforcementLevel, policies: Policies): RpcFun;
  makeAnalyzeStackRpcFun(name: string, version: string, level: EnforcementLevel, policies: Policies): RpcFun;
}
// The handlers are exported but marked internal, so they carry no type declarations.
const server = policyServer as unknown as ServerInternals;

const LEVELS: Record<number, EnforcementLevel> = {
  [analyzer.EnforcementLevel.ADVISORY]: 'advisory',
  [analyzer.EnforcementLevel.MANDATORY]: 'mandatory',
  [analyzer.EnforcementLevel.DISABLED]: 'disabled',
  [analyzer.EnforcementLevel.REMEDIATE]: 'remediate',
};

/**
 * The server reads configuration only from its `configure` RPC, which is not exported. Each policy
 * is wrapped so `getConfig()` returns the harness's configuration; the type tag the server uses for
 * its fast path is carried over.
 */
function withConfig(policies: Policies, config: PackConfig): Policies {
  const getConfig =
    <T extends object>(p: Policy) =>
    () =>
      (config[p.name] ?? {}) as T;
  return policies.map((p) => {
    const wrap = <F extends (args: { getConfig: unknown }, report: ReportViolation) => unknown>(fn: F): F => {
      const wrapped = ((args: object, report: ReportViolation) =>
        fn({ ...args, getConfig: getConfig(p) } as never, report)) as unknown as F;
      Object.assign(wrapped, { __pulumiType: (fn as { __pulumiType?: string }).__pulumiType });
      return wrapped;
    };
    if ('validateStack' in p) return { ...p, validateStack: wrap(p.validateStack as never) };
    if (typeof p.validateResource === 'function')
      return { ...p, validateResource: wrap(p.validateResource as never) };
    return p;
  }) as Policies;
}

function options(parent: string | undefined, given: ResourceOptions = {}): analyzer.AnalyzerResourceOptions {
  const opts = new analyzer.AnalyzerResourceOptions();
  opts.setProtect(given.protect ?? false);
  // The engine marks whether deleteBeforeReplace was set at all; the policy sees it only then.
  if (given.deleteBeforeReplace !== undefined) {
    opts.setDeletebeforereplace(given.deleteBeforeReplace);
    opts.setDeletebeforereplacedefined(true);
  }
  if (parent) opts.setParent(parent);
  return opts;
}

function struct(props: Record<string, unknown>): Struct {
  // Struct cannot hold undefined; the engine drops such properties too.
  return Struct.fromJavaScript(JSON.parse(JSON.stringify(props)) as never);
}

/** The diagnostics of an analyzer response, with the policy descriptions taken off the messages. */
export function decode(response: analyzer.AnalyzeResponse, policies: Policies): Diagnostic[] {
  return response.getDiagnosticsList().map((d) => {
    const description = policies.find((p) => p.name === d.getPolicyname())?.description ?? '';
    const full = d.getMessage();
    const message = full.startsWith(`${description}\n`) ? full.slice(description.length + 1) : full;
    return {
      policyName: d.getPolicyname(),
      message,
      ...(d.getUrn() ? { urn: d.getUrn() } : {}),
      enforcementLevel: LEVELS[d.getEnforcementlevel()] ?? 'advisory',
    };
  });
}

function call(fun: RpcFun, request: unknown): Promise<analyzer.AnalyzeResponse> {
  return new Promise((resolve, reject) => {
    fun({ request }, (error, response) => (error || !response ? reject(error) : resolve(response))).catch(
      reject,
    );
  });
}

/** The engine's `Analyze` request for one resource (its inputs). */
export function resourceRequest(resource: StackResource): analyzer.AnalyzeRequest {
  const request = new analyzer.AnalyzeRequest();
  request.setType(resource.type);
  request.setName(resource.name);
  request.setUrn(urnOf(resource));
  request.setProperties(struct(resource.props));
  request.setOptions(options(resource.parent, resource.options));
  return request;
}

/** The engine's `AnalyzeStack` request: every resource with its parent and dependencies. */
export function stackRequest(resources: readonly StackResource[]): analyzer.AnalyzeStackRequest {
  const request = new analyzer.AnalyzeStackRequest();
  request.setResourcesList(
    resources.map((r) => {
      const resource = new analyzer.AnalyzerResource();
      resource.setType(r.type);
      resource.setName(r.name);
      resource.setUrn(urnOf(r));
      resource.setProperties(struct(r.props));
      resource.setOptions(options(r.parent, r.options));
      if (r.parent) resource.setParent(r.parent);
      resource.setDependenciesList(
        r.dependencies ?? [...new Set(Object.values(r.propertyDependencies ?? {}).flat())],
      );
      const map = resource.getPropertydependenciesMap();
      for (const [property, urns] of Object.entries(r.propertyDependencies ?? {})) {
        const deps = new analyzer.AnalyzerPropertyDependencies();
        deps.setUrnsList(urns);
        map.set(property, deps);
      }
      return resource;
    }),
  );
  return request;
}

/** Runs the resource validations on one resource (the engine's `Analyze` call). */
export async function analyzeResource(resource: StackResource, run: RunOptions): Promise<Diagnostic[]> {
  const policies = withConfig(run.policies, run.config ?? {});
  const fun = server.makeAnalyzeRpcFun('docline', '0.0.1', 'advisory', policies);
  return decode(await call(fun, resourceRequest(resource)), policies);
}

/** Runs the stack validations on every resource (the engine's `AnalyzeStack` call). */
export async function analyzeStack(
  resources: readonly StackResource[],
  run: RunOptions,
): Promise<Diagnostic[]> {
  const policies = withConfig(run.policies, run.config ?? {});
  const fun = server.makeAnalyzeStackRpcFun('docline', '0.0.1', 'advisory', policies);
  return decode(await call(fun, stackRequest(resources)), policies);
}

/** Everything the engine runs for a stack: `Analyze` per resource, then `AnalyzeStack`. */
export async function analyzeAll(
  resources: readonly StackResource[],
  run: RunOptions,
): Promise<Diagnostic[]> {
  const perResource: Diagnostic[] = [];
  for (const resource of resources) {
    for (const d of await analyzeResource(resource, run)) perResource.push({ urn: urnOf(resource), ...d });
  }
  return [...perResource, ...(await analyzeStack(resources, run))];
}
