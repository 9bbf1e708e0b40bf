import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { REPO_ROOT, type WorkerLogLine, type WorkerProcess } from '../../../../local/lib/worker-process';
import { SqliteStore } from '../../../src/adapters/stores/sqlite-store';
import { ANALYSES_LOG, type AnalysisLogLine } from './fault-switches';

/**
 * What the reliability suites share: the summary table's file, waiting on conditions, counting
 * analyses, reading rows and auditing every log line a worker wrote.
 */

/** The test composition entry with the fault switches. */
export const FAULTY_WORKER = path.join(__dirname, 'faulty-worker.ts');

/** Each case appends one JSON line here; the summary reporter prints them as a table. */
export const SUMMARY_FILE =
  process.env.DOCLINE_RELIABILITY_SUMMARY ?? path.join(tmpdir(), 'docline-reliability-summary.jsonl');

/** One line of the summary table. */
export interface SummaryEntry {
  suite: string;
  case: string;
  expected: string;
  observed: string;
  rows: number | string;
  analyses: number | string;
}

/** Appends a line to the summary table; `pass` is whether observed is what was expected. */
export function recordCase(entry: SummaryEntry & { pass?: boolean }): void {
  const pass = entry.pass ?? entry.expected === entry.observed;
  appendFileSync(SUMMARY_FILE, `${JSON.stringify({ ...entry, pass })}\n`);
}

/**
 * Waits until `probe` returns a value. Used only where the thing awaited emits no event the test
 * can listen to (a row in SQLite, a message in a dead-letter subscription); the deadline turns a
 * missing outcome into a failure that says what was awaited.
 */
export async function waitUntil<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 60_000,
  everyMs = 200,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** A temporary data directory, removed by `cleanup`. */
export function tempDataDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), `docline-${prefix}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Analyses started per object name, from the faulty worker's `analyses.log` (survives SIGKILL). */
export function analysesByName(dataDir: string): Map<string, number> {
  const file = path.join(dataDir, ANALYSES_LOG);
  const counts = new Map<string, number>();
  if (!existsSync(file)) return counts;
  for (const text of readFileSync(file, 'utf8').split('\n')) {
    if (!text) continue;
    const line = JSON.parse(text) as AnalysisLogLine;
    counts.set(line.name, (counts.get(line.name) ?? 0) + 1);
  }
  return counts;
}

/** The SQLite store of a data dir, opened from the test process (WAL: safe beside the worker). */
export function openRows(dataDir: string): SqliteStore {
  return new SqliteStore({ path: path.join(dataDir, 'docline.sqlite') });
}

/** Every row of the table, duplicates included (the views deduplicate; this does not). */
export function rowCount(dataDir: string): number {
  const db = new DatabaseSync(path.join(dataDir, 'docline.sqlite'), { readOnly: true });
  try {
    return Number((db.prepare('SELECT COUNT(*) AS n FROM rows').get() as { n: number }).n);
  } finally {
    db.close();
  }
}

/** Peak resident set size of a live process, in bytes (Linux /proc). */
export function peakRssBytes(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /VmHWM:\s+(\d+)\s+kB/.exec(status)?.[1];
    return kb ? Number(kb) * 1024 : null;
  } catch {
    return null;
  }
}

/** The value at quantile `q` (0–1) of a list of numbers. */
export function quantile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** Whether a worker log line is the final answer to a delivery that reached handle(). */
export const isAnswer = (line: WorkerLogLine): boolean =>
  line.status === 'ok' || line.status === 'rejected' || line.status === 'duplicate';

/** What no log line may hold: strings, or patterns. */
type Forbidden = readonly (string | RegExp)[];

/**
 * Collects the log lines of every worker process a suite starts (restarts included), so that one
 * assertion can run over all of them at the end.
 */
export class LogAudit {
  private readonly workers: WorkerProcess[] = [];

  watch(worker: WorkerProcess): WorkerProcess {
    if (!this.workers.includes(worker)) this.workers.push(worker);
    return worker;
  }

  lines(): WorkerLogLine[] {
    return this.workers.flatMap((w) => w.lines);
  }

  /** The forbidden strings or patterns found in any log line, with the line's message. */
  leaks(forbidden: Forbidden): Array<{ value: string; message: string }> {
    const found: Array<{ value: string; message: string }> = [];
    const texts = this.lines().map((l) => ({ text: JSON.stringify(l), message: l.message }));
    for (const value of forbidden) {
      for (const t of texts)
        if (typeof value === 'string' ? t.text.includes(value) : value.test(t.text))
          found.push({ value: String(value), message: t.message.slice(0, 120) });
    }
    return found;
  }

  /**
   * Records the audit of `forbidden` as `suite`'s case `name`, and expects more than `minLines` lines
   * and no leak (by their messages, so a failure says where).
   */
  expectNoLeaks(suite: string, forbidden: Forbidden, minLines: number, name = 'log audit'): void {
    const leaks = this.leaks(forbidden);
    const lines = this.lines().length;
    recordCase({
      suite,
      case: name,
      expected: `0 leaks in ${lines} lines`,
      observed: `${leaks.length} leaks in ${lines} lines`,
      rows: '-',
      analyses: '-',
    });
    expect(lines).toBeGreaterThan(minLines);
    expect(leaks.map((l) => l.message)).toEqual([]);
  }
}

interface ExpectedInvoice {
  supplier_name?: string | null;
  customer_name?: string | null;
  invoice_number?: string | null;
  supplier_vat_id?: string | null;
}

/** A sample invoice from samples/, with the strings of its content that must never be logged. */
export interface SampleInvoice {
  file: string;
  bytes: Buffer;
  secrets: string[];
}

/** The text invoices of samples/invoices, with their supplier, customer, number and VAT id. */
export function sampleInvoices(): SampleInvoice[] {
  const expected = JSON.parse(readFileSync(path.join(REPO_ROOT, 'samples/expected.json'), 'utf8')) as Record<
    string,
    ExpectedInvoice
  >;
  return Object.entries(expected)
    .filter(([file]) => file.startsWith('invoices/') && file.endsWith('.txt'))
    .map(([file, e]) => ({
      file,
      bytes: readFileSync(path.join(REPO_ROOT, 'samples', file)),
      secrets: [e.supplier_name, e.customer_name, e.invoice_number, e.supplier_vat_id].filter(
        (s): s is string => typeof s === 'string' && s.length >= 6,
      ),
    }));
}
