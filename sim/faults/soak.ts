import { PROBES, type ProbeName } from '../../worker/src/core/probes';
import { checkInvariants, INVARIANT_IDS, type InvariantId, type Verdict } from './invariants';
import { type RunResult, runSchedule } from './run';
import {
  DOCUMENT_FORMATS,
  type DocumentFormat,
  FAULT_KINDS,
  type FaultKind,
  generateSchedule,
} from './schedule';

/** bench/results.json → `faults`: what a soak of many seeds found. */
export interface FaultsSection {
  seeds: number;
  faultsByKind: Record<FaultKind, number>;
  violations: Record<InvariantId, number>;
  extraRawRows: number;
  /** Paid analyses per document (an analysis: one billed run of the analyzer, see sim/models/gemini.ts). */
  analysesPerDocument: number;
  /** Paid Gemini calls per document (an analysis makes two when the first answer misses the schema). */
  paidCallsPerDocument: number;
  /** Each extra raw row, with the named causes that excused it. */
  extraRawRowCauses?: Array<{ seed: number; key: string; causes: string[] }>;
  /** Each change of the view's answer that a named cause excused (I4), with its causes. */
  excusedViewChanges?: Array<{ seed: number; key: string; causes: string[] }>;
  /** Each named bug injected at run time, and the invariant that caught it (sim/faults/mutants.ts). */
  mutants?: Record<string, InvariantId | 'not caught'>;
  /** Documents uploaded, by format (a text invoice, a PDF, an e-invoice of each kind). */
  documentsByFormat?: Record<DocumentFormat, number>;
  /**
   * Documents whose analysis was kept and whose generation went, delivered again after both: the
   * path where the kept analysis, not a read, must give the answer (I7).
   */
  keptThenGone?: number;
  /** How often the soak's seeds reached each of the worker's coverage probes (worker/src/core/probes.ts). */
  probes?: Record<ProbeName, number>;
}

/** No document of any format yet. */
const noDocuments = () =>
  Object.fromEntries(Object.keys(DOCUMENT_FORMATS).map((f) => [f, 0])) as Record<DocumentFormat, number>;

/** Per format, the documents of a run; and how many were delivered again after their analysis was kept and their generation went. */
export function documentFigures(result: RunResult): {
  byFormat: Record<DocumentFormat, number>;
  keptThenGone: number;
} {
  const { record } = result;
  const byFormat = noDocuments();
  let keptThenGone = 0;
  const messageKey = new Map(record.documents.flatMap((d) => d.messageIds.map((id) => [id, d.key] as const)));
  for (const d of record.documents) {
    byFormat[d.format ?? 'text']++;
    const kept = record.keptAtMs?.[d.key];
    if (kept === undefined || d.goneAtMs === undefined) continue;
    const after = Math.max(kept, d.goneAtMs);
    if (record.requests.some((r) => messageKey.get(r.messageId) === d.key && r.startMs > after))
      keptThenGone++;
  }
  return { byFormat, keptThenGone };
}

/**
 * The bar a recorded soak is held to: at least 2,000 seeds, no invariant broken on any, every fault
 * kind injected at least 100 times over them, and every coverage probe of the worker reached.
 */
export const SOAK_BAR = Object.freeze({ seeds: 2_000, injectedPerKind: 100 });

/** Where a recorded soak falls short of {@link SOAK_BAR}, in words (empty: it meets it). */
export function soakShortfalls(section: FaultsSection): string[] {
  const short: string[] = [];
  if (!(section.seeds >= SOAK_BAR.seeds)) short.push(`${section.seeds} seeds, fewer than ${SOAK_BAR.seeds}`);
  for (const id of INVARIANT_IDS)
    if (section.violations[id] !== 0) short.push(`${id} broken on ${section.violations[id]} seeds`);
  for (const kind of FAULT_KINDS)
    if (!(section.faultsByKind[kind] >= SOAK_BAR.injectedPerKind))
      short.push(
        `${kind} injected ${section.faultsByKind[kind]} times, fewer than ${SOAK_BAR.injectedPerKind}`,
      );
  for (const name of Object.keys(PROBES) as ProbeName[])
    if (!((section.probes?.[name] ?? 0) > 0)) short.push(`probe ${name} never reached (${PROBES[name]})`);
  return short;
}

/** One seed, run and checked. */
export async function runSeed(seed: number): Promise<{ result: RunResult; verdict: Verdict }> {
  const result = await runSchedule(generateSchedule(seed));
  return { result, verdict: checkInvariants(result.record) };
}

/** The invariants a verdict breaks, with what broke. */
export function broken(verdict: Verdict): Array<[InvariantId, string[]]> {
  return INVARIANT_IDS.filter((id) => verdict.violations[id].length > 0).map((id) => [
    id,
    verdict.violations[id],
  ]);
}

/**
 * The soak: seeds `first` … `first + count − 1`, one after the other. Violations count seeds (a
 * seed that breaks I1 twice counts once under I1); every broken seed is reported with its seed.
 */
export async function runSoak(
  count: number,
  options: {
    first?: number;
    onSeed?: (seed: number, verdict: Verdict, result: RunResult) => void | Promise<void>;
  } = {},
): Promise<FaultsSection> {
  const first = options.first ?? 1;
  const faultsByKind = Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>;
  const violations = Object.fromEntries(INVARIANT_IDS.map((id) => [id, 0])) as Record<InvariantId, number>;
  let extraRawRows = 0;
  const extraRawRowCauses: NonNullable<FaultsSection['extraRawRowCauses']> = [];
  const excusedViewChanges: NonNullable<FaultsSection['excusedViewChanges']> = [];
  let paid = 0;
  let paidCalls = 0;
  let documents = 0;
  const documentsByFormat = noDocuments();
  let keptThenGone = 0;
  const probes = Object.fromEntries(Object.keys(PROBES).map((p) => [p, 0])) as Record<ProbeName, number>;
  for (let seed = first; seed < first + count; seed++) {
    const { result, verdict } = await runSeed(seed);
    const figures = documentFigures(result);
    for (const f of Object.keys(figures.byFormat) as DocumentFormat[])
      documentsByFormat[f] += figures.byFormat[f];
    keptThenGone += figures.keptThenGone;
    for (const k of FAULT_KINDS) faultsByKind[k] += result.faults.counts[k];
    for (const p of Object.keys(probes) as ProbeName[]) probes[p] += result.probes[p];
    for (const [id] of broken(verdict)) violations[id]++;
    extraRawRows += verdict.extraRawRows.length;
    for (const x of verdict.extraRawRows) extraRawRowCauses.push({ seed, key: x.key, causes: x.causes });
    for (const x of verdict.viewChanges) excusedViewChanges.push({ seed, key: x.key, causes: x.causes });
    paid += Object.values(result.record.paidAnalysesByDocument).reduce((a, b) => a + b, 0);
    paidCalls += Object.values(result.record.paidCallsByDocument).reduce((a, b) => a + b, 0);
    documents += result.record.documents.length;
    await options.onSeed?.(seed, verdict, result);
  }
  return {
    seeds: count,
    faultsByKind,
    violations,
    extraRawRows,
    analysesPerDocument: paid / Math.max(1, documents),
    paidCallsPerDocument: paidCalls / Math.max(1, documents),
    extraRawRowCauses,
    excusedViewChanges,
    documentsByFormat,
    keptThenGone,
    probes,
  };
}

/**
 * A small set of seeds among `1 … candidates` that hold I1–I8 and together inject every fault kind
 * and reach every coverage probe (greedy: each pick adds the most not yet covered). test:sim runs
 * such a set.
 */
export async function coveringSeeds(
  candidates: number,
): Promise<{ seeds: number[]; uncovered: Array<FaultKind | ProbeName> }> {
  const coveredBy = new Map<number, Set<FaultKind | ProbeName>>();
  for (let seed = 1; seed <= candidates; seed++) {
    const { result, verdict } = await runSeed(seed);
    if (broken(verdict).length > 0) continue;
    const kinds = FAULT_KINDS.filter((k) => result.faults.counts[k] > 0);
    const probes = (Object.keys(PROBES) as ProbeName[]).filter((p) => result.probes[p] > 0);
    coveredBy.set(seed, new Set([...kinds, ...probes]));
  }
  const uncovered = new Set<FaultKind | ProbeName>([...FAULT_KINDS, ...(Object.keys(PROBES) as ProbeName[])]);
  const seeds: number[] = [];
  while (uncovered.size > 0) {
    let best: number | undefined;
    let gain = 0;
    for (const [seed, covered] of coveredBy) {
      const g = [...covered].filter((k) => uncovered.has(k)).length;
      if (g > gain) [best, gain] = [seed, g];
    }
    if (best === undefined) break;
    seeds.push(best);
    for (const k of coveredBy.get(best)!) uncovered.delete(k);
  }
  return { seeds: seeds.sort((a, b) => a - b), uncovered: [...uncovered] };
}
