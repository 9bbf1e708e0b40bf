import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { REPO_ROOT, tsxArgs } from '../../lib/worker-process';

const run = promisify(execFile);

/** What a command printed and how it ended. */
export interface CommandRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs a local command (`local/commands/<script>`) the way its npm script does, against a data
 * folder (DOCLINE_DATA_DIR); resolves with its exit code and output, whatever the code.
 */
export async function runLocalCommand(script: string, args: string[], dataDir: string): Promise<CommandRun> {
  try {
    const { stdout, stderr } = await run(process.execPath, tsxArgs(`local/commands/${script}`, args), {
      cwd: REPO_ROOT,
      env: { ...process.env, DOCLINE_DATA_DIR: dataDir },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
