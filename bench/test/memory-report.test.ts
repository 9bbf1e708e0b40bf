import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  MEMORY_GOAL,
  type MemorySection,
  memoryGrowth,
  renderMemoryReport,
  replaceMemoryFigures,
} from '../memory/report';
import { imageEnvironment } from '../memory/run-memory';
import type { MemorySample } from '../memory/stage';

const MIB = 1024 * 1024;
const sample = (deliveries: number, rssMib: number, heapMib = 40): MemorySample => ({
  deliveries,
  rssBytes: rssMib * MIB,
  heapUsedBytes: heapMib * MIB,
  memo: { inFlight: 0, writing: 0 },
});
/** Samples every 50,000 deliveries, RSS rising linearly from `atStart` to `atEnd` MiB. */
const run = (atStart: number, atEnd: number) =>
  Array.from({ length: 20 }, (_, i) => sample((i + 1) * 50_000, atStart + ((atEnd - atStart) * i) / 19));

describe('the memory stage', () => {
  it("runs its worker with the runtime stage's ENV of the worker image, and no other stage's", () => {
    const dockerfile = [
      'FROM node:22 AS build',
      'ENV BUILD_ONLY=1',
      'FROM node:22-slim AS runtime',
      'ENV NODE_ENV=production MALLOC_ARENA_MAX=2',
      'ENV OTHER=x',
      'CMD ["node"]',
    ].join('\n');
    expect(imageEnvironment(dockerfile)).toEqual({
      NODE_ENV: 'production',
      MALLOC_ARENA_MAX: '2',
      OTHER: 'x',
    });
    // The real image: the allocator setting the stage's figures stand on is the one Cloud Run runs.
    expect(imageEnvironment()).toMatchObject({ NODE_ENV: 'production', MALLOC_ARENA_MAX: '2' });
  });

  describe('its goal (memoryGrowth)', () => {
    it('is met when RSS grows by less than 10 % from 100,000 to 1,000,000 deliveries', () => {
      const growth = memoryGrowth(run(200, 205));
      expect(growth.goal.met).toBe(true);
      expect(growth.rssGrowth).toBeGreaterThan(0);
      expect(growth.rssGrowth).toBeLessThan(MEMORY_GOAL.maxGrowth);
    });

    it('is missed when RSS grows by one entry per document (about 200 bytes × 900,000)', () => {
      const growth = memoryGrowth(run(200, 372));
      expect(growth.goal.met).toBe(false);
      expect(growth.rssGrowth).toBeGreaterThan(0.1);
    });

    it('is missed, never met by default, when a sample the goal reads is missing', () => {
      const growth = memoryGrowth(run(200, 200).filter((s) => s.deliveries !== 1_000_000));
      expect(growth.rssGrowth).toBeNaN();
      expect(growth.goal.met).toBe(false);
    });
  });

  it('says a missed goal in its block', () => {
    const samples = run(200, 300);
    const section: MemorySection = {
      date: '2026-12-03T00:00:00.000Z',
      node: 'v22',
      deliveries: 1_000_000,
      documents: 900_000,
      concurrency: 32,
      redeliveryEvery: 10,
      sampleEvery: 50_000,
      seconds: 600,
      samples,
      outcomes: { ok: 900_000, 'duplicate@seen': 100_000 },
      ...memoryGrowth(samples),
    };
    expect(renderMemoryReport(section)).toMatch(/RSS growth: \*\*\d+\.\d %\*\*.*: \*\*missed\*\*/);
  });

  // The verdict is the block's to say (met or **missed**), like every goal of the benchmark's tables:
  // this checks that the figures shown are the ones measured, over the whole million.
  it('shows in bench/README.md exactly the block generated from bench/results.json → memory, over 1,000,000 deliveries', () => {
    const readme = readFileSync(path.join(__dirname, '../README.md'), 'utf8');
    const results = JSON.parse(readFileSync(path.join(__dirname, '../results.json'), 'utf8')) as {
      memory?: MemorySection;
    };
    expect(results.memory).toBeDefined();
    expect(results.memory!.deliveries).toBe(MEMORY_GOAL.toDeliveries);
    expect(results.memory!.samples.map((x) => x.deliveries)).toContain(MEMORY_GOAL.fromDeliveries);
    expect(results.memory!.goal.value).toBe(results.memory!.rssGrowth);
    expect(replaceMemoryFigures(readme, results.memory!)).toBe(readme);
  });
});
