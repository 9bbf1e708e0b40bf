import { EventEmitter } from 'node:events';
import { readFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { type AutoscaleOptions, CloudRunModel, pendingWaitMs } from '../../sim/faults/cloud-run';
import { FaultLog } from '../../sim/faults/schedule';
import { VirtualTime } from '../../sim/faults/virtual-time';
import type { RunningWorker } from '../../worker/src/main';

/**
 * The Cloud Run model's autoscaler (sim/faults/cloud-run.ts, used by the sweep) on fake instances
 * that hold every request until the test answers it. Virtual time, not installed: only the model's
 * own timers run, so nothing here sleeps.
 */

const COLD_START_MS = 2_000;
const GRACE_MS = 10_000;

interface Held {
  messageId: string;
  instance: number;
  res: ServerResponse;
}

/** The model on fake instances; with `autoscale`, its autoscaler on and started. */
async function setup(autoscale?: Partial<AutoscaleOptions>, building?: () => Promise<unknown>) {
  const time = new VirtualTime();
  const held: Held[] = [];
  const built: number[] = [];
  const stopped: number[] = [];
  const cloudRun = new CloudRunModel(time, {
    requestTimeoutMs: 600_000,
    graceMs: GRACE_MS,
    coldStartMs: COLD_START_MS,
    schedule: { stalls: [], signals: [] },
    faults: new FaultLog(() => time.nowMs()),
    keyOf: (id) => id,
    ...(autoscale
      ? {
          autoscale: {
            minInstances: 0,
            maxInstances: 3,
            concurrency: 10,
            targetUtilization: 0.6,
            idleMs: 15 * 60_000,
            ...autoscale,
          },
        }
      : {}),
  });
  const factory = async (index: number): Promise<RunningWorker> => {
    built.push(index);
    await building?.();
    const server = new EventEmitter() as EventEmitter & { close(): void };
    server.close = () => {};
    server.on('request', (_req: unknown, res: ServerResponse) => {
      const record = cloudRun.current()!;
      held.push({ messageId: record.messageId, instance: index, res });
    });
    return {
      server,
      port: 0,
      admission: undefined,
      stop: async () => {
        stopped.push(index);
      },
    } as unknown as RunningWorker;
  };
  const answers = new Map<string, number>();
  let n = 0;
  const push = (count: number) => {
    for (let i = 0; i < count; i++) {
      const id = `m${n++}`;
      void cloudRun.push('{}', id).then((status) => answers.set(id, status));
    }
  };
  /** Answers every held request (204). */
  const answerAll = () => {
    for (const h of held.splice(0)) {
      h.res.statusCode = 204;
      h.res.end();
    }
  };
  const onInstance = (i: number) => held.filter((h) => h.instance === i).length;
  if (autoscale) await cloudRun.startAutoscaled(factory);
  return { time, cloudRun, factory, held, built, stopped, answers, push, answerAll, onInstance };
}

describe('Cloud Run autoscaling (the sweep model)', () => {
  it('starts the first instance on the first request; it serves only after the cold start', async () => {
    const t = await setup({});
    expect(t.cloudRun.fleet()).toEqual({ serving: 0, starting: 0, pending: 0 });
    t.push(1);
    await t.time.advanceTo(0);
    expect(t.cloudRun.fleet()).toEqual({ serving: 0, starting: 1, pending: 1 });
    await t.time.advanceTo(COLD_START_MS - 1);
    expect(t.held).toHaveLength(0);
    await t.time.advanceTo(COLD_START_MS);
    expect(t.held).toHaveLength(1);
    expect(t.cloudRun.requests[0]!.startMs).toBe(COLD_START_MS);
    expect(t.cloudRun.fleet()).toEqual({ serving: 1, starting: 0, pending: 0 });
  });

  it('serves after exactly the cold start even when building the instance takes real I/O', async () => {
    // A real worker loads modules and listens on a socket while it is built: real time the virtual
    // clock must wait for, or the instance came up at a different simulated time in each run.
    const reads = () =>
      Array.from({ length: 20 }).reduce<Promise<unknown>>(
        (p) => p.then(() => readFile(__filename)),
        Promise.resolve(),
      );
    const t = await setup({}, reads);
    t.push(1);
    t.time.after(COLD_START_MS / 2, () => t.push(1));
    await t.time.run(() => t.held.length === 2, 60_000);
    expect(t.cloudRun.requests.map((r) => r.startMs)).toEqual([COLD_START_MS, COLD_START_MS]);
  });

  it('adds an instance only once the open requests per instance exceed 60 % of the concurrency', async () => {
    const t = await setup({ minInstances: 1 });
    // Target: 0.6 × 10 = 6 open requests per instance.
    t.push(6);
    await t.time.advanceTo(0);
    expect(t.cloudRun.fleet()).toEqual({ serving: 1, starting: 0, pending: 0 });
    t.push(1);
    await t.time.advanceTo(0);
    expect(t.cloudRun.fleet()).toEqual({ serving: 1, starting: 1, pending: 0 });
    // The 7th request had a free slot (10 per instance): it did not wait for the new instance.
    expect(t.onInstance(0)).toBe(7);
    await t.time.advanceTo(COLD_START_MS);
    expect(t.cloudRun.fleet()).toEqual({ serving: 2, starting: 0, pending: 0 });
    expect(t.built).toEqual([0, 1]);
  });

  it('never runs more than maxInstances; past their slots a request waits, then 429', async () => {
    const t = await setup({});
    t.push(100);
    await t.time.advanceTo(0);
    expect(t.cloudRun.fleet()).toEqual({ serving: 0, starting: 3, pending: 100 });
    await t.time.advanceTo(COLD_START_MS);
    // 3 instances × 10 slots taken; the rest wait for a slot.
    expect(t.held).toHaveLength(30);
    expect(t.cloudRun.fleet()).toEqual({ serving: 3, starting: 0, pending: 70 });
    // A slot freed within the wait is taken by the oldest pending request.
    t.held.shift()!.res.end();
    await t.time.advanceTo(COLD_START_MS + 1);
    expect(t.held).toHaveLength(30);
    expect(t.cloudRun.fleet().pending).toBe(69);
    await t.time.advanceTo(pendingWaitMs(COLD_START_MS));
    expect(t.cloudRun.noInstance429).toBe(69);
    expect([...t.answers.values()].filter((s) => s === 429)).toHaveLength(69);
    expect(t.cloudRun.instancesStarted).toBe(3);
    expect(t.cloudRun.maxServing).toBe(3);
  });

  it('routes to fill instances (the most loaded under the target)', async () => {
    const fill = await setup({ minInstances: 2 });
    fill.push(6);
    await fill.time.advanceTo(0);
    expect([fill.onInstance(0), fill.onInstance(1)]).toEqual([6, 0]);
    fill.push(1);
    await fill.time.advanceTo(0);
    expect([fill.onInstance(0), fill.onInstance(1)]).toEqual([6, 1]);
    fill.push(6);
    await fill.time.advanceTo(0);
    // Both at the target: the least loaded takes the next ones, up to its 10 slots.
    expect([fill.onInstance(0), fill.onInstance(1)]).toEqual([7, 6]);
  });

  it('shuts an instance down after 15 idle minutes, down to minInstances', async () => {
    const t = await setup({ minInstances: 1 });
    t.push(13); // ceil(13 / 6) = 3 instances
    await t.time.advanceTo(COLD_START_MS);
    expect(t.cloudRun.fleet().serving).toBe(3);
    t.answerAll();
    await t.time.advanceTo(COLD_START_MS + 1);
    const idleFrom = t.time.nowMs();
    await t.time.advanceTo(idleFrom + 15 * 60_000 - 2);
    expect(t.cloudRun.fleet().serving).toBe(3);
    await t.time.advanceTo(idleFrom + 15 * 60_000);
    // Two shut down (SIGTERM: the worker's stop()), the minimum stays.
    expect(t.cloudRun.fleet().serving).toBe(1);
    expect(t.stopped).toHaveLength(2);
    await t.time.advanceTo(idleFrom + 15 * 60_000 + GRACE_MS);
    expect(t.cloudRun.states().filter((s) => s.alive)).toHaveLength(1);
    // Demand again: the autoscaler starts new instances (new indices, cold starts).
    t.push(7);
    await t.time.advanceTo(t.time.nowMs());
    expect(t.cloudRun.fleet()).toEqual({ serving: 1, starting: 1, pending: 0 });
  });

  it('an instance busy within the idle time is kept', async () => {
    const t = await setup({});
    t.push(1);
    await t.time.advanceTo(COLD_START_MS);
    t.answerAll();
    await t.time.advanceTo(10 * 60_000);
    t.push(1);
    await t.time.advanceTo(10 * 60_000);
    t.answerAll();
    await t.time.advanceTo(20 * 60_000);
    expect(t.cloudRun.fleet().serving).toBe(1);
    await t.time.advanceTo(25 * 60_000 + 1);
    expect(t.cloudRun.fleet().serving).toBe(0);
  });

  it('off (the default): every instance serves from t=0 and requests go to the least busy, in turn', async () => {
    const t = await setup();
    await t.cloudRun.start(t.factory, 3, 0);
    expect(t.built).toEqual([0, 1, 2]);
    t.push(7);
    await t.time.advanceTo(0);
    expect(t.cloudRun.requests.map((r) => r.instance)).toEqual([0, 1, 2, 0, 1, 2, 0]);
    await expect(t.cloudRun.startAutoscaled(t.factory)).rejects.toThrow(/autoscale/);
  });
});
