import { runSchedule } from '../faults/run';
import { FAULT_KINDS, FAULT_RATES, type FaultRates, generateSchedule } from '../faults/schedule';

describe('a seed', () => {
  it('fixes the documents and the whole fault schedule', () => {
    expect(generateSchedule(42)).toEqual(generateSchedule(42));
    expect(generateSchedule(42)).not.toEqual(generateSchedule(43));
  });

  it("is drawn with the soak's rates unless a world of other rates is asked for (a mutant's hunt)", () => {
    expect(generateSchedule(42, FAULT_RATES)).toEqual(generateSchedule(42));
    const everyDoubled = generateSchedule(42, { ...FAULT_RATES, doubled: 1 });
    expect(everyDoubled.documents.every((d) => d.notifications === 2 || d.kind === 'poison')).toBe(true);
    const lost = (rates: FaultRates) =>
      Array.from({ length: 20 }, (_, i) => generateSchedule(i + 1, rates)).flatMap((s) =>
        s.bigquery.statements.filter((st) => st.fault === 'outcomeUnknown'),
      ).length;
    expect(lost({ ...FAULT_RATES, outcomeUnknown: 0.3 })).toBeGreaterThan(3 * lost(FAULT_RATES));
    // A rate the soak leaves at 0 draws from a stream of its own: raising it moves nothing else.
    const slow = generateSchedule(42, { ...FAULT_RATES, slowLostJob: 1 });
    expect({ ...slow, bigquery: undefined }).toEqual({ ...generateSchedule(42), bigquery: undefined });
  });

  it('replays the same run: the same answers, rows, requests and faults, step for step', async () => {
    const first = await runSchedule(generateSchedule(7));
    const second = await runSchedule(generateSchedule(7));
    expect(second.traceHash).toBe(first.traceHash);
    expect(second.record.answers).toEqual(first.record.answers);
    expect(second.faults.counts).toEqual(first.faults.counts);
  });

  it('replays a run of the real BigQuery store whose jobs.insert answers are lost, though the worker picks its job ids at random', async () => {
    // Seed 2 runs the real store over the client model, with lost jobs.insert answers and
    // rate-limited polls: a fault's words that named a job id made two runs differ.
    const schedule = generateSchedule(2);
    expect(schedule.bigquery.via).toBe('client');
    const first = await runSchedule(schedule);
    expect(first.faults.counts['bigquery.insertAnswerLost']).toBeGreaterThan(0);
    const second = await runSchedule(generateSchedule(2));
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
