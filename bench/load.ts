import http from 'node:http';
import { type RunSummary, summarize } from './stats';

/**
 * The load generator: a fixed number of POSTs kept at a fixed concurrency over keep-alive
 * connections, as a push subscription with many messages outstanding would send them. The same
 * generator drives every server, in the same process, so their figures compare.
 */

export interface LoadOptions {
  /** `http://127.0.0.1:PORT/push` */
  url: string;
  /** One request body per request, sent in order. */
  bodies: readonly Buffer[];
  /** Requests in flight at once. */
  concurrency: number;
  /** Stops sending new requests after this long (a bound, not the plan: the run is count-bound). */
  maxDurationMs: number;
}

export interface LoadResult extends RunSummary {
  /** Requests answered with a 2xx status (an ack for Pub/Sub). */
  acked: number;
  /** Answers by HTTP status ("error" when no answer came). */
  statuses: Record<string, number>;
  /** Whether the duration bound stopped the run before every body was sent. */
  truncated: boolean;
}

/** Sends every body (or as many as fit in `maxDurationMs`) and measures rate and latencies. */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const target = new URL(options.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.concurrency });
  const latenciesMs: number[] = [];
  const statuses: Record<string, number> = {};
  let next = 0;
  let truncated = false;
  const started = performance.now();
  const deadline = started + options.maxDurationMs;

  const send = (body: Buffer) =>
    new Promise<string>((resolve) => {
      const request = http.request(
        {
          agent,
          host: target.hostname,
          port: target.port,
          path: target.pathname,
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': body.length },
          timeout: 30_000,
        },
        (response) => {
          response.resume();
          response.once('end', () => resolve(String(response.statusCode)));
        },
      );
      request.once('timeout', () => request.destroy(new Error('timeout')));
      request.once('error', () => resolve('error'));
      request.end(body);
    });

  const lane = async () => {
    for (let i = next++; i < options.bodies.length; i = next++) {
      if (performance.now() > deadline) {
        truncated = true;
        return;
      }
      const sent = performance.now();
      const status = await send(options.bodies[i]!);
      latenciesMs.push(performance.now() - sent);
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  };
  try {
    await Promise.all(Array.from({ length: options.concurrency }, lane));
  } finally {
    agent.destroy();
  }
  const elapsedMs = performance.now() - started;
  const acked = Object.entries(statuses)
    .filter(([status]) => /^2\d\d$/.test(status))
    .reduce((sum, [, n]) => sum + n, 0);
  return { ...summarize(latenciesMs, elapsedMs), acked, statuses, truncated };
}
