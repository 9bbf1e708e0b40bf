/**
 * Helpers every rule shares: reading values that may be unknown during a preview, filling policy
 * config defaults, and following a resource's dependencies instead of its (possibly unknown) values.
 */
import type { PolicyConfigSchema, PolicyResource } from '@pulumi/policy';
import { UnknownValueError } from '@pulumi/policy';
import type { Unwrap } from '@pulumi/pulumi';

/**
 * A resource's properties typed by the provider's own state type (for example
 * `gcp.storage.NotificationState`), so a misspelt property name fails to compile instead of reading
 * `undefined` forever. Values may still be unknown at run time: read them through {@link peek}.
 */
export function propsOf<State>(resource: { props: Record<string, unknown> }): Unwrap<State> {
  return resource.props as Unwrap<State>;
}

/** A value read from policy arguments: known, or unknown until the update runs. */
export type Known<T> = { readonly known: true; readonly value: T } | { readonly known: false };

/**
 * Reads a value and every value nested inside it. During a preview the engine hands policies a proxy
 * that throws {@link UnknownValueError} when an unknown value is touched; the engine then skips the
 * whole policy with a warning. Reading through `peek` turns that into `{ known: false }`, so a rule
 * can decide what "unknown" means for it instead of silently passing.
 */
export function peek<T>(read: () => T): Known<T> {
  try {
    const value = read();
    return { known: true, value: plain(value) as T };
  } catch (error) {
    if (error instanceof UnknownValueError) return { known: false };
    throw error;
  }
}

/** A deep copy made by touching every nested value, so unknowns anywhere surface in {@link peek}. */
function plain(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(plain);
  if (value !== null && typeof value === 'object') {
    const copy: Record<string, unknown> = {};
    for (const key of Object.keys(value)) copy[key] = plain((value as Record<string, unknown>)[key]);
    return copy;
  }
  return value;
}

/**
 * Whether a property is set. An unknown value counts as set: it is computed from another resource's
 * output, so it will have a value once the update runs.
 */
export function isSet(read: () => unknown): boolean {
  try {
    const value = read();
    return value !== undefined && value !== null;
  } catch (error) {
    if (error instanceof UnknownValueError) return true;
    throw error;
  }
}

/** The known string value of a property, or undefined when it is unset, unknown or not a string. */
export function knownString(read: () => unknown): string | undefined {
  const v = peek(read);
  return v.known && typeof v.value === 'string' ? v.value : undefined;
}

/** The value a config schema property declares: a list of strings, a string, a number or a flag. */
type Declared<P> = P extends { type: 'array' }
  ? string[]
  : P extends { type: 'string' }
    ? string
    : P extends { type: 'integer' }
      ? number
      : P extends { type: 'boolean' }
        ? boolean
        : unknown;

/** A policy's configuration, typed by its schema. */
export type ConfigOf<S extends PolicyConfigSchema> = {
  [K in keyof S['properties']]: Declared<S['properties'][K]>;
};

/**
 * The policy's configuration with the schema's defaults filled in. The Pulumi CLI fills defaults
 * before it configures the pack, but a pack run without configuration (and every test harness) sees
 * `{}`: the rules must never depend on who filled them.
 */
export function configOf<S extends PolicyConfigSchema>(
  schema: S,
  args: { getConfig<C extends object>(): C },
): ConfigOf<S> {
  const given = args.getConfig<Record<string, unknown>>();
  const filled: Record<string, unknown> = {};
  for (const [key, property] of Object.entries(schema.properties)) {
    const value = given[key] ?? (property as { default?: unknown }).default;
    if (value !== undefined) filled[key] = value;
  }
  return { ...given, ...filled } as ConfigOf<S>;
}

/** A policy configuration of one list of strings: its key, its default and what it is for. */
export function stringListSchema<K extends string>(key: K, defaults: string[], description: string) {
  const property = {
    type: 'array' as const,
    items: { type: 'string' as const },
    default: defaults,
    description,
  };
  return { properties: { [key]: property } as Record<K, typeof property> };
}

/** Resources of the stack with one of the given types. */
export function ofTypes(resources: readonly PolicyResource[], types: readonly string[]): PolicyResource[] {
  return resources.filter((r) => types.includes(r.type));
}

/**
 * The resources a property's value was computed from, restricted to the given types. This is what
 * stays reliable in a first preview: the value may be unknown, but the engine always knows which
 * resource it comes from.
 */
export function propertySources(
  resource: PolicyResource,
  property: string,
  types: readonly string[],
): PolicyResource[] {
  return (resource.propertyDependencies[property] ?? []).filter((d) => types.includes(d.type));
}

/** The last path segment of a resource id (`projects/p/topics/t` → `t`). */
export function shortName(id: string): string {
  const parts = id.split('/').filter((p) => p.length > 0);
  return parts[parts.length - 1] ?? id;
}

/** A resource's display name for messages: its logical name and type. */
export function describe(resource: { name: string; type: string }): string {
  return `'${resource.name}' (${resource.type})`;
}
