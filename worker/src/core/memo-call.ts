import type { Deadline } from './deadline';
import { ShuttingDownError } from './deadline';
import type { Logger } from './ports';
import { probe } from './probes';

/**
 * How the memo's parts (core/memo.ts, core/key-lease.ts) call their store: every call bounded by
 * its own timeout and by the delivery's deadline, and a failure that is the memo's passed by with a
 * warning, never thrown: the memo is a cache and a lease, never a claim.
 */
export class MemoCalls {
  constructor(
    private readonly capMs: number,
    private readonly logger?: Logger,
  ) {}

  /** One memo call, bounded by its own timeout and by the delivery's deadline. */
  call<T>(what: string, call: Promise<T>, deadline: Deadline): Promise<T> {
    return deadline.race(`memo ${what}`, call, { capMs: this.capMs });
  }

  /**
   * A memo call failed: when the delivery's own deadline came (or its instance is shutting down),
   * that is not the memo failing but the delivery being over, and passing the memo by would start
   * the next call past the deadline: it is thrown (503). Any other failure is the memo's: logged
   * with `warning` (what the delivery does instead) and passed by.
   */
  passBy(error: unknown, deadline: Deadline, what: string, warning: string, dedupKey: string): void {
    if (error instanceof ShuttingDownError) throw error;
    deadline.check(`memo ${what}`);
    probe('memo.callPassedBy');
    this.warn(warning, dedupKey, error);
  }

  warn(message: string, dedupKey: string, error?: unknown): void {
    this.logger?.warn(message, {
      dedupKey,
      ...(error === undefined ? {} : { error: error instanceof Error ? error.message : String(error) }),
    });
  }
}
