import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PROBES } from '../../worker/src/core/probes';
import { INVARIANT_IDS, type InvariantId } from '../faults/invariants';
import { MUTANTS, UNCAUGHT_MUTANTS } from '../faults/mutants';
import {
  renderFaultFigures,
  renderScenarioTable,
  replaceFaultFigures,
  SCENARIO_TABLE_END,
  SCENARIO_TABLE_START,
} from '../faults/report';
import { SCENARIOS } from '../faults/scenarios';
import { FAULT_KINDS } from '../faults/schedule';
import { type FaultsSection, soakShortfalls } from '../faults/soak';

const ROOT = path.join(__dirname, '..', '..');
const doc = readFileSync(path.join(ROOT, 'docs/testing.md'), 'utf8');
const block = (start: string, end: string) => doc.split(start)[1]?.split(end)[0] ?? '';
const results = JSON.parse(readFileSync(path.join(ROOT, 'bench/results.json'), 'utf8')) as {
  faults?: FaultsSection;
};

describe('docs/testing.md', () => {
  it('lists the named scenarios exactly as sim/faults/scenarios.ts defines them', () => {
    expect(block(SCENARIO_TABLE_START, SCENARIO_TABLE_END)).toBe(`\n${renderScenarioTable(SCENARIOS)}`);
  });

  it('shows the soak figures of bench/results.json → faults, as generated', () => {
    expect(results.faults).toBeDefined();
    expect(replaceFaultFigures(doc, results.faults!)).toBe(doc);
  });

  it('records a soak that meets the bar: 2,000 seeds or more, no invariant broken, every fault kind injected 100 times or more', () => {
    const faults = results.faults!;
    expect(soakShortfalls(faults)).toEqual([]);
  });

  it('records a soak with its seeds, every invariant and every fault kind counted', () => {
    const faults = results.faults!;
    expect(faults.seeds).toBeGreaterThanOrEqual(1);
    expect(Object.keys(faults.violations).sort()).toEqual([...INVARIANT_IDS].sort());
    for (const count of Object.values(faults.violations)) expect(count).toEqual(expect.any(Number));
    for (const kind of FAULT_KINDS)
      expect([kind, faults.faultsByKind[kind]]).toEqual([kind, expect.any(Number)]);
    expect(faults).toEqual(
      expect.objectContaining({ extraRawRows: expect.any(Number), analysesPerDocument: expect.any(Number) }),
    );
  });
});

describe('bench/results.json → faults', () => {
  const faults = results.faults!;

  it('names the invariant that caught every mutant', () => {
    expect(Object.keys(faults.mutants ?? {}).sort()).toEqual(MUTANTS.map((m) => m.name).sort());
    expect(
      Object.entries(faults.mutants ?? {}).filter(
        ([name, id]) => !INVARIANT_IDS.includes(id as InvariantId) && !(name in UNCAUGHT_MUTANTS),
      ),
    ).toEqual([]);
    for (const name of Object.keys(UNCAUGHT_MUTANTS))
      expect([name, faults.mutants?.[name]]).toEqual([name, 'not caught']);
  });

  it('lists every extra raw row and every excused change of the view with a named cause', () => {
    expect(faults.extraRawRowCauses?.length).toBe(faults.extraRawRows);
    expect((faults.extraRawRowCauses ?? []).filter((x) => x.causes.length === 0)).toEqual([]);
    expect((faults.excusedViewChanges ?? []).filter((x) => x.causes.length === 0)).toEqual([]);
  });
});

describe('the soak bar', () => {
  const meeting: FaultsSection = {
    seeds: 2_000,
    faultsByKind: Object.fromEntries(FAULT_KINDS.map((k) => [k, 100])) as FaultsSection['faultsByKind'],
    violations: { I1: 0, I2: 0, I3: 0, I4: 0, I5: 0, I6: 0, I7: 0, I8: 0 },
    extraRawRows: 0,
    analysesPerDocument: 1,
    paidCallsPerDocument: 1,
    probes: Object.fromEntries(Object.keys(PROBES).map((p) => [p, 1])) as FaultsSection['probes'],
  };

  it('is met by 2,000 seeds with no violation, every fault kind injected 100 times and every probe reached', () => {
    expect(soakShortfalls(meeting)).toEqual([]);
  });

  it('is missed by fewer seeds, by any violation, and by any fault kind injected fewer than 100 times', () => {
    expect(soakShortfalls({ ...meeting, seeds: 1_999 })).toEqual(['1999 seeds, fewer than 2000']);
    expect(soakShortfalls({ ...meeting, violations: { ...meeting.violations, I6: 1 } })).toEqual([
      'I6 broken on 1 seeds',
    ]);
    const kinds = { ...meeting.faultsByKind, 'bigquery.refusedManyRows': 99 };
    expect(soakShortfalls({ ...meeting, faultsByKind: kinds })).toEqual([
      'bigquery.refusedManyRows injected 99 times, fewer than 100',
    ]);
    const { 'rollout.analyzerVersion': _, ...missing } = meeting.faultsByKind;
    expect(soakShortfalls({ ...meeting, faultsByKind: missing as FaultsSection['faultsByKind'] })).toEqual([
      'rollout.analyzerVersion injected undefined times, fewer than 100',
    ]);
  });

  it('is missed by a coverage probe no seed reached, and by a soak that counted none', () => {
    expect(
      soakShortfalls({ ...meeting, probes: { ...meeting.probes!, 'lease.writtenMeanwhile': 0 } }),
    ).toEqual([`probe lease.writtenMeanwhile never reached (${PROBES['lease.writtenMeanwhile']})`]);
    const { probes: _, ...uncounted } = meeting;
    expect(soakShortfalls(uncounted)).toHaveLength(Object.keys(PROBES).length);
  });
});

describe('the fault figures block', () => {
  const section: FaultsSection = {
    seeds: 1_000,
    faultsByKind: Object.fromEntries(
      FAULT_KINDS.map((k, i) => [k, 100 + i]),
    ) as FaultsSection['faultsByKind'],
    violations: { I1: 0, I2: 0, I3: 0, I4: 2, I5: 0, I6: 0, I7: 0, I8: 0 },
    extraRawRows: 3,
    analysesPerDocument: 1.0421,
    paidCallsPerDocument: 1.1,
  };

  it('names every invariant and every fault kind with its count', () => {
    const text = renderFaultFigures(section);
    expect(text).toContain('**1,000 seeds**, 2 invariant violations');
    expect(text).toContain('| **I4** the view never changes its answer');
    expect(text).toMatch(/\| `gemini\.slowTail` \| 100 \|/);
    expect(text).toContain('1.042 paid analyses per document');
    for (const k of FAULT_KINDS) expect(text).toContain(`\`${k}\``);
  });

  it('refuses a document without its markers', () => {
    expect(() => replaceFaultFigures('# Testing\n', section)).toThrow(
      'docs/testing.md has no fault figures block',
    );
  });
});
