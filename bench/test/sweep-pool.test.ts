import { sweepGrid } from '../sweep/grid';
import { inOrderPool, runCellInChild } from '../sweep/pool';
import { runCell } from '../sweep/stage';

describe('the sweep runs cells in parallel (--jobs)', () => {
  it('runs at most `jobs` at once and gives the results in the items’ order, not the finishing order', async () => {
    let running = 0;
    let most = 0;
    const finishers: Array<() => void> = [];
    const finishedOrder: number[] = [];
    const pool = inOrderPool(
      [0, 1, 2, 3, 4],
      2,
      (item) =>
        new Promise<string>((resolve) => {
          running += 1;
          most = Math.max(most, running);
          finishers[item] = () => {
            running -= 1;
            resolve(`r${item}`);
          };
        }),
      (_result, item) => finishedOrder.push(item),
    );
    const tick = () => new Promise((resolve) => setImmediate(resolve));
    await tick();
    expect(running).toBe(2);
    // Finish the second before the first, then the rest in reverse as they start.
    finishers[1]!();
    await tick();
    finishers[0]!();
    await tick();
    for (const item of [3, 2, 4]) {
      finishers[item]!();
      await tick();
    }
    await expect(pool).resolves.toEqual(['r0', 'r1', 'r2', 'r3', 'r4']);
    expect(most).toBe(2);
    expect(finishedOrder).toEqual([1, 0, 3, 2, 4]);
  });

  it('refuses a number of jobs under 1', async () => {
    await expect(inOrderPool([1], 0, async () => 1)).rejects.toThrow(
      'jobs must be a whole number ≥ 1 (got 0)',
    );
  });

  it('gives, for a cell run in its own process, exactly the figures of the same cell run here', async () => {
    const spec = sweepGrid(false).find((c) => c.name === 'tiers-1000rpm-fast-fastAcksOnly-1000')!;
    const [here, child] = await Promise.all([runCell(spec), runCellInChild(spec.name)]);
    expect(child.cell).toEqual(here.cell);
    expect(child.details.misses).toEqual(here.details.misses);
    expect(child.details.docline.drainMs).toBe(here.details.docline.drainMs);
  }, 60_000);

  it('fails with the cell’s name when its process fails', async () => {
    await expect(runCellInChild('no-such-cell')).rejects.toThrow(
      'sweep cell no-such-cell: its process ended with code 1',
    );
  }, 30_000);
});
