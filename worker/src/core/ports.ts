import type { Analysis, AnalysisProgress, AnalysisResult, Usage } from '../contract/analysis';
import type { Row } from '../contract/row';
import type { Deadline } from './deadline';
import type { FallbackReason, RejectionReason } from './errors';

/**
 * The ports the core owns. Adapters implement them; the core never imports an adapter.
 */

/** Where rows live. `record` is the single conditional write: it inserts unless the key is there. */
export interface Store {
  /**
   * Whether a row with this dedup key exists (a cheap lookup, may miss under a race). A store that
   * waits or calls out bounds that by the delivery's `deadline`, and starts nothing it cannot finish.
   */
  seen(dedupKey: string, deadline?: Deadline): Promise<boolean>;
  /**
   * Inserts the row unless its dedup key exists; true when this call inserted it. The store stamps
   * `processed_at` itself, at the write: SQLite under its write lock (the order of the commits),
   * BigQuery with the statement's start (`CURRENT_TIMESTAMP()` is the time a statement began, not
   * its commit: two MERGEs of one key that overlap sort by their starts, whichever commits first,
   * which is why the key's lease keeps a second writer out while the first runs).
   */
  record(row: Row, deadline?: Deadline): Promise<boolean>;
  /** Throws when the store cannot be reached (for /healthz). */
  ping(): Promise<void>;
  /** Scale-in: sends what waits to be written now (a batching store), without waiting for more. */
  drain?(): void;
  close?(): Promise<void>;
}

/**
 * A store that can take many rows at once. Group commit (adapters/stores/group-commit-store.ts) turns
 * concurrent `seen()`/`record()` calls into one call of each here.
 */
export interface BatchStore extends Pick<Store, 'ping' | 'close'> {
  /** The keys among `keys` that have a row (one lookup), before `deadline`. */
  seenMany(keys: readonly string[], deadline?: Deadline): Promise<Set<string>>;
  /**
   * Inserts each row unless its key exists, in one statement that ends by `deadline` (the earliest
   * of the batch's deliveries). The rows have distinct keys. Resolves with the dedup keys whose row
   * from this call went in.
   */
  recordMany(rows: readonly Row[], deadline?: Deadline): Promise<Set<string>>;
  /**
   * The instances of the deployment that started a write in the last minute, this one included
   * (at least 1), where the store can tell: group commit spaces its writes by it. Free of bytes.
   */
  writers?(deadline?: Deadline): Promise<number>;
}

/**
 * A paid analysis kept so that a retry does not pay again: its result, or the permanent refusal it
 * ended in (`analysis_failed`, `safety_blocked`), with the tokens it cost either way; or, under a
 * key of its own, the attempts a delivery paid before a failure that is not about the document
 * ({@link MemoProgress}).
 */
export type MemoEntry = (MemoOutcome | MemoProgress) & {
  /** ISO timestamp; entries older than the redelivery window are ignored and pruned. */
  createdAt: string;
};

/**
 * The paid attempts of an analysis that did not end: a first answer outside the schema, then a
 * failure that is not about the document (a 503, a dependency refusal, the deadline). A later
 * delivery goes on after them instead of paying them again.
 */
export type MemoProgress = { progress: AnalysisProgress; usage: Usage };

/**
 * What a memo entry keeps of a paid analysis: its result (with how the analyzer read each field,
 * when it said: entries kept before readings existed have none) or its refusal, and its tokens.
 */
export type MemoOutcome = (
  | { analysis: Analysis; model: string; readings?: AnalysisResult['readings'] }
  | { rejection: { reason: RejectionReason; detail: string } }
) & { usage: Usage };

/**
 * Where paid analyses are kept: a cache, never a claim. Losing an entry costs one more analysis,
 * never a document; an entry never stops a delivery from doing the work.
 */
export interface MemoStore {
  /** The entry under `key`, or undefined. */
  get(key: string): Promise<MemoEntry | undefined>;
  /** Create-only: when `key` exists the first entry stays and this resolves all the same. */
  create(key: string, entry: MemoEntry): Promise<void>;
  /**
   * Takes the lease on `key` until `expiresAt`. A key has one lease object: created when there is
   * none; taken over by a compare-and-swap rewrite when the one there expired before `now` (two
   * deliveries that find it expired cannot both take it); else left alone. Resolves the holder's
   * token when this call took it (`earlier`: the key was leased before), else the expiry of the
   * live lease another holder has, renewals included. A lease only makes a concurrent delivery wait,
   * never longer than its expiry.
   */
  lease(key: string, expiresAt: Date, now: Date): Promise<LeaseTaken | { heldUntil: Date }>;
  /**
   * The holder's heartbeat, and its end: moves the expiry of the lease `token` holds to
   * `expiresAt` (a compare-and-swap rewrite: a lease taken over since is left alone), ahead (past
   * the bound of a write's statement) or back (to now: the work is over, the next delivery need not
   * wait). Never back while it is held unless `release`: a slow renewal that lands after a later one
   * cannot shorten the lease. Resolves the token that holds it now, or undefined when the lease is
   * no longer this holder's.
   */
  renew(key: string, token: string, expiresAt: Date, release?: boolean): Promise<string | undefined>;
  /**
   * Whether a lease on `key` was ever taken (and not yet pruned with the redelivery window), without
   * taking it. Optional: a store without it is never asked, and a delivery whose key the memo knows
   * nothing of then skips the store's lookup.
   */
  hasLease?(key: string): Promise<boolean>;
}

/** A lease this call took: the token its renewals show, and whether the key was leased before. */
export interface LeaseTaken {
  token: string;
  earlier: boolean;
}

/** One generation of one object. */
export interface ObjectRef {
  bucket: string;
  name: string;
  /** Decimal string: generations exceed 2^53. */
  generation: string;
}

/**
 * Reads exactly one generation. Throws RejectionError('object_gone') when that generation no
 * longer exists, RejectionError('too_large') past `maxBytes`, TransientError otherwise.
 */
export interface Reader {
  read(ref: ObjectRef, maxBytes: number): Promise<Buffer>;
}

export interface AnalyzerInput {
  bytes: Buffer;
  contentType: string;
  /** Object name, for logs and hints; never sent anywhere but the analyzer. */
  name: string;
  /** The delivery's deadline: a paid call that could outlive it is not started. */
  deadline?: Deadline;
  /**
   * The paid attempts of this delivery's earlier run, which then failed transiently (a 429): the
   * analyzer goes on after them instead of paying them again. Their tokens are not counted again.
   */
  resume?: AnalysisProgress;
}

/** Extracts the invoice fields. Throws RejectionError for permanent refusals, TransientError otherwise. */
export interface Analyzer {
  analyze(input: AnalyzerInput): Promise<AnalysisResult>;
}

/**
 * What the row's `e_invoice_validation` column records: the verdict of the validation artefacts on
 * the document's XML (adapters/e-invoice/validation), free of tokens. The core copies it as it is.
 */
export type EInvoiceValidationRecord = { verdict: string } & Record<string, unknown>;

/** What an {@link EInvoiceReader} found in a document. */
export type EInvoiceReading =
  /** The invoice, read from its structure: the model names the syntax, usage is zero. */
  | { kind: 'read'; result: AnalysisResult; validation?: EInvoiceValidationRecord }
  /** A structure that cannot be used: the document is analysed as without one; the row records why. */
  | { kind: 'fallback'; reason: FallbackReason; detail: string; validation?: EInvoiceValidationRecord }
  /** No structure: an ordinary document. */
  | { kind: 'none' };

/**
 * Reads the invoice a structured document states itself (a Factur-X/ZUGFeRD PDF, a CII or UBL
 * XML): exact, and free, so it comes before (and never through) the paid analysis.
 */
export interface EInvoiceReader {
  /** Whether a document of this MIME type (lower case, no parameters) may carry a structured invoice. */
  accepts(mime: string): boolean;
  /** Throws RejectionError (`not_an_e_invoice`) for an XML document that is no EN 16931 invoice. */
  read(input: AnalyzerInput): Promise<EInvoiceReading>;
}

/**
 * Admission to the paid work (read + analyse): bounds how many run at once and waits out a spent
 * quota. `work` learns how long it waited to be admitted.
 */
export interface Admission {
  /**
   * Waits for a turn, never past `deadline` (503), and not at all once the instance drains. `bytes`:
   * what the work's document declares it weighs (an admission may bound the bytes held at once).
   */
  run<T>(work: (waitedMs: number) => Promise<T>, deadline?: Deadline, bytes?: number): Promise<T>;
}

/** No admission: every work goes in at once. */
export const admitAtOnce: Admission = { run: (work) => work(0) };

export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** A cancellable timer, injectable like the clock (simulations run on simulated time). */
export interface Timers {
  after(ms: number, callback: () => void): { cancel(): void };
}

/** Real timers that never keep the process alive on their own. */
export const realTimers: Timers = {
  after(ms, callback) {
    const timer = setTimeout(callback, ms);
    timer.unref();
    return { cancel: () => clearTimeout(timer) };
  },
};

export type LogFields = Record<string, unknown>;

/** Structured logger: one JSON line per call in the adapter. */
export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
  child(bindings: LogFields): Logger;
}
