import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { failureResponse } from '../../../../sim/bigquery-rest';

/**
 * A proxy in front of sim/bigquery-rest.ts that answers the next MERGE statements with BigQuery's
 * "Could not serialize access to table … due to concurrent update" (what a conflicting DML job
 * gets), and forwards everything else. The server's own `failNext` hits whichever query comes
 * next, usually the `seen()` lookup; a conflict is a property of the MERGE, so it is injected here.
 */
export interface ConflictingBigQuery {
  url: string;
  /** The next `count` MERGEs fail with a concurrent-update error. */
  conflictNext(count: number): void;
  /** MERGEs answered with the conflict so far. */
  conflicts(): number;
  stop(): Promise<void>;
}

function statementOf(body: unknown): string {
  const b = body as { query?: unknown; configuration?: { query?: { query?: unknown } } } | undefined;
  const query = b?.configuration?.query?.query ?? b?.query;
  return typeof query === 'string' ? query : '';
}

export async function startConflictingBigQuery(target: string, table: string): Promise<ConflictingBigQuery> {
  let pending = 0;
  let answered = 0;
  const server = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const body = Buffer.concat(chunks);
      const parsed: unknown = body.length > 0 ? JSON.parse(body.toString('utf8')) : undefined;
      if (req.method === 'POST' && pending > 0 && statementOf(parsed).startsWith('MERGE ')) {
        pending -= 1;
        answered += 1;
        const failure = failureResponse('concurrentUpdate', table);
        res.writeHead(failure.status, { 'content-type': 'application/json; charset=UTF-8' });
        res.end(JSON.stringify(failure.body));
        return;
      }
      const headers: Record<string, string> = {};
      for (const name of ['content-type', 'authorization']) {
        const value = req.headers[name];
        if (typeof value === 'string') headers[name] = value;
      }
      const forwarded = await fetch(`${target}${req.url ?? '/'}`, {
        method: req.method ?? 'GET',
        headers,
        body: body.length > 0 ? body : undefined,
      });
      res.writeHead(forwarded.status, {
        'content-type': forwarded.headers.get('content-type') ?? 'application/json',
      });
      res.end(Buffer.from(await forwarded.arrayBuffer()));
    })().catch((error: unknown) => {
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`proxy failure: ${String(error)}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    conflictNext(count) {
      pending += count;
    },
    conflicts: () => answered,
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
