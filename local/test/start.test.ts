import { type ChildProcess, spawn } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { DatabaseSync } from 'node:sqlite';
import { SqliteStore } from '../../worker/src/adapters/stores/sqlite-store';
import { REPO_ROOT, tsxArgs } from '../lib/worker-process';
import { eventually } from './support/eventually';

/** Runs `npm start`'s entry as a user would, and collects its output lines. */
function startCommand(args: string[]) {
  const child: ChildProcess = spawn(process.execPath, tsxArgs('local/commands/start.ts', args), {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
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
      // The file leaves the inbox once its row exists: right after the outcome line.
      await eventually(() => !existsSync(path.join(inbox, sample)), 'the file has left the inbox', {
        timeoutMs: 10_000,
      });
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

  it('stopped halfway through a drop, leaves every file with its row or in the inbox; a restart finishes the rest', async () => {
    const dataDir = path.join(dir, 'data');
    const inbox = path.join(dir, 'inbox');
    const args = ['--data-dir', dataDir, '--inbox', inbox, '--concurrency', '4'];
    const template = readFileSync(path.join(REPO_ROOT, 'samples/invoices/en-02-invoice-hosting.txt'), 'utf8');
    const files = Array.from({ length: 300 }, (_, i) => `drop/${String(i).padStart(3, '0')}.txt`);
    /** Rows per object name, read from the store as `npm run rows` would. */
    const rowsByName = () => {
      const db = new DatabaseSync(path.join(dataDir, 'docline.sqlite'), { readOnly: true });
      try {
        const rows = db
          .prepare("SELECT object_name, status FROM rows WHERE object_name LIKE 'drop/%'")
          .all() as Array<{ object_name: string; status: string }>;
        const byName = new Map<string, string[]>();
        for (const row of rows)
          byName.set(row.object_name, [...(byName.get(row.object_name) ?? []), row.status]);
        return byName;
      } finally {
        db.close();
      }
    };
    const inInbox = (name: string) => existsSync(path.join(inbox, name));
    const moved = (name: string) => existsSync(path.join(inbox, '.uploaded', name));

    const first = startCommand(args);
    try {
      await first.waitFor((l) => l.startsWith('docline: ready.'));
      mkdirSync(path.join(inbox, 'drop'));
      for (const [i, name] of files.entries())
        writeFileSync(path.join(inbox, name), template.replaceAll('CRH-10293', `CRH-10293-${i}`));
      // Halfway: the first rows exist, most of the drop is still queued or on its way.
      await eventually(
        () => first.lines.filter((l) => l.startsWith('ok ') && l.includes('drop/')).length >= 10,
        'ten files of the drop have their row',
        { timeoutMs: 60_000, everyMs: 10 },
      );
    } finally {
      first.child.kill('SIGINT');
    }
    expect(await first.exited).toBe(0);

    const afterStop = rowsByName();
    const withRow = files.filter((name) => afterStop.has(name));
    const left = files.filter(inInbox);
    expect({ withRow: withRow.length > 0, left: left.length > 0 }).toEqual({ withRow: true, left: true });
    for (const name of files) {
      // Each file is in exactly one place: moved once its row exists, or still in the inbox.
      expect({ name, row: afterStop.has(name), inbox: inInbox(name), moved: moved(name) }).toEqual(
        afterStop.has(name) && !inInbox(name)
          ? { name, row: true, inbox: false, moved: true }
          : { name, row: afterStop.has(name), inbox: true, moved: false },
      );
    }
    // A file still in the inbox has no row: nothing that has its line is taken twice.
    expect(left.filter((name) => afterStop.has(name))).toEqual([]);

    const second = startCommand(args);
    try {
      await second.waitFor((l) => l.startsWith('docline: ready.'));
      await eventually(() => files.every((name) => !inInbox(name)), 'every file has left the inbox', {
        timeoutMs: 120_000,
        everyMs: 50,
      });
    } finally {
      second.child.kill('SIGINT');
    }
    expect(await second.exited).toBe(0);
    const finished = rowsByName();
    // One ok row per file: the ones left were taken by the restart, none twice.
    expect(files.filter((name) => finished.get(name)?.join() !== 'ok')).toEqual([]);
    expect(files.filter((name) => !moved(name))).toEqual([]);
  }, 240_000);
});
