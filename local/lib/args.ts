import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';

/**
 * The one argument convention of the local commands: `node:util` `parseArgs`, strict. An unknown
 * flag, a value given to a boolean flag (`--double-notifications x`) or a positional a command does
 * not take is refused with {@link UsageError}, which {@link runCommand} answers with exit code 2.
 */

/** Exit code of a refused command line (reconcile and check:notifications use 2 as well). */
export const USAGE_EXIT_CODE = 2;

/** A command line the command cannot take; the message says what is wrong and how to call it. */
export class UsageError extends Error {
  readonly code = 'usage';
}

/** Node's first sentence ("Unknown option '--x'"), without its advice on `--`. */
function firstSentence(error: unknown): string {
  // Not `instanceof Error`: node's own errors come from another realm under a test runner's vm.
  const message = String((error as { message?: unknown }).message ?? error);
  return message.split(/\.\s/)[0]!.replace(/\.$/, '');
}

/** Parses `argv` strictly against `options`; throws {@link UsageError} with `usage` appended. */
export function parseCommandArgs<T extends ParseArgsOptionsConfig>(
  argv: string[],
  options: T,
  usage: string,
  { positionals = false }: { positionals?: boolean } = {},
) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: positionals });
  } catch (error) {
    throw new UsageError(`${firstSentence(error)}. ${usage}`, { cause: error });
  }
}

/** A string flag, or the environment variable, or the default. */
export function option(value: string | undefined, envValue: string | undefined, fallback: string): string {
  return value ?? envValue ?? fallback;
}

/**
 * Runs a command's main and exits: 0 when it resolves (or its number), 2 on {@link UsageError},
 * 1 on any other error; errors are printed to stderr as `<name>: <message>`.
 */
export function runCommand(name: string, main: () => unknown): void {
  const fail = (error: unknown) => {
    console.error(`${name}: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(error instanceof UsageError ? USAGE_EXIT_CODE : 1);
  };
  try {
    Promise.resolve(main()).then((code) => {
      if (typeof code === 'number') process.exit(code);
    }, fail);
  } catch (error) {
    fail(error);
  }
}
