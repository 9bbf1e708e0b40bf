import { AsyncLocalStorage } from 'node:async_hooks';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import type { RunningWorker } from '../../worker/src/main';
import type { SimClock, SimTimer } from '../time';
import type { FaultLog, FaultSchedule, StallPoint } from './schedule';

/**
 * Cloud Run in front of the worker instances, in process. Each instance is the real worker as its
 * composition root serves it (`serve()`); a request reaches it as an HTTP request event, with no
 * socket, so a run does no I/O and replays exactly. What it holds to:
 *
 * - a request goes to the least busy instance that is serving (ties in turn);
 * - at the request timeout Cloud Run answers 504 and lets go of the request, while the handler
 *   runs on inside the instance;
 * - SIGTERM: the instance gets no new requests and has 10 s; then SIGKILL. SIGKILL: the process is
 *   gone at once; requests still open get no answer (a nack for Pub/Sub), and nothing the process
 *   had not yet sent ever arrives anywhere. A spare instance takes its place after a cold start.
 *
 * That is the default: every instance given to `start()` serves from t=0 and Cloud Run's slots are
 * the caller's business (the fault soak and its replays depend on it exactly). With `autoscale`
 * ({@link AutoscaleOptions}, started by `startAutoscaled()`) the model follows Cloud Run's
 * autoscaler instead; see there for what is documented and what is assumed.
 *
 * Every call a handler makes through a port is recorded against its request (which call, when it
 * started and ended), so the checks can see handler activity against the request's deadline.
 */

/** One request as an instance saw it. */
export interface RequestRecord {
  id: number;
  instance: number;
  messageId: string;
  /** The d-th request Cloud Run dispatched (the schedule's stalls name it). */
  delivery: number;
  startMs: number;
  /** Cloud Run's request deadline: start + the request timeout. */
  deadlineMs: number;
  /** When the handler answered (undefined: it never did). */
  endMs?: number;
  status?: number;
  /** Cloud Run's answer to Pub/Sub (the handler's, 504 at the deadline, 503 when the instance died). */
  answer?: number;
  /** The instance was killed while the request was open. */
  killedAtMs?: number;
  /** The instance had been told to stop (SIGTERM) while the request was open. */
  sigtermAtMs?: number;
  /** Calls the handler made through its ports: [port, startMs, endMs?]. */
  calls: Array<{ port: string; startMs: number; endMs?: number }>;
}

export interface SimInstance {
  index: number;
  worker: RunningWorker;
  alive: boolean;
  serving: boolean;
  open: Set<RequestRecord>;
}

/** Builds instance `index` (its ports already wrapped by `ports`). */
export type InstanceFactory = (index: number, ports: PortTracker) => Promise<RunningWorker>;

/**
 * Cloud Run's instance autoscaling, as the model follows it when asked to.
 *
 * Documented (cloud.google.com/run/docs/about-instance-autoscaling, /configuring/scaling-controls,
 * /configuring/min-instances, /about-concurrency):
 * - the autoscaler keeps instances at a target utilization of 60 % of the maximum concurrency (and
 *   60 % CPU), never past the maximum nor under the minimum instances;
 * - scaling from zero is triggered by a request only; a new instance serves after its start-up;
 * - a request that no instance can take waits (pending) up to 3.5 × the average start-up time or
 *   10 s, whichever is greater, for an instance that finishes a request or starts; then 429;
 * - `concurrency` is a maximum per instance; instances that serve no request are idle, and Cloud
 *   Run removes idle instances above the minimum (instances over the maximum are destroyed after
 *   15 minutes idle).
 *
 * Assumed (the documentation gives no figure or rule):
 * - the decision is taken on every arrival and every change of the serving set, on the requests
 *   open at that moment (slots taken + pending), not on a one-minute average: instances are added
 *   as soon as open requests / instances (serving + starting) exceed the target, i.e. as fast as
 *   the documented target allows (more instances, sooner, than a one-minute average would give);
 * - the CPU target is not modelled (the sweep's CPU is not simulated time);
 * - an instance idle for `idleMs` (15 minutes, the longest the documentation names) is shut down
 *   (SIGTERM, then SIGKILL after the grace) while more than `minInstances` serve;
 * - routing across instances is not documented: a request goes to the most loaded instance still
 *   under the target (else the least loaded with a free slot), so load gathers on as few instances
 *   as the target allows.
 */
export interface AutoscaleOptions {
  minInstances: number;
  maxInstances: number;
  /** Maximum concurrent requests per instance. */
  concurrency: number;
  /** The share of `concurrency` the autoscaler keeps each instance at (documented default 0.6). */
  targetUtilization: number;
  /** An instance idle this long (simulated ms) is shut down while more than `minInstances` serve. */
  idleMs: number;
}

/** Cloud Run's documented wait for an instance: 3.5 × the average start-up time, at least 10 s. */
export function pendingWaitMs(coldStartMs: number): number {
  return Math.max(10_000, 3.5 * coldStartMs);
}

/**
 * Wraps an instance's ports: records each call against the request it serves, applies the
 * schedule's deadline stalls, and stops a dead instance's calls from ever returning.
 */
export class PortTracker {
  constructor(
    private readonly cloudRun: CloudRunModel,
    readonly instance: number,
  ) {}

  /** `call` as port `port` of this instance. */
  async track<T>(port: StallPoint | 'lease', call: () => Promise<T>): Promise<T> {
    const instance = this.cloudRun.instance(this.instance);
    if (!instance.alive) return never();
    const request = this.cloudRun.current();
    const entry: RequestRecord['calls'][number] | undefined = request
      ? { port, startMs: this.cloudRun.time.nowMs() }
      : undefined;
    if (request && entry) request.calls.push(entry);
    if (request) await this.cloudRun.stallIfScheduled(request, port === 'lease' ? 'memo' : port);
    try {
      return await call();
    } finally {
      if (entry) entry.endMs = this.cloudRun.time.nowMs();
      if (!instance.alive) await never();
    }
  }
}

const never = <T>(): Promise<T> => new Promise<T>(() => {});

export class CloudRunModel {
  readonly requests: RequestRecord[] = [];
  /** When each instance was told to stop (SIGTERM) and when its process died, as they happened. */
  readonly lifecycle = new Map<number, { sigtermAtMs?: number; killedAtMs?: number }>();
  private readonly instances: SimInstance[] = [];
  /** Slots of serving instances (-1 while a spare starts in that slot). */
  private readonly serving: number[] = [];
  private readonly spares: number[] = [];
  private readonly killers = new Map<RequestRecord, () => void>();
  private readonly context = new AsyncLocalStorage<RequestRecord>();
  /** The instance running its SIGTERM handler, for the code it runs (its own clock). */
  private readonly stopping = new AsyncLocalStorage<number>();
  /** The instance whose timer callback (a batch, a heartbeat) or start-up code is running. */
  private readonly ownCode = new AsyncLocalStorage<number>();
  private turn = 0;
  private readonly stallsUsed = new Set<number>();
  /** How long a stalled call holds the request: past the request timeout. */
  private readonly stallMs: number;
  /** Autoscaled mode only: how instances are built, and the requests waiting for a slot. */
  private readonly auto: AutoscaleOptions | undefined;
  private factory: InstanceFactory | undefined;
  private nextIndex = 0;
  private starting = 0;
  private readonly slotsTaken = new Map<number, number>();
  private readonly idleTimers = new Map<number, SimTimer>();
  private readonly pending: Array<{ claim: (index: number) => void }> = [];
  /** Autoscaled mode: requests answered 429 after waiting for a slot ("no available instance"). */
  noInstance429 = 0;
  /** Autoscaled mode: instances started (cold starts), and the most serving at once. */
  instancesStarted = 0;
  maxServing = 0;

  constructor(
    readonly time: SimClock,
    private readonly options: {
      requestTimeoutMs: number;
      graceMs: number;
      coldStartMs: number;
      schedule: FaultSchedule['cloudRun'];
      faults: FaultLog;
      keyOf: (messageId: string) => string;
      /** What the worker's answer becomes on its way out (a mutant's changed answers); default as is. */
      answerOf?: (status: number) => number;
      /** Follow Cloud Run's autoscaler (start with `startAutoscaled`); off: today's fixed fleet. */
      autoscale?: AutoscaleOptions;
    },
  ) {
    this.stallMs = options.requestTimeoutMs + 60_000;
    this.auto = options.autoscale;
  }

  /** Builds `serving` instances and `spares` (each in its own slot); setup runs before the clock moves. */
  async start(factory: InstanceFactory, serving: number, spares: number): Promise<void> {
    if (this.auto) throw new Error('an autoscaled Cloud Run model starts with startAutoscaled()');
    for (let i = 0; i < serving + spares; i++) {
      const worker = await this.build(factory, i);
      this.instances.push({ index: i, worker, alive: true, serving: i < serving, open: new Set() });
      if (i < serving) this.serving.push(i);
      else this.spares.push(i);
    }
    this.scheduleSignals();
  }

  /**
   * Autoscaled mode: builds the `minInstances` kept warm (serving from t=0, setup before the clock
   * moves); every further instance is built by `factory` when the autoscaler adds it, and serves
   * after `coldStartMs`. With no minimum, the first request starts the first instance.
   */
  async startAutoscaled(factory: InstanceFactory): Promise<void> {
    const auto = this.auto;
    if (!auto) throw new Error('startAutoscaled() needs the autoscale option');
    if (!(auto.maxInstances >= 1 && auto.minInstances >= 0 && auto.minInstances <= auto.maxInstances))
      throw new Error(`autoscale: bad instance limits ${auto.minInstances}..${auto.maxInstances}`);
    this.factory = factory;
    for (let i = 0; i < auto.minInstances; i++) {
      const index = this.nextIndex++;
      const worker = await this.build(factory, index);
      this.instances[index] = { index, worker, alive: true, serving: true, open: new Set() };
      this.serving.push(index);
      this.instancesStarted++;
    }
    this.maxServing = this.serving.length;
    for (const index of this.serving) this.armIdle(index);
    this.scheduleSignals();
  }

  private scheduleSignals(): void {
    for (const s of this.options.schedule.signals) {
      this.time.after(s.atMs, () => {
        const slots = this.serving.filter((i) => i >= 0);
        this.signal(slots[s.instance % Math.max(1, slots.length)], s.signal);
      });
    }
  }

  instance(index: number): SimInstance {
    return this.instances[index]!;
  }

  /** The request whose handler is running the current code (undefined in timers of batches). */
  current(): RequestRecord | undefined {
    return this.context.getStore();
  }

  /**
   * The instance whose code is running now: a request's, or one handling its SIGTERM (so that the
   * drain's deadline is read on the same clock as the requests' own), undefined elsewhere.
   */
  currentInstance(): number | undefined {
    return this.context.getStore()?.instance ?? this.stopping.getStore() ?? this.ownCode.getStore();
  }

  /**
   * `callback`, to run later as code of the instance running now (none: as it is). A process has
   * one clock: a timer an instance sets (its batch, its lease heartbeat) reads the clock its
   * requests read, skew included, and a deadline set in a request is read on that same clock.
   */
  bindToCurrentInstance(callback: () => void): () => void {
    const instance = this.currentInstance();
    return instance === undefined ? callback : () => this.ownCode.run(instance, callback);
  }

  /** Builds instance `index` as code of that instance (the timers it sets are its own). */
  private build(factory: InstanceFactory, index: number): ReturnType<InstanceFactory> {
    return this.ownCode.run(index, () => factory(index, new PortTracker(this, index)));
  }

  /** Instances that ever served, with their state (for the record). */
  states(): Array<{ index: number; alive: boolean; serving: boolean }> {
    // Autoscaled, an index is taken when an instance starts and filled once it serves: skip holes.
    return this.instances
      .filter((i) => i !== undefined)
      .map((i) => ({ index: i.index, alive: i.alive, serving: i.serving }));
  }

  /** A Pub/Sub push: resolves with the HTTP status Pub/Sub gets. */
  push(body: string, messageId: string): Promise<number> {
    if (this.auto) return this.pushAutoscaled(body, messageId);
    const target = this.pick();
    if (target === undefined) {
      // No instance serving (all replaced at once): Cloud Run's "no available instance".
      return this.time.sleep(10_000).then(() => 429);
    }
    return this.send(target, body, messageId);
  }

  /** The request on instance `target` (a slot already taken there in autoscaled mode). */
  private send(target: number, body: string, messageId: string): Promise<number> {
    const instance = this.instances[target]!;
    const arrivedMs = this.time.nowMs();
    const delivery = this.requests.length;
    // Time spent pending (or in a cold start) before the instance sees the request: Cloud Run's
    // request timeout runs from the arrival, the worker's own deadline from what it sees.
    const pendingMs = this.options.schedule.pending?.find((p) => p.delivery === delivery)?.ms ?? 0;
    if (pendingMs > 0)
      this.options.faults.injected(
        'cloudRun.pendingTime',
        [this.options.keyOf(messageId)],
        `delivery ${delivery} waits ${pendingMs} ms before its instance sees it`,
      );
    const record: RequestRecord = {
      id: this.requests.length,
      instance: target,
      messageId,
      delivery,
      startMs: arrivedMs + pendingMs,
      deadlineMs: arrivedMs + this.options.requestTimeoutMs,
      calls: [],
    };
    this.requests.push(record);
    instance.open.add(record);
    return new Promise<number>((resolve) => {
      let answered = false;
      const answer = (status: number) => {
        if (answered) return;
        answered = true;
        record.answer = status;
        deadline.cancel();
        resolve(status);
        // Cloud Run lets go of the slot once it answered (the handler may still run).
        if (this.auto) this.release(target);
      };
      const deadline: SimTimer = this.time.after(this.options.requestTimeoutMs, () => answer(504));
      const dispatch = () => {
        const req = new IncomingMessage(new Socket());
        req.method = 'POST';
        req.url = '/push';
        req.headers = {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
        };
        const res = new ServerResponse(req);
        const end = (status: number) => {
          instance.open.delete(record);
          this.killers.delete(record);
          if (this.auto) this.armIdle(target);
          if (record.endMs !== undefined || record.killedAtMs !== undefined) return;
          record.endMs = this.time.nowMs();
          record.status = status;
          answer(status);
        };
        res.write = (() => true) as typeof res.write;
        res.end = (() => {
          end(this.options.answerOf ? this.options.answerOf(res.statusCode) : res.statusCode);
          // What the HTTP server emits once an answer is sent and the exchange is over.
          queueMicrotask(() => {
            res.emit('finish');
            res.emit('close');
          });
          return res;
        }) as typeof res.end;
        this.killers.set(record, () => answer(503));
        this.context.run(record, () => {
          instance.worker.server.emit('request', req, res);
          req.push(body);
          req.push(null);
        });
      };
      if (pendingMs > 0) {
        this.time.after(pendingMs, () => {
          // Timed out or killed meanwhile: the instance never sees it.
          if (answered || !instance.alive) {
            instance.open.delete(record);
            if (!answered) answer(503);
            return;
          }
          dispatch();
        });
      } else dispatch();
    });
  }

  /** Holds the d-th delivery's first call at its stall point past the request timeout (once). */
  async stallIfScheduled(request: RequestRecord, point: StallPoint): Promise<void> {
    const i = this.options.schedule.stalls.findIndex(
      (s) => s.delivery === request.delivery && s.call === point,
    );
    if (i < 0 || this.stallsUsed.has(i)) return;
    this.stallsUsed.add(i);
    this.options.faults.injected(
      'cloudRun.deadline',
      [this.options.keyOf(request.messageId)],
      `delivery ${request.delivery}: its ${point} call outlasts the request timeout`,
    );
    await this.time.sleep(this.stallMs);
  }

  private pick(): number | undefined {
    let best: number | undefined;
    const n = this.serving.length;
    for (let k = 0; k < n; k++) {
      const index = this.serving[(this.turn + k) % n]!;
      const instance = this.instances[index];
      if (!instance?.serving) continue;
      if (best === undefined || instance.open.size < this.instances[best]!.open.size) best = index;
    }
    this.turn++;
    return best;
  }

  /** Delivers a signal to instance `index` (a no-op when it no longer serves). */
  signal(index: number | undefined, signal: 'SIGTERM' | 'SIGKILL'): void {
    if (index === undefined) return;
    const instance = this.instances[index]!;
    if (!instance.alive || !instance.serving) return;
    const keys = [...instance.open].map((r) => this.options.keyOf(r.messageId));
    this.stopServing(instance);
    if (signal === 'SIGKILL') {
      this.options.faults.injected('cloudRun.sigkill', keys, `instance ${index} killed`);
      this.kill(instance);
      return;
    }
    this.options.faults.injected(
      'cloudRun.sigterm',
      keys,
      `instance ${index}: SIGTERM, ${this.options.graceMs} ms grace`,
    );
    const now = this.time.nowMs();
    this.lifecycle.set(index, { ...this.lifecycle.get(index), sigtermAtMs: now });
    for (const r of instance.open) r.sigtermAtMs = now;
    // What the worker does on SIGTERM (main.ts): its own stop(); Cloud Run kills it after the grace.
    void this.stopping.run(index, () => instance.worker.stop()).catch(() => undefined);
    this.time.after(this.options.graceMs, () => this.kill(instance));
  }

  /** Takes the instance out of its slot; a spare starts there after a cold start. */
  private stopServing(instance: SimInstance): void {
    instance.serving = false;
    const slot = this.serving.indexOf(instance.index);
    if (slot < 0) return;
    if (this.auto) {
      // No spares: the autoscaler starts an instance if the open requests call for one.
      this.serving.splice(slot, 1);
      this.idleTimers.get(instance.index)?.cancel();
      this.scaleOut();
      return;
    }
    const spare = this.spares.shift();
    if (spare === undefined) {
      this.serving.splice(slot, 1);
      return;
    }
    this.serving[slot] = -1;
    this.time.after(this.options.coldStartMs, () => {
      this.serving[slot] = spare;
      this.instances[spare]!.serving = true;
    });
  }

  private async pushAutoscaled(body: string, messageId: string): Promise<number> {
    let target = this.claim();
    if (target === undefined) {
      // No serving instance has a free slot: the request is pending until one has, or 429.
      target = await new Promise<number | undefined>((resolve) => {
        const waiter = {
          claim: (index: number) => {
            timer.cancel();
            resolve(index);
          },
        };
        const timer = this.time.after(pendingWaitMs(this.options.coldStartMs), () => {
          const i = this.pending.indexOf(waiter);
          if (i >= 0) this.pending.splice(i, 1);
          resolve(undefined);
        });
        this.pending.push(waiter);
        this.scaleOut();
      });
      if (target === undefined) {
        this.noInstance429++;
        return 429;
      }
    } else this.scaleOut();
    return this.send(target, body, messageId);
  }

  private taken(index: number): number {
    return this.slotsTaken.get(index) ?? 0;
  }

  /** Takes a slot on the serving instance the routing picks (undefined: none has a free slot). */
  private claim(): number | undefined {
    const auto = this.auto!;
    const target = auto.concurrency * auto.targetUtilization;
    let best: number | undefined;
    for (const index of this.serving) {
      const used = this.taken(index);
      if (!this.instances[index]!.serving || used >= auto.concurrency) continue;
      if (best === undefined) {
        best = index;
        continue;
      }
      const b = this.taken(best);
      // Under the target, the most loaded first; past it, the least loaded.
      const better = used < target ? b >= target || used > b : b >= target && used < b;
      if (better) best = index;
    }
    if (best === undefined) return undefined;
    this.slotsTaken.set(best, this.taken(best) + 1);
    this.idleTimers.get(best)?.cancel();
    this.idleTimers.delete(best);
    return best;
  }

  /** A slot of instance `index` is free again: a pending request takes it, or the instance may idle. */
  private release(index: number): void {
    this.slotsTaken.set(index, Math.max(0, this.taken(index) - 1));
    this.dispatchPending();
    this.armIdle(index);
  }

  private dispatchPending(): void {
    while (this.pending.length > 0) {
      const index = this.claim();
      if (index === undefined) return;
      this.pending.shift()!.claim(index);
    }
  }

  /** Adds instances while the open requests per instance (serving + starting) exceed the target. */
  private scaleOut(): void {
    const auto = this.auto!;
    let open = this.pending.length;
    for (const index of this.serving) open += this.taken(index);
    const wanted = Math.min(
      auto.maxInstances,
      Math.max(auto.minInstances, Math.ceil(open / (auto.concurrency * auto.targetUtilization))),
    );
    while (this.serving.length + this.starting < wanted) this.launch();
  }

  /** A new instance: built now, serving after the cold start. */
  private launch(): void {
    const index = this.nextIndex++;
    this.starting++;
    this.instancesStarted++;
    const built = this.build(this.factory!, index);
    // Building is real work (modules, a listening socket): the clock waits for it, so the instance
    // serves after exactly the cold start, whatever the disk does.
    this.time.hold?.(built);
    void Promise.all([built, this.time.sleep(this.options.coldStartMs)]).then(([worker]) => {
      this.starting--;
      this.instances[index] = { index, worker, alive: true, serving: true, open: new Set() };
      this.serving.push(index);
      this.maxServing = Math.max(this.maxServing, this.serving.length);
      this.dispatchPending();
      this.armIdle(index);
    });
  }

  /** An instance with no slot taken and no handler running is idle; past `idleMs` it is shut down. */
  private armIdle(index: number): void {
    const auto = this.auto!;
    const instance = this.instances[index];
    if (!instance?.serving || this.taken(index) > 0 || instance.open.size > 0) return;
    this.idleTimers.get(index)?.cancel();
    this.idleTimers.set(
      index,
      this.time.after(auto.idleMs, () => {
        this.idleTimers.delete(index);
        if (!instance.serving || this.taken(index) > 0 || instance.open.size > 0) return;
        if (this.serving.length <= auto.minInstances) return;
        this.serving.splice(this.serving.indexOf(index), 1);
        instance.serving = false;
        this.lifecycle.set(index, { ...this.lifecycle.get(index), sigtermAtMs: this.time.nowMs() });
        // Scale-in: SIGTERM (the worker's own stop()), SIGKILL after the grace; no request is open.
        void this.stopping.run(index, () => instance.worker.stop()).catch(() => undefined);
        this.time.after(this.options.graceMs, () => this.kill(instance));
      }),
    );
  }

  /** Autoscaled mode: the instances serving now, and those still starting. */
  fleet(): { serving: number; starting: number; pending: number } {
    return { serving: this.serving.length, starting: this.starting, pending: this.pending.length };
  }

  private kill(instance: SimInstance): void {
    if (!instance.alive) return;
    instance.alive = false;
    const now = this.time.nowMs();
    this.lifecycle.set(instance.index, { ...this.lifecycle.get(instance.index), killedAtMs: now });
    for (const r of instance.open) {
      r.killedAtMs = now;
      this.killers.get(r)?.();
      this.killers.delete(r);
    }
    instance.open.clear();
  }
}
