import { BigQuery } from '@google-cloud/bigquery';
import {
  batchMergeSql,
  batchMergeStatement,
  bigQueryError,
  MAX_KEY_DAYS_PER_STATEMENT,
  type Statement,
  statementTimeoutMs,
} from '../../worker/src/adapters/stores/bigquery-store';
import { keyDay, type Row } from '../../worker/src/contract/row';
import { BIGQUERY_DML_LIMITS } from '../../worker/src/contract/settings';
import type { Deadline } from '../../worker/src/core/deadline';
import * as errors from '../../worker/src/core/errors';
import type { BatchStore } from '../../worker/src/core/ports';
import { batchStoreOf } from '../batch-store';
import type { SimClock } from '../time';
import type { FaultLog, FaultSchedule } from './schedule';

/**
 * The BigQuery table, in process, at the port the worker's BigQueryStore implements (`BatchStore`):
 * group commit runs on top of it unchanged, and every failure is the error BigQueryStore would
 * throw, built by its own `bigQueryError` mapping from BigQuery's documented error texts.
 *
 * What it holds to: an insert-only MERGE matches against the table as it was when the statement
 * started and inserts when it ends, so two MERGEs of one new key that overlap both insert; at most 2
 * DML statements run and 20 wait per table, beyond that "Too many DML statements outstanding"; a
 * statement holding a row BigQuery refuses (a poison document's row) fails whole, with a 400 that
 * names no row; a request over BigQuery's request size limit (10 MB, {@link REQUEST_LIMIT_BYTES},
 * measured as the client library serializes the statement's parameters) is refused before it
 * becomes a job, with the 400 BigQuery answers for it. The schedule adds, per statement: concurrent-update errors, a full DML queue, slow
 * statements (which commit late, whoever still waits for them) and hung ones (never answer, never
 * commit). A statement sent by an instance that has been killed never arrives.
 *
 * Every statement carries the `jobTimeoutMs` BigQueryStore gives it (`statementTimeoutMs` of its
 * deadline): one still running then (queued, or slow) ends with BigQuery's timeout error and does
 * not commit. Assumption: the stop always succeeds. BigQuery documents that it "may not always
 * succeed in canceling it before the job completes"; the worker's other guard, the key's lease
 * held past that bound, is what covers a stop that fails (docs/testing.md).
 */

/** A row of the raw table, with what the checks need to know about how it got there. */
export interface RawRow {
  /** The row's identity in the table (its place in insertion order). */
  id: number;
  row: Row;
  /** When its MERGE committed (simulated ms). */
  committedAtMs: number;
  statement: number;
  instance: number;
  /** Its key day (the table's partition), as its MERGE computed it. */
  keyDay: string;
}

export interface StatementRecord {
  index: number;
  kind: 'lookup' | 'merge';
  instance: number;
  keys: string[];
  startedAtMs: number;
  endedAtMs?: number;
  outcome?: string;
}

const TABLE = 'docline-sim:docline.documents';

/**
 * BigQuery's limit on the size of one request (jobs.insert, jobs.query), parameters included:
 * "Maximum request size: 10 MB" (BigQuery quotas, query jobs). The API's refusal names it in bytes
 * ("Request payload size exceeds the limit: 10485760 bytes."), so the model takes 10 MiB.
 */
export const REQUEST_LIMIT_BYTES = 10_485_760;

/** The outcome recorded for a MERGE request refused for its size (it never became a job). */
export const REFUSED_TOO_LARGE = 'refused: request too large';

/** A client to build statements with, as the adapter does (no call is ever made with it). */
const STATEMENT_BUILDER = new BigQuery({ projectId: 'docline-sim' });

/**
 * The bytes of a statement's jobs.insert request as the client library sends it: the SQL and its
 * named parameters, each turned into its REST form (`queryParameters`) by the library's own
 * `valueToQueryParameter_`, then JSON.
 */
export function requestBytes(statement: Pick<Statement, 'query' | 'params' | 'types'>): number {
  const types = statement.types as Record<string, Parameters<typeof BigQuery.valueToQueryParameter_>[1]>;
  const queryParameters = Object.entries(statement.params as Record<string, unknown>).map(
    ([name, value]) => ({ name, ...BigQuery.valueToQueryParameter_(value, types[name]) }),
  );
  return Buffer.byteLength(
    JSON.stringify({
      configuration: {
        query: { query: statement.query, useLegacySql: false, parameterMode: 'named', queryParameters },
      },
    }),
  );
}

/** The bytes of the batched MERGE that writes `rows` (the adapter's own statement for them). */
export function mergeRequestBytes(rows: readonly Row[], now: Date): number {
  const dayOf = (row: Row) => keyDay(row, now);
  const days = [...new Set(rows.map(dayOf))].slice(0, MAX_KEY_DAYS_PER_STATEMENT);
  return requestBytes(
    batchMergeStatement(STATEMENT_BUILDER, 'docline-sim.docline.documents', rows, days, dayOf),
  );
}

/** BigQuery's answer to a request over {@link REQUEST_LIMIT_BYTES}: a 400 before any job exists. */
export function requestTooLarge(): Error {
  return apiError(400, 'badRequest', `Request payload size exceeds the limit: ${REQUEST_LIMIT_BYTES} bytes.`);
}

/**
 * Whether the store's MERGE stamps `processed_at` itself with `CURRENT_TIMESTAMP()`. GoogleSQL
 * records that time at the start of the statement (not when it commits), so the model stamps the
 * time the statement started running; otherwise the row keeps the time the worker gave it.
 */
const MERGE_STAMPS_PROCESSED_AT = /CURRENT_TIMESTAMP\(\)/.test(
  batchMergeSql('docline-sim.docline.documents'),
);

export class Warehouse {
  readonly raw: RawRow[] = [];
  readonly statements: StatementRecord[] = [];
  private running = 0;
  private readonly queue: Array<() => void> = [];
  private next = 0;
  /** Called after every commit (the view readers look then). */
  onCommit: () => void = () => {};

  constructor(
    private readonly time: SimClock,
    private readonly schedule: FaultSchedule['bigquery'],
    private readonly poisonKeys: ReadonlySet<string>,
    private readonly faults: FaultLog,
  ) {}

  /** The `BatchStore` of one instance; `alive()` false once the instance is killed. */
  store(instance: number, alive: () => boolean): BatchStore {
    const seenMany = (keys: readonly string[], deadline?: Deadline) =>
      this.submit(instance, alive, [...keys], undefined, deadline);
    const recordMany = (rows: readonly Row[], deadline?: Deadline) =>
      this.submit(
        instance,
        alive,
        rows.map((r) => r.dedup_key),
        rows,
        deadline,
      );
    return batchStoreOf(seenMany, recordMany);
  }

  /**
   * What the `documents` view returns: per dedup key the first row by `processed_at`, then
   * `message_id` (the order of contract/views.ts).
   */
  view(): Map<string, RawRow> {
    const first = new Map<string, RawRow>();
    for (const r of this.raw) {
      const seen = first.get(r.row.dedup_key);
      if (
        !seen ||
        r.row.processed_at < seen.row.processed_at ||
        (r.row.processed_at === seen.row.processed_at && r.row.message_id < seen.row.message_id)
      )
        first.set(r.row.dedup_key, r);
    }
    return first;
  }

  /** One statement at the `BatchStore` port: its outcome as `BigQueryStore` would throw it. */
  private submit(
    instance: number,
    alive: () => boolean,
    keys: string[],
    rows?: readonly Row[],
    deadline?: Deadline,
  ): Promise<Set<string>> {
    const operation = rows ? 'record' : 'seen';
    const job = this.execute(instance, alive, keys, rows, statementTimeoutMs(deadline));
    const mapped = job.done.catch((error: unknown) => {
      throw bigQueryError(error, operation);
    });
    if (job.lost === 'lostAfterCommit') return mapped.then(() => Promise.reject(outcomeUnknown(job.index)));
    if (job.lost === 'resetWhilePolling') {
      void mapped.catch(() => undefined);
      return this.time.sleep(job.lostAfterMs).then(() => Promise.reject(outcomeUnknown(job.index)));
    }
    return mapped;
  }

  /** Records a MERGE request refused for its size (it never became a job). */
  refusedTooLarge(instance: number, keys: string[]): void {
    this.statements.push({
      index: this.statements.length,
      kind: 'merge',
      instance,
      keys,
      startedAtMs: this.time.nowMs(),
      endedAtMs: this.time.nowMs(),
      outcome: REFUSED_TOO_LARGE,
    });
  }

  /** Whether the MERGE of `rows` is a request over BigQuery's size limit. */
  tooLarge(rows: readonly Row[]): boolean {
    return mergeRequestBytes(rows, this.time.clock.now()) > REQUEST_LIMIT_BYTES;
  }

  /**
   * One statement, as BigQuery runs it: `done` settles with the keys found (a lookup) or inserted
   * (a MERGE), or fails with BigQuery's error as its API answers it. `lost` says that the client
   * does not get that answer (the schedule's `outcomeUnknown`): after the commit, or while the job
   * runs on (`lostAfterMs` after it starts). `timeoutMs`: the job's `jobTimeoutMs`.
   *
   * The table is partitioned by key day: a MERGE matches a key in the row's own key day only, and a
   * lookup given `since` (its first key day) finds only rows of that day or later.
   */
  execute(
    instance: number,
    alive: () => boolean,
    keys: string[],
    rows: readonly Row[] | undefined,
    timeoutMs: number | undefined,
    since?: string,
  ): {
    index: number;
    done: Promise<Set<string>>;
    lost?: 'lostAfterCommit' | 'resetWhilePolling';
    lostAfterMs: number;
  } {
    const kind: StatementRecord['kind'] = rows ? 'merge' : 'lookup';
    // A killed instance sends nothing.
    if (!alive()) return { index: -1, done: new Promise(() => {}), lostAfterMs: 0 };
    // A request over the size limit is refused as it arrives: no job, no DML slot, no plan of the
    // schedule's (those belong to statements that run).
    if (rows && this.tooLarge(rows)) {
      this.refusedTooLarge(instance, keys);
      return { index: -1, done: Promise.reject(requestTooLarge()), lostAfterMs: 0 };
    }
    const stopAtMs = timeoutMs === undefined ? Number.POSITIVE_INFINITY : this.time.nowMs() + timeoutMs;
    const plan = this.schedule.statements[this.next++] ?? { latencyMs: 1_000 };
    const record: StatementRecord = {
      index: this.statements.length,
      kind,
      instance,
      keys,
      startedAtMs: this.time.nowMs(),
    };
    this.statements.push(record);
    const job = (done: Promise<Set<string>>) => ({ index: record.index, done, lostAfterMs: 0 });
    const end = (outcome: string) => {
      record.endedAtMs = this.time.nowMs();
      record.outcome = outcome;
    };
    if (kind === 'merge' && plan.fault === 'dmlQueueFull') {
      this.faults.injected('bigquery.dmlQueueFull', keys, `statement ${record.index}`);
      end('dml queue full');
      return job(this.time.sleep(200).then(() => Promise.reject(queueFull())));
    }
    if (
      kind === 'merge' &&
      this.running >= BIGQUERY_DML_LIMITS.running &&
      this.queue.length >= BIGQUERY_DML_LIMITS.queued
    ) {
      end('dml queue full (limit)');
      return job(Promise.reject(queueFull()));
    }
    const now = this.time.nowMs();
    const outage = (this.schedule.outages ?? []).find((o) => now >= o.atMs && now < o.atMs + o.forMs);
    if (outage) {
      this.faults.injected(
        'bigquery.outage',
        keys,
        `statement ${record.index} (${kind}): 503 (outage of ${outage.forMs} ms)`,
      );
      end('outage');
      return job(
        this.time
          .sleep(1_000)
          .then(() =>
            Promise.reject(
              apiError(
                503,
                'backendError',
                'Error encountered during execution. Retrying may solve the problem.',
              ),
            ),
          ),
      );
    }
    if (plan.fault === 'hung') {
      this.faults.injected(
        'bigquery.hungStatement',
        keys,
        `statement ${record.index} (${kind}) never answers`,
      );
      end('hung');
      return job(new Promise(() => {}));
    }
    if (plan.fault === 'slow')
      this.faults.injected(
        'bigquery.slowStatement',
        keys,
        `statement ${record.index} (${kind}) takes ${plan.latencyMs} ms`,
      );
    const run = async (): Promise<Set<string>> => {
      if (kind === 'lookup') {
        // A query is stopped at its jobTimeoutMs too.
        if (this.time.nowMs() + plan.latencyMs / 2 > stopAtMs) {
          await this.time.sleep(Math.max(0, stopAtMs - this.time.nowMs()));
          end('timed out');
          throw timedOut(timeoutMs ?? 0);
        }
        await this.time.sleep(plan.latencyMs / 2);
        const present = new Set(
          this.raw.filter((r) => since === undefined || r.keyDay >= since).map((r) => r.row.dedup_key),
        );
        end('ok');
        return new Set(keys.filter((k) => present.has(k)));
      }
      if (this.running >= BIGQUERY_DML_LIMITS.running) {
        // Queued: stopped at its jobTimeoutMs like a running job (it leaves the queue, never runs).
        const admitted = await new Promise<boolean>((resolve) => {
          const admit = () => {
            timer?.cancel();
            resolve(true);
          };
          const timer = Number.isFinite(stopAtMs)
            ? this.time.after(Math.max(0, stopAtMs - this.time.nowMs()), () => {
                this.queue.splice(this.queue.indexOf(admit), 1);
                resolve(false);
              })
            : undefined;
          this.queue.push(admit);
        });
        if (!admitted) {
          end('failed: timed out while queued');
          throw timedOut(timeoutMs ?? 0);
        }
      } else this.running++;
      try {
        const present = new Set(this.raw.map((r) => `${r.row.dedup_key} ${r.keyDay}`));
        const startedAt = this.time.clock.now().toISOString();
        // Stopped at its jobTimeoutMs: still running then (queued included), it never commits.
        if (this.time.nowMs() + plan.latencyMs > stopAtMs) {
          await this.time.sleep(Math.max(0, stopAtMs - this.time.nowMs()));
          throw timedOut(timeoutMs ?? 0);
        }
        await this.time.sleep(plan.latencyMs);
        if (plan.fault === 'concurrentUpdate') {
          this.faults.injected('bigquery.concurrentUpdate', keys, `statement ${record.index}`);
          throw apiError(
            400,
            'invalidQuery',
            `Could not serialize access to table ${TABLE} due to concurrent update`,
          );
        }
        const poison = (rows ?? []).filter((r) => this.poisonKeys.has(r.dedup_key));
        if (poison.length > 0) {
          this.faults.injected(
            poison.length === 1
              ? 'bigquery.refusedOneRow'
              : poison.length === 2
                ? 'bigquery.refusedTwoRows'
                : 'bigquery.refusedManyRows',
            poison.map((r) => r.dedup_key),
            `statement ${record.index} refused (${keys.length} rows)`,
          );
          throw apiError(400, 'invalidQuery', 'Query error: Invalid JSON payload in a parameter value.');
        }
        const inserted = new Set<string>();
        for (const row of rows ?? []) {
          const day = keyDay(row, new Date(startedAt));
          if (present.has(`${row.dedup_key} ${day}`)) continue;
          const stored = MERGE_STAMPS_PROCESSED_AT ? { ...row, processed_at: startedAt } : row;
          this.raw.push({
            id: this.raw.length,
            row: stored,
            committedAtMs: this.time.nowMs(),
            statement: record.index,
            instance,
            keyDay: day,
          });
          inserted.add(row.dedup_key);
        }
        end(`inserted ${inserted.size}`);
        this.onCommit();
        return inserted;
      } catch (error) {
        end(`failed: ${error instanceof Error ? error.message.slice(0, 80) : String(error)}`);
        throw error;
      } finally {
        const next = this.queue.shift();
        if (next) next();
        else this.running--;
      }
    };
    const done = run();
    if (kind === 'merge' && plan.fault === 'outcomeUnknown') {
      const lost = plan.unknown ?? 'lostAfterCommit';
      this.faults.injected(
        'bigquery.outcomeUnknown',
        keys,
        lost === 'lostAfterCommit'
          ? `statement ${record.index}: its answer is lost`
          : `statement ${record.index}: the client loses the job while it runs on`,
      );
      return { index: record.index, done, lost, lostAfterMs: Math.min(plan.latencyMs / 2, 1_000) };
    }
    return job(done);
  }
}

/** An error as BigQuery's API answers it (what the client library throws). */
function apiError(code: number, reason: string, message: string): Error {
  return Object.assign(new Error(message), { code, errors: [{ reason, message }] });
}

/**
 * What the store adapter throws for a write whose outcome it could not learn: the worker's
 * `OutcomeUnknownError` where it has one, else the transient error BigQuery's 503 maps to (what the
 * adapter surfaced before it could tell the two apart).
 */
function outcomeUnknown(statement: number): Error {
  const Unknown = (errors as Record<string, unknown>).OutcomeUnknownError as
    | (new (
        code: string,
        message: string,
      ) => Error)
    | undefined;
  const message = `the outcome of statement ${statement} is unknown (its answer was lost)`;
  if (Unknown) return new Unknown('bigquery_outcome_unknown', message);
  return bigQueryError(
    apiError(503, 'backendError', `Error encountered during execution: ${message}`),
    'record',
  );
}

/** BigQuery's answer to a job stopped at its `jobTimeoutMs`. */
function timedOut(timeoutMs: number): Error {
  const message = `Job timed out after ${Math.ceil(timeoutMs / 1000)} sec`;
  return apiError(400, 'timeout', message);
}

function queueFull(): Error {
  return apiError(
    400,
    'resourcesExceeded',
    `Resources exceeded during query execution: Too many DML statements outstanding against table ${TABLE}, limit is ${BIGQUERY_DML_LIMITS.queued}.`,
  );
}
