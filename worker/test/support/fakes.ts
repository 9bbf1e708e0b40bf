import { sampleAnalysis } from '../../../sim/samples';
import type { AnalysisResult } from '../../src/contract/analysis';
import { RejectionError, TransientError } from '../../src/core/errors';
import type {
  Analyzer,
  AnalyzerInput,
  Clock,
  LogFields,
  Logger,
  ObjectRef,
  Reader,
} from '../../src/core/ports';
import { SEVERITY_OF } from '../../src/log';

/** Test doubles for the edges of handle(): fakes with real behaviour, not mocks. */

export const fixedClock = (iso = '2026-11-30T04:00:00.000Z'): Clock => ({ now: () => new Date(iso) });

/** A bucket in memory; reading a missing generation is `object_gone`, like Cloud Storage. */
export class MemoryReader implements Reader {
  readonly objects = new Map<string, Buffer>();
  reads: ObjectRef[] = [];

  put(bucket: string, name: string, generation: string, bytes: Buffer | string): void {
    this.objects.set(`${bucket}/${name}#${generation}`, Buffer.from(bytes));
  }

  /** Puts `bytes` as the object that `body`, a push body, announces. */
  putAnnounced(body: Record<string, unknown>, bytes: Buffer | string): void {
    const attrs = (body.message as { attributes: Record<string, string> }).attributes;
    this.put(attrs.bucketId!, attrs.objectId!, attrs.objectGeneration!, bytes);
  }

  async read(ref: ObjectRef, maxBytes: number): Promise<Buffer> {
    this.reads.push(ref);
    const bytes = this.objects.get(`${ref.bucket}/${ref.name}#${ref.generation}`);
    if (!bytes)
      throw new RejectionError('object_gone', `generation ${ref.generation} of ${ref.name} no longer exists`);
    if (bytes.length > maxBytes) throw new RejectionError('too_large', `over ${maxBytes} bytes`);
    return bytes;
  }
}

/**
 * An analyzer whose answers the test scripts: by default a fixed analysis; `failNext` queues
 * errors; `gate` holds every call until the test opens it.
 */
export class ScriptedAnalyzer implements Analyzer {
  calls: AnalyzerInput[] = [];
  private failures: Error[] = [];
  private gateOpen: Promise<void> = Promise.resolve();
  private openGate: () => void = () => {};
  private arrivals: Array<{ count: number; resolve: () => void }> = [];

  failNext(...errors: Error[]): this {
    this.failures.push(...errors);
    return this;
  }

  /** Holds calls until {@link release}. */
  hold(): this {
    this.gateOpen = new Promise((resolve) => {
      this.openGate = resolve;
    });
    return this;
  }

  release(): void {
    this.openGate();
  }

  /** Resolves once `count` calls have arrived. */
  arrived(count: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.calls.length >= count) resolve();
      else this.arrivals.push({ count, resolve });
    });
  }

  async analyze(input: AnalyzerInput): Promise<AnalysisResult> {
    this.calls.push(input);
    for (const waiter of this.arrivals.filter((w) => this.calls.length >= w.count)) waiter.resolve();
    await this.gateOpen;
    const failure = this.failures.shift();
    if (failure) throw failure;
    return {
      analysis: sampleAnalysis(),
      model: 'scripted',
      usage: { promptTokens: 1200, outputTokens: 300, totalTokens: 1500 },
    };
  }
}

export const transient = () => new TransientError('analyzer_unavailable', 'the analyzer answered 503');

/** A logger that keeps its entries for assertions. */
export class MemoryLogger implements Logger {
  constructor(
    readonly entries: Array<{ severity: string; message: string } & LogFields> = [],
    private readonly bindings: LogFields = {},
  ) {}
  private push(severity: string, message: string, fields?: LogFields) {
    this.entries.push({ severity, message, ...this.bindings, ...fields });
  }
  debug(m: string, f?: LogFields) {
    this.push(SEVERITY_OF.debug, m, f);
  }
  info(m: string, f?: LogFields) {
    this.push(SEVERITY_OF.info, m, f);
  }
  warn(m: string, f?: LogFields) {
    this.push(SEVERITY_OF.warn, m, f);
  }
  error(m: string, f?: LogFields) {
    this.push(SEVERITY_OF.error, m, f);
  }
  child(bindings: LogFields): Logger {
    return new MemoryLogger(this.entries, { ...this.bindings, ...bindings });
  }
}
