/** A tiny argument reader for the local commands: `--name value`, `--flag`, and positionals. */
export function parseArgs(argv: string[]): { flags: Map<string, string | true>; positionals: string[] } {
  const flags = new Map<string, string | true>();
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) {
      positionals.push(arg);
      continue;
    }
    const [name, inline] = arg.slice(2).split('=', 2) as [string, string | undefined];
    const next = argv[i + 1];
    if (inline !== undefined) flags.set(name, inline);
    else if (next !== undefined && !next.startsWith('--')) {
      flags.set(name, next);
      i++;
    } else flags.set(name, true);
  }
  return { flags, positionals };
}

/** A string flag, or the environment variable, or the default. */
export function option(
  flags: Map<string, string | true>,
  name: string,
  envValue: string | undefined,
  fallback: string,
): string {
  const value = flags.get(name);
  return typeof value === 'string' ? value : (envValue ?? fallback);
}
