import { z } from 'zod';
import {
  declarationOf,
  type SettingDeclaration,
  type SettingKey,
  type SettingValue,
  stackDefault,
} from './settings';

/**
 * How the worker's environment and the stack's `docline:*` keys are read: each value through a zod
 * schema, with every problem collected, so that one error lists them all instead of the first.
 * An unset value takes its default unchecked (defaults are valid by construction).
 */
export class ConfigValues {
  /** What was wrong, one sentence per value, each naming the value and what it must be. */
  readonly problems: string[] = [];

  /** @param textOf The raw text of a value, or undefined when it is unset. */
  constructor(protected readonly textOf: (name: string) => string | undefined) {}

  /**
   * The value of `name` as `schema` parses it: `fallback` when unset, and also when invalid, after
   * recording `problem(raw)`.
   */
  read<T>(name: string, schema: z.ZodType<T>, fallback: T, problem: (raw: string) => string): T {
    const raw = this.textOf(name);
    if (raw === undefined) return fallback;
    const parsed = schema.safeParse(raw);
    if (parsed.success) return parsed.data;
    this.problems.push(problem(raw));
    return fallback;
  }
}

/** A whole number from `min` to `max`, written in decimal digits only (no sign, no exponent). */
export function wholeNumber(min: number, max = Number.MAX_SAFE_INTEGER): z.ZodType<number> {
  return z.string().regex(/^\d+$/).transform(Number).pipe(z.number().int().min(min).max(max));
}

/** One of the given texts. */
export function oneOf<T extends string>(allowed: readonly T[]): z.ZodType<T> {
  return z.enum(allowed as readonly [T, ...T[]]) as unknown as z.ZodType<T>;
}

/** `true` or `false`. */
export const booleanText: z.ZodType<boolean> = z.enum(['true', 'false']).transform((v) => v === 'true');

/** A JSON list of strings, as the Pulumi CLI hands over a YAML list. */
export const jsonStringList: z.ZodType<string[]> = z
  .string()
  .transform((text, ctx) => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'not JSON' });
      return z.NEVER;
    }
  })
  .pipe(z.array(z.string()));

/** The schema a setting's text is read with, on the worker's side (`env`) or the stack's. */
function schemaOf(s: SettingDeclaration, side: 'env' | 'stack'): z.ZodType<unknown> {
  const { kind, pattern } = s;
  if (kind === 'integer') {
    const whole = wholeNumber(s.min ?? 0, s.max);
    return side === 'stack' && s.zeroDerives
      ? z
          .literal('0')
          .transform(() => 0)
          .or(whole)
      : whole;
  }
  if (kind === 'boolean') return booleanText;
  if (kind === 'string') return pattern ? z.string().regex(pattern.test) : z.string();
  if (kind === 'list') {
    const list =
      side === 'stack'
        ? jsonStringList
        : z.string().transform((text) =>
            text
              .split(',')
              .map((item) => item.trim())
              .filter(Boolean),
          );
    return pattern ? list.pipe(z.array(z.string().regex(pattern.test))) : list;
  }
  return oneOf(kind);
}

/** What a setting's text must be, as a problem says it. */
function expectation(s: SettingDeclaration, side: 'env' | 'stack'): string {
  const { kind, pattern } = s;
  if (kind === 'integer')
    return `a whole number from ${s.min ?? 0}${s.max === undefined ? '' : ` to ${s.max}`}${side === 'stack' && s.zeroDerives ? ', or 0 to derive it' : ''}`;
  if (kind === 'boolean') return 'true or false';
  if (kind === 'string') return pattern?.says ?? 'a text';
  if (kind === 'list')
    return `a list${pattern ? ` of items each ${pattern.says}` : ' of strings'}${side === 'stack' ? '; in a stack file write it as a YAML list' : ', comma-separated'}`;
  return `one of ${kind.join(', ')}`;
}

/**
 * Reads settings by their row in the table (contract/settings.ts): from the worker's environment by
 * variable name (`env`), or from a stack's `docline:*` keys (`stack`). Every value is checked against
 * its row's kind and bounds; a wrong one is a problem and falls back to its default.
 */
export class SettingReader extends ConfigValues {
  constructor(
    textOf: (name: string) => string | undefined,
    private readonly side: 'env' | 'stack',
  ) {
    super(textOf);
  }

  /**
   * The value of `key`: `fallback` when unset or wrong; by default the table's default (a stack key's
   * as declared: 0 where 0 derives it), a string's '' being no value.
   */
  setting<K extends SettingKey>(key: K, fallback?: SettingValue<K>): SettingValue<K> {
    const s = declarationOf(key);
    const declared = this.side === 'stack' ? stackDefault(key) : s.default;
    fallback ??= (declared === '' ? undefined : declared) as SettingValue<K>;
    const name = this.nameOf(key);
    const got = (raw: string) => (this.side === 'env' ? `"${raw}"` : raw);
    return this.read(
      name,
      schemaOf(s, this.side) as z.ZodType<SettingValue<K>>,
      fallback,
      (raw) => `${name} must be ${expectation(s, this.side)} (got ${got(raw)}).`,
    );
  }

  /** Whether `key` is set at all, right or wrong. */
  given(key: SettingKey): boolean {
    return this.textOf(this.nameOf(key)) !== undefined;
  }

  private nameOf(key: SettingKey): string {
    return this.side === 'env' ? (declarationOf(key).env ?? key) : key;
  }
}
