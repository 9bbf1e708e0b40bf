import { runSchedule } from '../faults/run';
import {
  FAULT_KINDS,
  FAULT_RATES,
  type FaultRates,
  generateSchedule,
  SWARM,
  swarmRates,
} from '../faults/schedule';

describe('a seed', () => {
  it('fixes the documents and the whole fault schedule', () => {
    expect(generateSchedule(42)).toEqual(generateSchedule(42));
    expect(generateSchedule(42)).not.toEqual(generateSchedule(43));
  });

  it("is drawn with its own swarm of the soak's rates unless a world of other rates is asked for (a mutant's hunt)", () => {
    expect(generateSchedule(42, swarmRates(42))).toEqual(generateSchedule(42));
    expect(generateSchedule(42, FAULT_RATES)).not.toEqual(generateSchedule(42));
    const everyDoubled = generateSchedule(42, { ...FAULT_RATES, doubled: 1 });
    expect(everyDoubled.documents.every((d) => d.notifications === 2 || d.kind === 'poison')).toBe(true);
    const lost = (rates: FaultRates) =>
      Array.from({ length: 20 }, (_, i) => generateSchedule(i + 1, rates)).flatMap((s) =>
        s.bigquery.statements.filter((st) => st.fault === 'outcomeUnknown'),
      ).length;
    expect(lost({ ...FAULT_RATES, outcomeUnknown: 0.3 })).toBeGreaterThan(3 * lost(FAULT_RATES));
    // A rate the soak leaves at 0 draws from a stream of its own: raising it moves nothing else.
    const slow = generateSchedule(42, { ...swarmRates(42), slowLostJob: 1 });
    expect({ ...slow, bigquery: undefined }).toEqual({ ...generateSchedule(42), bigquery: undefined });
  });

  it('draws its own mix of faults (swarm testing): each fault off on some seeds, pressed on others, about the same on average', () => {
    const seeds = Array.from({ length: 400 }, (_, i) => swarmRates(i + 1));
    expect(swarmRates(5)).toEqual(swarmRates(5));
    const swarmed = (Object.keys(FAULT_RATES) as Array<keyof FaultRates>).filter((k) =>
      seeds.some((r) => r[k] !== FAULT_RATES[k]),
    );
    expect(swarmed.length).toBeGreaterThan(20);
    // What shapes a run keeps its rate.
    for (const shape of ['documents', 'instances', 'fleet', 'poisonBatch', 'largeBurst', 'poison'] as const)
      expect(swarmed).not.toContain(shape);
    for (const k of swarmed) {
      const values = seeds.map((r) => r[k] as number);
      const off = values.filter((v) => v === 0).length / values.length;
      expect(off).toBeGreaterThan(SWARM.off / 2);
      expect(off).toBeLessThan(SWARM.off * 2);
      expect(Math.max(...values)).toBeGreaterThan(2 * (FAULT_RATES[k] as number));
      const mean = values.reduce((a, b) => a + b, 0) / values.length;
      expect(mean / (FAULT_RATES[k] as number)).toBeGreaterThan(0.7);
      expect(mean / (FAULT_RATES[k] as number)).toBeLessThan(1.4);
    }
  });

  it('replays the same run: the same answers, rows, requests and faults, step for step', async () => {
    const first = await runSchedule(generateSchedule(7));
    const second = await runSchedule(generateSchedule(7));
    expect(second.traceHash).toBe(first.traceHash);
    expect(second.record.answers).toEqual(first.record.answers);
    expect(second.faults.counts).toEqual(first.faults.counts);
  });

  it('replays a run of the real BigQuery store whose jobs.insert answers are lost, though the worker picks its job ids at random', async () => {
    // Seed 1 runs the real store over the client model, with lost jobs.insert answers and
    // rate-limited polls: a fault's words that named a job id made two runs differ.
    const schedule = generateSchedule(1);
    expect(schedule.bigquery.via).toBe('client');
    const first = await runSchedule(schedule);
    expect(first.faults.counts['bigquery.insertAnswerLost']).toBeGreaterThan(0);
    expect(first.faults.counts['bigquery.pollRateLimited']).toBeGreaterThan(0);
    const second = await runSchedule(generateSchedule(1));
    expect(second.traceHash).toBe(first.traceHash);
  });

  it('leaves the real timers, clock and Math.random as it found them', async () => {
    const { setTimeout: before, Date: dateBefore } = globalThis;
    const random = Math.random;
    const monotonic = performance.now;
    await runSchedule(generateSchedule(3));
    expect(globalThis.setTimeout).toBe(before);
    expect(globalThis.Date).toBe(dateBefore);
    expect(Math.random).toBe(random);
    expect(performance.now).toBe(monotonic);
  });

  it('counts only the fault kinds it knows', async () => {
    const { faults } = await runSchedule(generateSchedule(11));
    expect(Object.keys(faults.counts).sort()).toEqual([...FAULT_KINDS].sort());
  });
});
