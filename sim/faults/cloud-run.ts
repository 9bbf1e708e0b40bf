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
  private readonly instances: SimInstance[] = [];
  /** Slots of serving instances (-1 while a spare starts in that slot). */
  private readonly serving: number[] = [];
  private readonly spares: number[] = [];
  private readonly killers = new Map<RequestRecord, () => void>();
  private readonly context = new AsyncLocalStorage<RequestRecord>();
  private turn = 0;
  private readonly stallsUsed = new Set<number>();
  /** How long a stalled call holds the request: past the request timeout. */
  private readonly stallMs: number;

  constructor(
    readonly time: SimClock,
    private readonly options: {
      requestTimeoutMs: number;
      graceMs: number;
      coldStartMs: number;
      schedule: FaultSchedule['cloudRun'];
      faults: FaultLog;
      keyOf: (messageId: string) => string;
    },
  ) {
    this.stallMs = options.requestTimeoutMs + 60_000;
  }

  /** Builds `serving` instances and `spares` (each in its own slot); setup runs before the clock moves. */
  async start(factory: InstanceFactory, serving: number, spares: number): Promise<void> {
    for (let i = 0; i < serving + spares; i++) {
      const worker = await factory(i, new PortTracker(this, i));
      this.instances.push({ index: i, worker, alive: true, serving: i < serving, open: new Set() });
      if (i < serving) this.serving.push(i);
      else this.spares.push(i);
    }
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

  /** Instances that ever served, with their state (for the record). */
  states(): Array<{ index: number; alive: boolean; serving: boolean }> {
    return this.instances.map((i) => ({ index: i.index, alive: i.alive, serving: i.serving }));
  }

  /** A Pub/Sub push: resolves with the HTTP status Pub/Sub gets. */
  push(body: string, messageId: string): Promise<number> {
    const target = this.pick();
    if (target === undefined) {
      // No instance serving (all replaced at once): Cloud Run's "no available instance".
      return this.time.sleep(10_000).then(() => 429);
    }
    const instance = this.instances[target]!;
    const now = this.time.nowMs();
    const record: RequestRecord = {
      id: this.requests.length,
      instance: target,
      messageId,
      delivery: this.requests.length,
      startMs: now,
      deadlineMs: now + this.options.requestTimeoutMs,
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
      };
      const deadline: SimTimer = this.time.after(this.options.requestTimeoutMs, () => answer(504));
      const req = new IncomingMessage(new Socket());
      req.method = 'POST';
      req.url = '/push';
      req.headers = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) };
      const res = new ServerResponse(req);
      const end = (status: number) => {
        instance.open.delete(record);
        this.killers.delete(record);
        if (record.endMs !== undefined || record.killedAtMs !== undefined) return;
        record.endMs = this.time.nowMs();
        record.status = status;
        answer(status);
      };
      res.write = (() => true) as typeof res.write;
      res.end = (() => {
        end(res.statusCode);
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
    for (const r of instance.open) r.sigtermAtMs = now;
    // What the worker does on SIGTERM (main.ts): its own stop(); Cloud Run kills it after the grace.
    void instance.worker.stop().catch(() => undefined);
    this.time.after(this.options.graceMs, () => this.kill(instance));
  }

  /** Takes the instance out of its slot; a spare starts there after a cold start. */
  private stopServing(instance: SimInstance): void {
    instance.serving = false;
    const slot = this.serving.indexOf(instance.index);
    if (slot < 0) return;
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

  private kill(instance: SimInstance): void {
    if (!instance.alive) return;
    instance.alive = false;
    const now = this.time.nowMs();
    for (const r of instance.open) {
      r.killedAtMs = now;
      this.killers.get(r)?.();
      this.killers.delete(r);
    }
    instance.open.clear();
  }
}
