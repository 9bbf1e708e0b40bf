import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLimiter } from '../../local/lib/bounded';
import { checkInvariants, INVARIANTS, type InvariantId } from '../faults/invariants';
import { type Catch, hunt, MUTANTS, type Mutant, mutantNamed, noteUnmutated } from '../faults/mutants';
import { replaceFaultFigures } from '../faults/report';
import { runSchedule } from '../faults/run';
import { SCENARIOS, scenarioProblems } from '../faults/scenarios';
import { FAULT_KINDS, generateSchedule } from '../faults/schedule';
import { broken, coveringSeeds, type FaultsSection, runSoak, SOAK_BAR, soakShortfalls } from '../faults/soak';

/**
 * `npm run sim`: the fault simulator's commands.
 *
 *   npm run sim -- --seed N [--replays K]   replays seed N, writes its schedule and trace to
 *                                           .sim/seed-N.json; K > 1 runs it K times and compares
 *   npm run sim -- --seeds 1000 [--from S]  the soak: seeds S … S+999, figures into
 *                [--replays K]              bench/results.json → faults; K > 1 runs each seed K
 *                [--jobs J]                 times and counts identical replays; J > 1 runs the
 *                                           seeds in parts of 100, J processes at a time
 *                                           (the same figures)
 *   npm run sim -- --scenario NAME|all      one of the eight named scenarios (or all)
 *   npm run sim -- --cover N                seeds among 1…N that hold I1–I8 and together
 *                                           inject every fault kind (test:sim's fixed set)
 *   npm run sim -- --mutant NAME|all        a named bug injected into the worker at run time,
 *                [--seeds N]                run over seeds 1…N (default: its own bound)
 *                [--record]                 until an invariant catches it; --record writes the
 *                                           catches into bench/results.json → faults → mutants
 *                                           (the soak's other figures stay) and docs/testing.md
 *
 * The soak also runs every mutant and writes which invariant caught it (faults → mutants).
 *
 * Exit status 1 when an invariant broke (the seed is printed with it).
 */

const ROOT = path.join(__dirname, '..', '..');
export const TRACE_DIR = path.join(ROOT, '.sim');
const RESULTS = path.join(ROOT, 'bench', 'results.json');
const TESTING_DOC = path.join(ROOT, 'docs', 'testing.md');

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function wholeNumber(name: string, value: string | undefined): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`--${name} takes a whole number (got ${value ?? 'nothing'})`);
  return n;
}

async function replay(seed: number, replays: number): Promise<number> {
  const schedule = generateSchedule(seed);
  const hashes: string[] = [];
  let last: Awaited<ReturnType<typeof runSchedule>> | undefined;
  for (let i = 0; i < replays; i++) {
    last = await runSchedule(schedule);
    hashes.push(last.traceHash);
  }
  const result = last!;
  const verdict = checkInvariants(result.record);
  mkdirSync(TRACE_DIR, { recursive: true });
  const file = path.join(TRACE_DIR, `seed-${seed}.json`);
  writeFileSync(
    file,
    `${JSON.stringify({ seed, traceHash: result.traceHash, schedule, faults: result.faults, verdict, trace: result.record }, null, 2)}\n`,
  );
  const counts = Object.entries(result.faults.counts).filter(([, n]) => n > 0);
  console.log(
    `seed ${seed}: ${result.record.end} after ${(result.record.simulatedMs / 1000).toFixed(0)} simulated s`,
  );
  console.log(`faults injected: ${counts.map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`);
  const bad = broken(verdict);
  for (const [id, list] of bad)
    for (const v of list) console.log(`seed ${seed} breaks ${id} (${INVARIANTS[id]}): ${v}`);
  for (const x of verdict.extraRawRows)
    console.log(`extra raw row: ${x.key} (${x.messageId}), causes: ${x.causes.join('; ') || 'none'}`);
  if (bad.length === 0) console.log(`seed ${seed}: I1–I8 hold`);
  if (replays > 1) {
    const same = hashes.filter((h) => h === hashes[0]).length;
    console.log(`replays: ${same} of ${replays} identical to the first (trace ${hashes[0]})`);
  }
  console.log(`schedule and trace: ${path.relative(process.cwd(), file)}`);
  return bad.length > 0 ? 1 : 0;
}

/** What one process of a soak found over its seeds (a part, when the soak runs in several). */
interface SoakPart {
  section: FaultsSection;
  /** Documents over its seeds (the per-document figures are weighted by them). */
  documents: number;
  brokenSeeds: string[];
  /** Seeds on which the worker as it is broke no invariant. */
  holding: number[];
}

/** Seeds `first` … `first + count − 1`, run in this process. */
async function soakPart(
  count: number,
  first: number,
  replays: number,
): Promise<SoakPart & { replay: Replays }> {
  const started = performance.now();
  const brokenSeeds: string[] = [];
  const holding: number[] = [];
  let documents = 0;
  const replay = { seeds: 0, identical: 0, brokenSeeds: 0, brokenIdentical: 0 };
  const section: FaultsSection = await runSoak(count, {
    first,
    onSeed: async (seed, verdict, result) => {
      documents += result.record.documents.length;
      if (broken(verdict).length === 0) holding.push(seed);
      for (let i = 1; i < replays; i++) {
        const again = await runSchedule(generateSchedule(seed));
        const same = again.traceHash === result.traceHash;
        replay.seeds++;
        if (same) replay.identical++;
        if (broken(verdict).length > 0) {
          replay.brokenSeeds++;
          if (same) replay.brokenIdentical++;
        }
      }
      for (const [id, list] of broken(verdict)) brokenSeeds.push(`seed ${seed} breaks ${id}: ${list[0]}`);
      if ((seed - first + 1) % 100 === 0)
        process.stderr.write(
          `sim: ${seed - first + 1}/${count} seeds from ${first}, ${((performance.now() - started) / 1000).toFixed(0)} s\n`,
        );
    },
  });
  return { section, documents, brokenSeeds, holding, replay };
}

type Replays = { seeds: number; identical: number; brokenSeeds: number; brokenIdentical: number };

/**
 * The seeds split into contiguous parts of at most PART_SEEDS, each run by a fresh process of its
 * own (the same command with `--part FILE`), `jobs` at a time, merged in seed order: the same
 * figures as one process's. Fresh processes because a long-lived one slows down: a 2,000-seed
 * soak in two processes took 171 s for each one's first 100 seeds and 1,700 s for its eighth.
 */
const PART_SEEDS = 100;

async function soakInJobs(count: number, first: number, jobs: number): Promise<SoakPart> {
  const dir = mkdtempSync(path.join(tmpdir(), 'docline-soak-'));
  const parts = Array.from({ length: Math.ceil(count / PART_SEEDS) }, (_, j) => ({
    from: first + j * PART_SEEDS,
    count: Math.min(PART_SEEDS, count - j * PART_SEEDS),
    file: path.join(dir, `part-${j}.json`),
  }));
  const runPart = (p: (typeof parts)[number]) =>
    new Promise<void>((resolve, reject) => {
      const args = [
        ...process.execArgv,
        process.argv[1]!,
        '--seeds',
        String(p.count),
        '--from',
        String(p.from),
      ];
      const child = spawn(process.execPath, [...args, '--part', p.file], {
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      child.on('error', reject);
      child.on('exit', (code) =>
        code === 0 ? resolve() : reject(new Error(`soak part from seed ${p.from} exited with ${code}`)),
      );
    });
  const limiter = createLimiter(jobs);
  await Promise.all(parts.map((p) => limiter.run(() => runPart(p))));
  const read = parts.map((p) => JSON.parse(readFileSync(p.file, 'utf8')) as SoakPart);
  rmSync(dir, { recursive: true, force: true });
  const documents = read.reduce((n, r) => n + r.documents, 0);
  const weighted = (figure: 'analysesPerDocument' | 'paidCallsPerDocument') =>
    read.reduce((sum, r) => sum + r.section[figure] * r.documents, 0) / Math.max(1, documents);
  const sum = <K extends string>(pick: (r: SoakPart) => Record<K, number>) => {
    const total = { ...pick(read[0]!) };
    for (const r of read.slice(1)) for (const k of Object.keys(total) as K[]) total[k] += pick(r)[k];
    return total;
  };
  return {
    section: {
      seeds: read.reduce((n, r) => n + r.section.seeds, 0),
      faultsByKind: sum((r) => r.section.faultsByKind),
      violations: sum((r) => r.section.violations),
      extraRawRows: read.reduce((n, r) => n + r.section.extraRawRows, 0),
      analysesPerDocument: weighted('analysesPerDocument'),
      paidCallsPerDocument: weighted('paidCallsPerDocument'),
      extraRawRowCauses: read.flatMap((r) => r.section.extraRawRowCauses ?? []),
      excusedViewChanges: read.flatMap((r) => r.section.excusedViewChanges ?? []),
      documentsByFormat: sum((r) => r.section.documentsByFormat!),
      keptThenGone: read.reduce((n, r) => n + (r.section.keptThenGone ?? 0), 0),
      probes: sum((r) => r.section.probes!),
    },
    documents,
    brokenSeeds: read.flatMap((r) => r.brokenSeeds),
    holding: read.flatMap((r) => r.holding),
  };
}

async function soak(count: number, first: number, replays: number, jobs: number): Promise<number> {
  const started = performance.now();
  const part = jobs > 1 ? await soakInJobs(count, first, jobs) : await soakPart(count, first, replays);
  const { section, brokenSeeds } = part;
  const replay = 'replay' in part ? (part.replay as Replays) : undefined;
  for (const seed of part.holding) noteUnmutated(seed, true);
  // `--no-hunts`: the mutants' lines are kept from bench/results.json (hunted alone, `--mutant NAME --record`).
  const hunting = !process.argv.includes('--no-hunts');
  const catches = hunting ? await huntAll(MUTANTS) : [];
  const previous = JSON.parse(readFileSync(RESULTS, 'utf8')) as { faults?: FaultsSection } & Record<
    string,
    unknown
  >;
  section.mutants = hunting
    ? Object.fromEntries(catches.map((c) => [c.mutant, c.caught?.invariant ?? 'not caught']))
    : previous.faults?.mutants;
  const seconds = (performance.now() - started) / 1000;
  writeFileSync(RESULTS, `${JSON.stringify({ ...previous, faults: section }, null, 2)}\n`);
  writeFileSync(TESTING_DOC, replaceFaultFigures(readFileSync(TESTING_DOC, 'utf8'), section));
  console.log(`seeds run: ${section.seeds} (${first}–${first + count - 1}) in ${seconds.toFixed(0)} s`);
  console.log('faults injected by kind:');
  for (const k of FAULT_KINDS) console.log(`  ${k.padEnd(32)} ${section.faultsByKind[k]}`);
  console.log('violations by invariant (seeds):');
  for (const id of Object.keys(section.violations) as InvariantId[])
    console.log(`  ${id} ${String(section.violations[id]).padStart(5)}  ${INVARIANTS[id]}`);
  const formats = Object.entries(section.documentsByFormat ?? {}).map(([f, n]) => `${f} ${n}`);
  console.log(
    `documents by format: ${formats.join(', ')}; delivered again after their analysis was kept and their generation went: ${section.keptThenGone ?? 0}`,
  );
  console.log('coverage probes reached:');
  for (const [name, n] of Object.entries(section.probes ?? {})) console.log(`  ${name.padEnd(32)} ${n}`);
  console.log(
    `extra raw rows: ${section.extraRawRows}; paid analyses per document: ${section.analysesPerDocument.toFixed(3)} (paid calls: ${section.paidCallsPerDocument.toFixed(3)})`,
  );
  for (const line of brokenSeeds) console.log(line);
  for (const x of section.excusedViewChanges ?? [])
    console.log(`view answer changed (excused): seed ${x.seed} ${x.key}, causes: ${x.causes.join('; ')}`);
  for (const x of section.extraRawRowCauses ?? [])
    console.log(`extra raw row: seed ${x.seed} ${x.key}, causes: ${x.causes.join('; ') || 'none'}`);
  if (replay && replays > 1)
    console.log(
      `replays: ${replay.identical} of ${replay.seeds} identical to their seed's first run; of the broken seeds, ${replay.brokenIdentical} of ${replay.brokenSeeds} broke again identically`,
    );
  const short = soakShortfalls(section);
  console.log(
    short.length === 0
      ? `the bar is met: ${SOAK_BAR.seeds} seeds or more, no invariant broken, every fault kind injected ${SOAK_BAR.injectedPerKind} times or more, every coverage probe reached`
      : `below the bar: ${short.join('; ')}`,
  );
  console.log(
    `figures written to ${path.relative(process.cwd(), RESULTS)} → faults, and ${path.relative(process.cwd(), TESTING_DOC)}`,
  );
  return brokenSeeds.length > 0 || catches.some((c) => !c.caught) ? 1 : 0;
}

/**
 * Writes which invariant caught each mutant into bench/results.json → faults → mutants, the soak's
 * other figures as they are, and regenerates docs/testing.md's figures from them: a mutant
 * redefined after a soak is hunted again alone, without the soak's hour.
 */
function recordCatches(catches: readonly Catch[]): void {
  const previous = JSON.parse(readFileSync(RESULTS, 'utf8')) as { faults: FaultsSection } & Record<
    string,
    unknown
  >;
  const mutants = { ...previous.faults.mutants };
  for (const c of catches) mutants[c.mutant] = c.caught?.invariant ?? 'not caught';
  const faults = { ...previous.faults, mutants };
  writeFileSync(RESULTS, `${JSON.stringify({ ...previous, faults }, null, 2)}\n`);
  writeFileSync(TESTING_DOC, replaceFaultFigures(readFileSync(TESTING_DOC, 'utf8'), faults));
  console.log(
    `catches written to ${path.relative(process.cwd(), RESULTS)} → faults → mutants, and docs/testing.md`,
  );
}

/** Hunts each mutant over seeds 1…bound, printing which invariant caught it. */
async function huntAll(mutants: readonly Mutant[], bound?: number): Promise<Catch[]> {
  const catches: Catch[] = [];
  for (const mutant of mutants) {
    const c = await hunt(mutant, bound);
    catches.push(c);
    console.log(
      c.caught
        ? `mutant ${mutant.name}: caught by ${c.caught.invariant} on seed ${c.caught.seed}: ${c.caught.detail}`
        : `mutant ${mutant.name}: NOT CAUGHT in ${c.seedsRun} seeds (${mutant.bug})`,
    );
    if (c.passedOver.length > 0)
      console.log(
        `mutant ${mutant.name}: the worker as it is breaks an invariant on seeds ${c.passedOver.join(', ')} of its world (passed over)`,
      );
  }
  return catches;
}

async function scenarios(name: string): Promise<number> {
  const chosen = name === 'all' ? SCENARIOS : SCENARIOS.filter((s) => s.name === name);
  if (chosen.length === 0)
    throw new Error(`no scenario ${name}; there are: ${SCENARIOS.map((s) => s.name).join(', ')}`);
  let failed = 0;
  for (const scenario of chosen) {
    const result = scenario.schedule ? await runSchedule(scenario.schedule) : undefined;
    const verdict = result ? checkInvariants(result.record) : undefined;
    const problems = scenarioProblems(scenario, verdict, result?.record);
    // An open scenario is expected to fail (the worker still lets it happen); passing means its mark can go.
    const label = scenario.open
      ? problems.length > 0
        ? 'OPEN'
        : 'PASS (marked open: remove the mark)'
      : problems.length === 0
        ? 'PASS'
        : 'FAIL';
    console.log(`${label} ${scenario.interleaving} ${scenario.name}: ${scenario.title}`);
    if (scenario.open) console.log(`     open: ${scenario.open}`);
    for (const p of problems) console.log(`     ${p}`);
    if (label !== 'PASS' && label !== 'OPEN') failed++;
  }
  return failed > 0 ? 1 : 0;
}

async function main(): Promise<number> {
  const seed = arg('seed');
  const seeds = arg('seeds');
  const scenario = arg('scenario');
  if (seed !== undefined)
    return replay(wholeNumber('seed', seed), Math.max(1, wholeNumber('replays', arg('replays') ?? '1')));
  const part = arg('part');
  if (seeds !== undefined && part !== undefined) {
    // One part of a soak run in several processes: its figures into a file, nothing else.
    const found = await soakPart(wholeNumber('seeds', seeds), wholeNumber('from', arg('from') ?? '1'), 1);
    writeFileSync(part, JSON.stringify(found));
    return 0;
  }
  if (seeds !== undefined && arg('mutant') === undefined) {
    const replays = Math.max(1, wholeNumber('replays', arg('replays') ?? '1'));
    const jobs = Math.max(1, wholeNumber('jobs', arg('jobs') ?? '1'));
    if (jobs > 1 && replays > 1) throw new Error('--replays runs in one process: leave --jobs out');
    return soak(wholeNumber('seeds', seeds), wholeNumber('from', arg('from') ?? '1'), replays, jobs);
  }
  if (scenario !== undefined) return scenarios(scenario);
  const mutant = arg('mutant');
  if (mutant !== undefined) {
    const chosen = mutant === 'all' ? MUTANTS : [mutantNamed(mutant)];
    const bound = seeds === undefined ? undefined : wholeNumber('seeds', seeds);
    const catches = await huntAll(chosen, bound);
    if (process.argv.includes('--record')) recordCatches(catches);
    return catches.every((c) => c.caught) ? 0 : 1;
  }
  const cover = arg('cover');
  if (cover !== undefined) {
    const { seeds: chosen, uncovered } = await coveringSeeds(wholeNumber('cover', cover));
    console.log(`seeds that hold I1–I8, inject every fault kind and reach every probe: ${chosen.join(', ')}`);
    if (uncovered.length > 0) console.log(`no passing seed injects or reaches: ${uncovered.join(', ')}`);
    return uncovered.length > 0 ? 1 : 0;
  }
  console.error(
    'usage: npm run sim -- --seed N [--replays K] | --seeds COUNT [--from S] [--no-hunts] | --scenario NAME|all | --mutant NAME|all [--seeds N] | --cover N',
  );
  return 2;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(2);
  },
);
