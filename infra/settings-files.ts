import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { dump } from 'js-yaml';
import { replaceBlock } from '../sim/doc-blocks';
import {
  declarationOf,
  SETTINGS,
  type SettingDeclaration,
  type SettingKey,
  STACK_KEYS,
  stackDefault,
} from '../worker/src/contract/settings';

/**
 * Pulumi.yaml's config block and the two tables of docs/configuration.md, written from the settings
 * table (worker/src/contract/settings.ts). `npm run settings` rewrites both files after a change to
 * the table; infra/test/settings-files.test.ts fails while either is out of step.
 */

const REPO_ROOT = path.join(__dirname, '..');

/** The files written, each as a function of its current text. */
const SETTINGS_FILES: Readonly<Record<string, (current: string) => string>> = {
  'Pulumi.yaml': (current) => `${current.slice(0, current.indexOf('\nconfig:\n'))}\n${pulumiConfig()}`,
  'docs/configuration.md': (current) =>
    between(between(current, 'worker-env', workerTable()), 'stack-config', stackTable()),
};

function pulumiType(s: SettingDeclaration): string {
  if (s.kind === 'list') return 'array';
  return typeof s.kind === 'string' ? s.kind : 'string';
}

/** A stack key's description: its meaning, the variable the worker gets it as, and whether it is fixed. */
function description(key: SettingKey): string {
  const s = declarationOf(key);
  return [
    s.doc,
    s.env === undefined ? '' : ` The worker gets it as ${s.env}.`,
    s.fixedAtDeploy === undefined
      ? ''
      : ' Fixed once deployed: a change in place is refused (docs/deploy.md).',
  ].join('');
}

function pulumiConfig(): string {
  const config = Object.fromEntries(
    STACK_KEYS.map((key) => {
      const s = declarationOf(key);
      const items = s.kind === 'list' ? { items: { type: 'string' } } : {};
      return [
        key,
        { type: pulumiType(s), ...items, default: stackDefault(key), description: description(key) },
      ];
    }),
  );
  return dump({ config }, { lineWidth: 110, quotingType: '"' });
}

/** A default as the docs show it. */
function shownDefault(s: SettingDeclaration, value = s.default): string {
  if (s.defaultDoc !== undefined) return s.defaultDoc;
  if (value === undefined || (s.kind === 'string' && value === '')) return '—';
  return `\`${Array.isArray(value) ? value.join(',') : String(value)}\``;
}

function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), `|${header.map(() => '---').join('|')}|`, ...rows.map(line)].join('\n');
}

function workerTable(): string {
  const rows = Object.entries(SETTINGS as Record<SettingKey, SettingDeclaration>)
    .filter(([, s]) => s.env !== undefined)
    .map(([key, s]) => [
      `\`${s.env}\``,
      shownDefault(s),
      s.stack === 'key' ? `\`docline:${key}\`` : (s.stack ?? '—'),
      s.doc,
    ]);
  return table(['variable', 'default', 'stack', 'meaning'], rows);
}

function stackTable(): string {
  const rows = STACK_KEYS.map((key) => {
    const s = declarationOf(key);
    return [`\`docline:${key}\``, pulumiType(s), shownDefault(s, stackDefault(key)), description(key)];
  });
  return table(['key', 'type', 'default', 'meaning'], rows);
}

/** `text` with the part between `<!-- NAME:start -->` and `<!-- NAME:end -->` replaced by `body`. */
function between(text: string, name: string, body: string): string {
  return replaceBlock(
    text,
    `<!-- ${name}:start -->`,
    `<!-- ${name}:end -->`,
    `${body}\n`,
    name,
    'docs/configuration.md',
  );
}

/** Each file's path, its text now, and its text as the table writes it. */
export function settingsFiles(): { file: string; current: string; written: string }[] {
  return Object.entries(SETTINGS_FILES).map(([file, write]) => {
    const current = readFileSync(path.join(REPO_ROOT, file), 'utf8');
    return { file, current, written: write(current) };
  });
}

if (require.main === module) {
  for (const { file, current, written } of settingsFiles()) {
    if (written !== current) writeFileSync(path.join(REPO_ROOT, file), written);
    console.log(`${file}: ${written === current ? 'unchanged' : 'written'}`);
  }
}
