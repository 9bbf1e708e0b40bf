import { runSchedule } from '../faults/run';
import { FAULT_KINDS, generateSchedule } from '../faults/schedule';

describe('a seed', () => {
  it('fixes the documents and the whole fault schedule', () => {
    expect(generateSchedule(42)).toEqual(generateSchedule(42));
    expect(generateSchedule(42)).not.toEqual(generateSchedule(43));
  });

  it('replays the same run: the same answers, rows, requests and faults, step for step', async () => {
    const first = await runSchedule(generateSchedule(7));
    const second = await runSchedule(generateSchedule(7));
    expect(second.traceHash).toBe(first.traceHash);
    expect(second.record.answers).toEqual(first.record.answers);
    expect(second.faults.counts).toEqual(first.faults.counts);
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
