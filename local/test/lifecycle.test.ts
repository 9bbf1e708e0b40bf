import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { tsxArgs } from '../lib/worker-process';

const COMMAND = path.join(__dirname, 'support/lifecycle-command.ts');

/** Starts the test command, waits for its `ready <pid>` line; returns it and its server's pid. */
async function startCommand(args: string[]) {
  const child = spawn(process.execPath, tsxArgs(COMMAND, args), { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  const ready = new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      lines.push(line);
      const match = /^ready (\d+)$/.exec(line);
      if (match) resolve(Number(match[1]));
    });
    void exited.then(() => reject(new Error(`the command exited early: ${lines.join('\n')}`)));
  });
  return { child, lines, exited, serverPid: await ready };
}

/** Whether a process runs with this pid (a killed one may linger as a zombie until its reaper runs). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/**
 * Whether the process dies within `ms`. A SIGKILL is delivered at once but acted on when the kernel
 * next runs the process, so on a loaded machine it may still show for a moment after the command
 * that sent it has exited. It is no child of this process, so there is no exit event to wait for.
 */
async function diesWithin(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

describe('the local tools’ process lifecycle', () => {
  it('kills the server group and dies of the signal when the command registered no graceful stop', async () => {
    const run = await startCommand([]);
    expect(alive(run.serverPid)).toBe(true);
    run.child.kill('SIGTERM');
    const [code, signal] = await run.exited;
    expect([code, signal]).toEqual([null, 'SIGTERM']);
    expect(await diesWithin(run.serverPid, 10_000)).toBe(true);
  }, 30_000);

  it('kills the server group, runs the graceful stop once and exits 0 on Ctrl-C', async () => {
    const run = await startCommand(['graceful']);
    run.child.kill('SIGINT');
    const [code] = await run.exited;
    expect(code).toBe(0);
    expect(run.lines.filter((l) => l === 'stopping')).toHaveLength(1);
    expect(await diesWithin(run.serverPid, 10_000)).toBe(true);
  }, 30_000);
});
