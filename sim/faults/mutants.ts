import { createHash } from 'node:crypto';
import type { WorkerConfig } from '../../worker/src/config';
import { OutcomeUnknownError, RejectionError, TransientError } from '../../worker/src/core/errors';
import { MEMO_LEASE_DEFAULTS } from '../../worker/src/core/memo';
import type { Analyzer, MemoStore, Reader, Store } from '../../worker/src/core/ports';
import type { SimClock } from '../time';
import { checkInvariants, INVARIANT_IDS, type InvariantId } from './invariants';
import { runSchedule } from './run';
import { type FaultRates, generateSchedule, swarmRates } from './schedule';

/** What a mutant's changes may use: the simulated clock, and the bucket's live generations. */
export interface MutantContext {
  time: SimClock;
  /** The live (latest) generation of an object name, if any. */
  liveGeneration(bucket: string, name: string): string | undefined;
  /** The dedup key (`gs://bucket/name#generation`) a memo key is about, when known. */
  dedupKeyOf(memoKey: string): string | undefined;
}

/**
 * A named bug, injected into the real worker at run time by wrapping one of its ports (or its
 * answer on the way out): the worker's code is not touched, so each one is a bug a change to an
 * adapter or to the core could bring. The invariants prove their power by catching every one
 * within a bounded number of the soak's seeds (sim/test/mutants.test.ts).
 */
export interface Mutant {
  name: string;
  /** The bug, in words. */
  bug: string;
  /** Seeds it may take before it counts as missed, when more than MUTANT_SEED_BOUND (a rarer path). */
  seeds?: number;
  /**
   * Fault rates of the world it is hunted in, over the soak's (FAULT_RATES): for a bug whose path
   * the soak's mix reaches too rarely to be hunted in minutes (the swarm-testing idea: a world
   * per seed where that path is hot). The worker as it is must hold on the same world's seeds.
   */
  rates?: Partial<FaultRates>;
  store?: (store: Store, context: MutantContext) => Store;
  memo?: (memo: MemoStore, context: MutantContext) => MemoStore;
  analyzer?: (analyzer: Analyzer, context: MutantContext) => Analyzer;
  reader?: (reader: Reader, context: MutantContext) => Reader;
  /** The worker's HTTP answer as it leaves the instance. */
  answer?: (status: number) => number;
  /**
   * The group commit's options as the worker builds its store with them (`withGroupCommit` hands
   * them to GroupCommitStore as they are, so a mutant may set one the configuration leaves to its
   * default, such as `maxBytes`).
   */
  groupCommit?: (options: GroupCommitSettings) => GroupCommitSettings & { maxBytes?: number };
}

/** The group commit settings of the worker's configuration. */
export type GroupCommitSettings = NonNullable<WorkerConfig['groupCommit']>;

/**
 * `target` with some methods replaced; every other property reads through to it (methods bound to
 * it), so a stateful adapter keeps working and its extra methods (drain, writers) stay reachable.
 */
export function override<T extends object>(target: T, methods: Partial<T>): T {
  return new Proxy(target, {
    get(t, property) {
      if (Object.hasOwn(methods, property)) return (methods as Record<PropertyKey, unknown>)[property];
      const value = Reflect.get(t, property, t) as unknown;
      return typeof value === 'function' ? value.bind(t) : value;
    },
  });
}

const LEASE_MS = MEMO_LEASE_DEFAULTS.leaseMs;
const MONTH_MS = 30 * 24 * 60 * 60 * 1000;

/** Stable: the same document, the same draw (a bug that hits some documents, not all). */
const everyThird = (name: string) => createHash('sha256').update(name).digest()[0]! % 3 === 0;

/** Named bugs the invariants catch (docs/testing.md lists which invariant caught each). */
export const MUTANTS: readonly Mutant[] = [
  {
    name: 'ack-before-write',
    bug: 'the write answers "inserted" at once and commits in the background',
    store: (store) =>
      override(store, {
        record: async (row, deadline) => {
          void store.record(row, deadline).catch(() => undefined);
          return true;
        },
      }),
  },
  {
    name: 'ack-on-error',
    bug: 'a delivery that failed (5xx) is answered 204, as if done',
    answer: (status) => (status >= 500 ? 204 : status),
  },
  {
    name: 'refused-key-answered-duplicate',
    bug: 'a write BigQuery refused is taken for "the key is already there" (answered as a duplicate)',
    store: (store) =>
      override(store, {
        record: (row, deadline) => store.record(row, deadline).catch(() => false),
      }),
  },
  {
    name: 'seen-always-true',
    bug: 'the lookup finds every key, so a first delivery is answered duplicate with no row',
    store: (store) => override(store, { seen: async () => true }),
  },
  {
    name: 'seen-skipped',
    bug: 'the lookup is skipped (always "not seen"): a redelivery of a written document whose memo lost its analysis pays again',
    // The lookup matters only for a delivery of a written document whose kept analysis was lost or
    // cannot be read (a failed keep, failed reads): hunted where the memo fails one call in four
    // and every ack is followed by one more push of its message. Hung statements are left out: a
    // redelivery whose lookup meets one waits out its own deadline past the run's end (I6 "never
    // answered"), which says nothing of the lookup.
    rates: { memoError: 0.25, redeliveryAfterAck: 1, hungStatement: 0 },
    store: (store) => override(store, { seen: async () => false }),
  },
  {
    name: 'row-without-analysis',
    bug: 'an ok row is written without its analysis (a mapping that drops the column)',
    store: (store) =>
      override(store, {
        record: (row, deadline) =>
          store.record(row.status === 'ok' ? { ...row, analysis: null } : row, deadline),
      }),
  },
  {
    name: 'rejected-row-for-good-document',
    bug: 'a good analysis of some documents is turned into an analysis_failed rejection',
    analyzer: (analyzer) =>
      override(analyzer, {
        analyze: async (input) => {
          const result = await analyzer.analyze(input);
          if (!everyThird(input.name)) return result;
          throw new RejectionError('analysis_failed', 'mutant: a good analysis refused', {
            usage: result.usage,
          });
        },
      }),
  },
  {
    name: 'transient-as-rejection',
    bug: 'an analyzer error that is not about the document (429, 503, a timeout) becomes a rejected row',
    analyzer: (analyzer) =>
      override(analyzer, {
        analyze: (input) =>
          analyzer.analyze(input).catch((error: unknown) => {
            if (error instanceof TransientError)
              throw new RejectionError('analysis_failed', `mutant: ${error.message}`, { usage: error.usage });
            throw error;
          }),
      }),
  },
  {
    name: 'memo-not-consulted',
    bug: 'the memo of paid analyses is never read: every retry pays again',
    memo: (memo) => override(memo, { get: async () => undefined }),
  },
  {
    name: 'memo-key-ignores-document',
    bug: "the memo's key drops the document (only the analyzer version): one document's analysis is replayed for another",
    memo: (memo) => {
      const shared = (key: string) => key.replace(/\/[0-9a-f]{64}/, '/all');
      return override(memo, {
        get: (key) => memo.get(shared(key)),
        create: (key, entry) => memo.create(shared(key), entry),
      });
    },
  },
  {
    name: 'lease-not-taken',
    bug: 'every lease call answers "taken by you": concurrent deliveries of one key on two instances both work and write',
    memo: (memo) => override(memo, { lease: async () => ({ token: 'everyone', earlier: false }) }),
  },
  {
    name: 'renewal-shortens-lease',
    bug: 'a renewal moves the lease to one second from now, shorter than the heartbeat: it lapses under the holder',
    // A lease lapsing under its holder matters only to a concurrent duplicate: every upload announced twice.
    rates: { doubled: 1 },
    memo: (memo, { time }) =>
      override(memo, {
        renew: (key, token, expiresAt, release) =>
          memo.renew(key, token, release ? expiresAt : new Date(time.clock.now().getTime() + 1_000), release),
      }),
  },
  {
    name: 'write-lease-ended-early',
    bug: "the write's lease is ended as the write starts instead of held past its statement's bound",
    // It matters only while a statement runs on after its delivery gave up on it: hunted where
    // statements are often slow and instances often told to stop (the drain cuts the wait).
    rates: { slowStatement: 0.25, sigterm: 0.5 },
    memo: (memo, { time }) =>
      override(memo, {
        renew: (key, token, expiresAt, release) =>
          expiresAt.getTime() > time.clock.now().getTime() + LEASE_MS + 1
            ? memo.renew(key, token, new Date(time.clock.now().getTime()), true)
            : memo.renew(key, token, expiresAt, release),
      }),
  },
  {
    name: 'lease-never-expires',
    bug: 'a lease is taken and renewed for a month: a holder that died blocks its document for good',
    // Longer than any run's bound (a run that must leave many poison messages their pushes at one
    // a minute lasts more than a day): the document blocked is dead-lettered or stuck at the end.
    memo: (memo, { time }) =>
      override(memo, {
        lease: (key, _expiresAt, now) =>
          memo.lease(key, new Date(time.clock.now().getTime() + MONTH_MS), now),
        renew: (key, token, expiresAt, release) =>
          memo.renew(
            key,
            token,
            release ? expiresAt : new Date(time.clock.now().getTime() + MONTH_MS),
            release,
          ),
      }),
  },
  {
    name: 'live-generation-read',
    bug: 'the reader reads the live generation of the name instead of the one announced',
    reader: (reader, { liveGeneration }) =>
      override(reader, {
        read: (ref, maxBytes) =>
          reader.read(
            { ...ref, generation: liveGeneration(ref.bucket, ref.name) ?? ref.generation },
            maxBytes,
          ),
      }),
  },
  {
    name: 'gone-before-memo',
    bug: 'a PDF or XML is read before the memo is asked: once its generation is gone, the analysis an earlier delivery paid for and kept is never found, and the retry writes rejected object_gone',
    // Hot where every upload is a PDF whose generation goes after its first read, and BigQuery
    // fails writes for a while (so a delivery that kept its analysis is retried after the
    // generation went); the memo itself never fails there, so nothing excuses the lost answer.
    rates: { pdf: 1, eInvoice: 0, generationGone: 1, bigqueryOutage: 1, memoError: 0, memoHang: 0 },
    memo: (memo, { dedupKeyOf, liveGeneration }) =>
      override(memo, {
        get: async (key) => {
          const uri = /^gs:\/\/([^/]+)\/(.+\.(?:pdf|xml))#(\d+)$/.exec(dedupKeyOf(key) ?? '');
          if (uri && liveGeneration(uri[1]!, uri[2]!) !== uri[3]) return undefined;
          return memo.get(key);
        },
      }),
  },
  {
    name: 'key-day-from-clock',
    bug: "a row's key day is taken from the clock of its write, not from its event: a document written before midnight and delivered again after it is written again, in the next day's partition",
    // Hot where every run starts seconds before midnight, every ack is pushed again later, and
    // half the documents are e-invoices (no kept analysis sends their redelivery to the lookup).
    rates: { acrossMidnight: 1, redeliveryAfterAck: 1, eInvoice: 0.5 },
    store: (store) =>
      override(store, {
        record: (row, deadline) => store.record({ ...row, event_time: null, publish_time: null }, deadline),
      }),
  },
  {
    name: 'retry-asked-400-rejected',
    bug: 'a Gemini 400 that asks for a retry ("Unable to process input image. Please retry") is taken for a refusal of the document: a good invoice gets a rejected row',
    analyzer: (analyzer) =>
      override(analyzer, {
        analyze: (input) =>
          analyzer.analyze(input).catch((error: unknown) => {
            if (error instanceof TransientError && /asked for a retry/.test(error.message))
              throw new RejectionError('analysis_failed', `mutant: ${error.message}`, { usage: error.usage });
            throw error;
          }),
      }),
  },
  {
    name: 'unknown-outcome-taken-as-failure',
    bug: "a write whose outcome is unknown (a lost jobs.insert answer, a poll that failed) is reported as a plain failure: the key's lease ends while its MERGE may still commit",
    // Hunted where BigQuery loses answers often (at the store port, where an unknown outcome is
    // answered as such), every upload is announced twice, and a job whose answer is lost while it
    // runs on is slow too: the lease ended early matters only while the lost job still runs and
    // another delivery writes the key within it (on another instance: this one's group commit holds
    // the key till the job's bound).
    rates: { outcomeUnknown: 0.3, bigqueryStore: 0, doubled: 1, slowLostJob: 1 },
    store: (store) =>
      override(store, {
        record: (row, deadline) =>
          store.record(row, deadline).catch((error: unknown) => {
            if (error instanceof OutcomeUnknownError)
              throw new TransientError('bigquery_unavailable', `mutant: ${error.message}`);
            throw error;
          }),
      }),
  },
  {
    name: 'work-past-deadline',
    bug: "the analyzer and the store are not given the delivery's deadline: calls and statements run on past it",
    analyzer: (analyzer) =>
      override(analyzer, {
        analyze: (input) => {
          const { deadline: _ignored, ...rest } = input;
          return analyzer.analyze(rest);
        },
      }),
    store: (store) =>
      override(store, {
        record: (row) => store.record(row),
        seen: (key) => store.seen(key),
      }),
  },
  {
    name: 'batch-unbounded-by-bytes',
    bug: "group commit's batches are bounded by rows only, not by bytes: a burst of long invoices fills one MERGE past BigQuery's 10 MB request limit",
    // Hunted where every seed has a burst of long invoices (outside a fleet).
    rates: { largeBurst: 1 },
    groupCommit: (options) => ({ ...options, maxBytes: Number.POSITIVE_INFINITY }),
  },
];

/** The mutant named `name`, or an error that lists them. */
export function mutantNamed(name: string): Mutant {
  const found = MUTANTS.find((m) => m.name === name);
  if (!found) throw new Error(`no mutant ${name}; there are: ${MUTANTS.map((m) => m.name).join(', ')}`);
  return found;
}

/** How many of the soak's seeds (1, 2, …) a mutant may take before it counts as missed. */
export const MUTANT_SEED_BOUND = 40;

/**
 * Mutants the invariants do not catch within their bound on the current code, each with what is
 * known. Listed, never hidden: sim/test/mutants.test.ts expects each to stay uncaught (a catch
 * fails it, so the entry goes once the checker sees the bug again), and results.json records it
 * as `not caught`.
 */
export const UNCAUGHT_MUTANTS: Readonly<Record<string, string>> = {};

/** Which invariant caught a mutant, and on which seed (none: it ran the bound and broke nothing). */
export interface Catch {
  mutant: string;
  caught?: { seed: number; invariant: InvariantId; detail: string };
  seedsRun: number;
  /** Seeds passed over because the worker as it is already breaks an invariant there (a finding of its own). */
  passedOver: number[];
}

/**
 * Per world and seed, whether the worker as it is keeps every invariant (a mutant is judged on
 * those seeds only). The soak's world is keyed by the seed alone.
 */
const baseline = new Map<string, boolean>();
const worldKey = (seed: number, rates: Partial<FaultRates> | undefined) =>
  rates ? `${JSON.stringify(rates)}#${seed}` : String(seed);

/** Notes what a run of the worker as it is found on `seed` (the soak's own runs), so the hunt need not run it again. */
export function noteUnmutated(seed: number, holds: boolean): void {
  baseline.set(worldKey(seed, undefined), holds);
}

async function holdsUnmutated(seed: number, rates: Partial<FaultRates> | undefined): Promise<boolean> {
  const key = worldKey(seed, rates);
  let holds = baseline.get(key);
  if (holds === undefined) {
    const verdict = checkInvariants((await runSchedule(scheduleOf(seed, rates))).record);
    holds = INVARIANT_IDS.every((id) => verdict.violations[id].length === 0);
    baseline.set(key, holds);
  }
  return holds;
}

const scheduleOf = (seed: number, rates: Partial<FaultRates> | undefined) =>
  generateSchedule(seed, rates ? { ...swarmRates(seed), ...rates } : swarmRates(seed));

/**
 * Runs `mutant` over the soak's seeds 1 … `bound` until an invariant breaks; the invariant that
 * caught it is the first broken (in the order I1 … I8) on that seed. A seed on which the worker as
 * it is already breaks an invariant proves nothing about the mutant, and is passed over (it still
 * counts towards the bound).
 */
export async function hunt(mutant: Mutant, bound = mutant.seeds ?? MUTANT_SEED_BOUND): Promise<Catch> {
  const passedOver: number[] = [];
  for (let seed = 1; seed <= bound; seed++) {
    if (!(await holdsUnmutated(seed, mutant.rates))) {
      passedOver.push(seed);
      continue;
    }
    const { record } = await runSchedule(scheduleOf(seed, mutant.rates), { mutant });
    const verdict = checkInvariants(record);
    const invariant = INVARIANT_IDS.find((id) => verdict.violations[id].length > 0);
    if (invariant)
      return {
        mutant: mutant.name,
        caught: { seed, invariant, detail: verdict.violations[invariant][0]! },
        seedsRun: seed,
        passedOver,
      };
  }
  return { mutant: mutant.name, seedsRun: bound, passedOver };
}
