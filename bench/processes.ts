import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { startWorkerProcess, type WorkerProcess } from '../local/lib/worker-process';

/**
 * The three HTTP servers of stage 2, each a child process started the same way (this Node, the
 * same flags, the tsx loader, through local/lib/worker-process.ts), and their memory figures.
 */

export type ServerKind = 'bare' | 'naive' | 'docline';

const ENTRIES: Record<ServerKind, string | undefined> = {
  bare: path.join(__dirname, 'servers/bare-server.ts'),
  naive: path.join(__dirname, 'servers/naive-consumer.ts'),
  docline: undefined, // the worker's own composition root
};

/** Starts one server on a free loopback port; `dataDir` holds its SQLite file and its `bucket`. */
export function startServer(
  kind: ServerKind,
  dataDir: string,
  env: Record<string, string> = {},
): Promise<WorkerProcess> {
  return startWorkerProcess({
    entry: ENTRIES[kind],
    env: {
      PORT: '0',
      DOCLINE_DATA_DIR: dataDir,
      DOCLINE_ANALYZER: 'offline',
      DOCLINE_READER: 'local',
      WORKER_VERSION: 'bench',
      // Production logs one INFO line per message: so do (b) and (c) here, unless told otherwise.
      LOG_LEVEL: 'INFO',
      // Nothing of a cloud configuration may leak in from the caller's environment.
      BIGQUERY_TABLE: '',
      GEMINI_API_KEY: '',
      PUSH_AUTH_AUDIENCE: '',
      PUSH_AUTH_SERVICE_ACCOUNT: '',
      ...env,
    },
  });
}

/** A file of /proc; null where it is missing (no /proc, or the process is gone). */
function readProc(file: string): string | null {
  try {
    return readFileSync(`/proc/${file}`, 'utf8');
  } catch {
    return null;
  }
}

/**
 * Peak and current resident set size of a process, in bytes, from /proc (Linux). The peak
 * (VmHWM) covers the process's whole life, start-up included. Null where /proc is missing.
 */
export function memoryOf(pid: number | undefined): { peakRssBytes: number; rssBytes: number } | null {
  const status = pid === undefined ? null : readProc(`${pid}/status`);
  if (status === null) return null;
  const kib = (field: string) => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    return match ? Number(match[1]) * 1024 : Number.NaN;
  };
  return { peakRssBytes: kib('VmHWM'), rssBytes: kib('VmRSS') };
}

let ticksPerSecond: number | undefined;

/**
 * CPU time (user + system) a process has used so far, in ms, from /proc/PID/stat; null where /proc
 * is missing. CPU time per message is steadier than a rate on a machine shared with other work.
 */
export function cpuTimeMs(pid: number | undefined): number | null {
  const stat = pid === undefined ? null : readProc(`${pid}/stat`);
  if (stat === null) return null;
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100; // the Linux default
    }
  }
  // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return ((utime + stime) * 1000) / ticksPerSecond;
}

/** Jiffies the whole machine spent busy and in total so far, from /proc/stat; null where missing. */
export function machineCpu(): { busy: number; total: number } | null {
  const stat = readProc('stat');
  if (stat === null) return null;
  const values = stat.split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = values.reduce((sum, v) => sum + v, 0);
  const idle = (values[3] ?? 0) + (values[4] ?? 0); // idle + iowait
  return { busy: total - idle, total };
}

/** The share (0..1) of all cores that was busy between two {@link machineCpu} readings. */
export function busyShare(
  before: ReturnType<typeof machineCpu>,
  after: ReturnType<typeof machineCpu>,
): number {
  if (!before || !after || after.total <= before.total) return Number.NaN;
  return (after.busy - before.busy) / (after.total - before.total);
}
