import { z } from 'zod';

/**
 * How the worker's environment and the stack's `docline:*` keys are read: each value through a zod
 * schema, with every problem collected, so that one error lists them all instead of the first.
 * An unset value takes its default unchecked (defaults are valid by construction).
 */
export class ConfigValues {
  /** What was wrong, one sentence per value, each naming the value and what it must be. */
  readonly problems: string[] = [];

  /** @param textOf The raw text of a value, or undefined when it is unset. */
  constructor(private readonly textOf: (name: string) => string | undefined) {}

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

/** Any finite number, as `Number()` reads it. */
export const finiteNumber: z.ZodType<number> = z.string().transform(Number).pipe(z.number());

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
