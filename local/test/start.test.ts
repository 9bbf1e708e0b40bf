import { type ChildProcess, spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { SqliteStore } from '../../worker/src/adapters/sqlite-store';
import { REPO_ROOT } from '../lib/worker-process';

/** Runs `npm start`'s entry as a user would, and collects its output lines. */
function startCommand(args: string[]) {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      '--disable-warning=ExperimentalWarning',
      '--import',
      'tsx',
      path.join(REPO_ROOT, 'local/commands/start.ts'),
      ...args,
    ],
    { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const lines: string[] = [];
  const waiters: Array<{ match: (l: string) => boolean; resolve: (l: string) => void }> = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    lines.push(line);
    for (const w of waiters.filter((w) => w.match(line))) w.resolve(line);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const waitFor = (match: (l: string) => boolean) =>
    new Promise<string>((resolve, reject) => {
      const seen = lines.find(match);
      if (seen) return resolve(seen);
      waiters.push({ match, resolve });
      void exited.then((code) => reject(new Error(`npm start exited (${code}):\n${lines.join('\n')}`)));
    });
  return { child, lines, waitFor, exited };
}

describe('npm start', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'docline-start-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('turns a sample dropped into the inbox into its row through the real emulator, and stops on Ctrl-C', async () => {
    const dataDir = path.join(dir, 'data');
    const inbox = path.join(dir, 'inbox');
    const run = startCommand(['--data-dir', dataDir, '--inbox', inbox]);
    try {
      await run.waitFor((l) => l.startsWith('docline: ready.'));
      const sample = readdirSync(path.join(REPO_ROOT, 'samples/invoices')).find((f) => f.endsWith('.txt'))!;
      copyFileSync(path.join(REPO_ROOT, 'samples/invoices', sample), path.join(inbox, sample));
      const line = await run.waitFor((l) => l.startsWith('ok ') && l.includes(sample));
      expect(line).toMatch(/\d+\.\d{2} [A-Z]{3}/); // supplier and total printed
      const store = new SqliteStore({ path: path.join(dataDir, 'docline.sqlite') });
      const rows = store.rowsWhere('object_name', sample);
      await store.close();
      expect(rows.map((r) => [r.status, r.model])).toEqual([['ok', 'offline']]);
      expect(readdirSync(path.join(inbox, '.uploaded'))).toEqual([sample]);

      // The same invoice again under another name: its row joins a duplicate_invoices group.
      const copy = `copy-of-${sample}`;
      copyFileSync(path.join(REPO_ROOT, 'samples/invoices', sample), path.join(inbox, copy));
      await run.waitFor((l) => l.startsWith('ok ') && l.includes(copy));
      const warning = await run.waitFor((l) => l.startsWith('warning '));
      expect(warning).toMatch(
        new RegExp(
          `^warning {4}duplicate invoice: ${copy}#\\d+ has the supplier, number and total of ${sample}#\\d+ `,
        ),
      );
      expect(run.lines.filter((l) => l.startsWith('warning '))).toHaveLength(1);
    } finally {
      run.child.kill('SIGINT');
    }
    expect(await run.exited).toBe(0);
    expect(run.lines).toContain('docline: stopping…');
  });
});
