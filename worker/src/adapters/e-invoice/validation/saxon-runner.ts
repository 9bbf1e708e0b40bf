import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';

/**
 * The EN 16931 validation runner (Validate.java beside this file) as a long-lived child process:
 * Saxon-HE runs the official artefacts, compiled once per process and kept. One request at a time
 * on its stdin, answered by one JSON line; requests wait their turn here. A request that outlives
 * its timeout is answered `timeout` and the process is restarted (a stylesheet does not stop
 * half-way). scripts/install-en16931.sh installs the runner, Saxon and the artefacts.
 */

/** One assertion of an artefact, as its SVRL report states it. */
export interface Assertion {
  /** The rule's id (`BR-CO-15`, `FX-SCH-A-000123`, `BR-FR-05_BT-22_PMT`). */
  id: string;
  /** `fatal`, `error`, `warning` or `information`; empty when the rule sets none. */
  flag: string;
  location: string;
  text: string;
}

/** What one artefact said about one document. */
export interface ArtefactResult {
  stylesheet: string;
  ms: number;
  failed: Assertion[];
  reports: Assertion[];
}

/** The installed runner: its manifest (written by the install script), read once. */
export interface RunnerManifest {
  classpath: string[];
  mainClass: string;
  artefacts: Record<string, { path: string; source: string; sha256: string }>;
}

/** Why a validation could not be run (the row's verdict is then `unchecked`). */
export class ValidatorUnavailable extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ValidatorUnavailable';
  }
}

/**
 * The JVM's flags. The heap is capped rather than left to the JVM's default (a quarter of the
 * container's memory, 1 GiB in the stack's 4 GiB): with every artefact compiled the live heap is
 * ~80 MiB, and a 4.8 MB CII (3,319 lines) validates within a 128 MiB heap, so 256 MiB is room and
 * a bound; RSS stays under ~400 MiB (heap plus ~120 MiB of metaspace, code and threads; measured
 * in docs/e-invoices.md). The serial collector: one thread, no per-core structures. A heap that
 * runs out ends the process at once (the request is answered `unchecked`, the next one starts a
 * new runner) instead of leaving a half-working JVM. No perf data file in /tmp (memory on Cloud Run).
 * `-Xss8m`: a larger stack for deeply nested documents (a StackOverflowError is answered as an
 * error by Validate.java).
 */
export const JVM_OPTIONS = [
  '-Xmx256m',
  '-XX:+UseSerialGC',
  '-XX:+ExitOnOutOfMemoryError',
  '-XX:-UsePerfData',
  '-Xss8m',
] as const;

/** Where the install script puts the runner, from the repository root. */
export const DEFAULT_VALIDATOR_DIR = path.resolve(__dirname, '../../../../../.tools/en16931');

/** The installed runner's folder and manifest, or undefined when it is not installed. */
export function findValidator(
  dir = DEFAULT_VALIDATOR_DIR,
): { dir: string; manifest: RunnerManifest } | undefined {
  const file = path.join(dir, 'manifest.json');
  if (!existsSync(file)) return undefined;
  return { dir, manifest: JSON.parse(readFileSync(file, 'utf8')) as RunnerManifest };
}

interface Pending {
  id: string;
  header: string;
  xml: Buffer;
  timeoutMs: number;
  resolve: (answer: Record<string, unknown>) => void;
  reject: (error: Error) => void;
}

export interface SaxonRunnerOptions {
  dir: string;
  manifest: RunnerManifest;
  /** Receives the runner's stderr lines. */
  onStderr?: (line: string) => void;
}

/** The runner process and its queue. */
export class SaxonRunner {
  private child: ChildProcess | undefined;
  private ready: Promise<void> | undefined;
  private readonly queue: Pending[] = [];
  private current: { pending: Pending; timer: NodeJS.Timeout } | undefined;
  private answers: ((line: string) => void) | undefined;
  private nextId = 1;
  private closed = false;

  constructor(private readonly options: SaxonRunnerOptions) {}

  /** The artefacts the runner knows, by key (`en16931-cii`, `factur-x-basic`, …). */
  get artefacts(): RunnerManifest['artefacts'] {
    return this.options.manifest.artefacts;
  }

  /**
   * Runs the artefacts named by key on `xml`, in order. An empty `xml` compiles them only (a warm-up).
   * Rejects with {@link ValidatorUnavailable} when the runner cannot start, times out or fails.
   */
  async run(xml: Uint8Array, keys: readonly string[], timeoutMs: number): Promise<ArtefactResult[]> {
    const paths = keys.map((k) => {
      const artefact = this.artefacts[k];
      if (!artefact) throw new ValidatorUnavailable(`the runner has no artefact ${k}`);
      return artefact.path;
    });
    const id = String(this.nextId++);
    const bytes = Buffer.from(xml.buffer, xml.byteOffset, xml.byteLength);
    const answer = await new Promise<Record<string, unknown>>((resolve, reject) => {
      if (this.closed) return reject(new ValidatorUnavailable('the runner is closed'));
      this.queue.push({
        id,
        header: `${id} ${bytes.length} ${paths.join(',')}\n`,
        xml: bytes,
        timeoutMs,
        resolve,
        reject,
      });
      this.pump();
    });
    if (typeof answer.error === 'string')
      throw new ValidatorUnavailable(`the runner failed: ${answer.error}`);
    return (answer.results as ArtefactResult[] | undefined) ?? [];
  }

  /** Stops the process; queued requests are refused. */
  async close(): Promise<void> {
    this.closed = true;
    for (const p of this.queue.splice(0)) p.reject(new ValidatorUnavailable('the runner is closed'));
    this.stop(new ValidatorUnavailable('the runner is closed'));
  }

  private start(): Promise<void> {
    const { dir, manifest } = this.options;
    const classpath = manifest.classpath.map((p) => path.join(dir, p)).join(path.delimiter);
    const child = spawn(
      'java',
      [...JVM_OPTIONS, '-cp', classpath, manifest.mainClass, path.join(dir, 'artefacts')],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    this.child = child;
    // A write to a runner that just died fails with EPIPE: its exit answers the request.
    child.stdin?.on('error', () => {});
    // An idle runner keeps no process alive (the worker never waits on it to exit); a request in
    // flight does (see `hold`).
    this.hold(false);
    createInterface({ input: child.stderr! }).on('line', (line) => this.options.onStderr?.(line));
    return new Promise<void>((resolve, reject) => {
      let up = false;
      createInterface({ input: child.stdout! }).on('line', (line) => {
        if (!up) {
          if (line === 'ready') {
            up = true;
            resolve();
          }
          return;
        }
        this.answers?.(line);
      });
      child.once('error', (error) => {
        const failure = new ValidatorUnavailable(`the runner cannot start: ${error.message}`, {
          cause: error,
        });
        if (!up) reject(failure);
        this.stop(failure);
      });
      child.once('exit', (code, signal) => {
        const failure = new ValidatorUnavailable(`the runner ended (${signal ?? code})`);
        if (!up) reject(failure);
        if (this.child === child) this.stop(failure);
      });
    });
  }

  /** Whether the runner's handles keep the event loop alive: while a request waits for its answer. */
  private hold(on: boolean): void {
    const child = this.child;
    if (!child) return;
    for (const handle of [child, child.stdin, child.stdout, child.stderr] as Array<{
      ref?: () => void;
      unref?: () => void;
    } | null>) {
      if (on) handle?.ref?.();
      else handle?.unref?.();
    }
  }

  /** Ends the process; the request in flight fails with `error`; the queue goes on with a new one. */
  private stop(error: Error): void {
    const child = this.child;
    this.child = undefined;
    this.ready = undefined;
    this.answers = undefined;
    if (child && child.exitCode === null) child.kill('SIGKILL');
    const current = this.current;
    this.current = undefined;
    if (current) {
      clearTimeout(current.timer);
      current.pending.reject(error);
    }
    if (!this.closed) queueMicrotask(() => this.pump());
  }

  private pump(): void {
    if (this.current || this.queue.length === 0 || this.closed) return;
    const pending = this.queue.shift()!;
    const timer = setTimeout(
      () => this.stop(new ValidatorUnavailable(`timeout: no answer within ${pending.timeoutMs} ms`)),
      pending.timeoutMs,
    );
    timer.unref();
    this.current = { pending, timer };
    this.ready ??= this.start();
    this.hold(true);
    this.ready.then(
      () => {
        if (this.current?.pending !== pending) return;
        this.answers = (line) => {
          if (this.current?.pending !== pending) return;
          let answer: Record<string, unknown>;
          try {
            answer = JSON.parse(line) as Record<string, unknown>;
          } catch {
            this.stop(
              new ValidatorUnavailable(`the runner answered something else than JSON: ${line.slice(0, 200)}`),
            );
            return;
          }
          if (answer.id !== pending.id) return;
          clearTimeout(timer);
          this.current = undefined;
          if (this.queue.length === 0) this.hold(false);
          pending.resolve(answer);
          this.pump();
        };
        this.child?.stdin?.write(pending.header);
        this.child?.stdin?.write(pending.xml);
      },
      (error: Error) => {
        if (this.current?.pending === pending) this.stop(error);
      },
    );
  }
}
