import { readdirSync } from 'node:fs';
import path from 'node:path';

/** Every `.ts` file under `dir`, depth first: what the layout and dependency tests read. */
export function typescriptSources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return typescriptSources(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}
