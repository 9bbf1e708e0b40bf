/**
 * A local server speaking the one Cloud Storage JSON API call the live check makes:
 * `GET /storage/v1/b/BUCKET/notificationConfigs`. Started by each test on 127.0.0.1.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { feeding } from './fake-lister';

/** A notification resource in the JSON API's own (snake_case) shape. */
export interface NotificationResource {
  kind?: string;
  id: string;
  topic: string;
  event_types?: string[];
  payload_format: string;
  object_name_prefix?: string;
  etag?: string;
  selfLink?: string;
}

export interface FakeStorageServer {
  /** `http://127.0.0.1:PORT`, to pass as `apiEndpoint`. */
  readonly url: string;
  /** Request paths received, in order. */
  readonly requests: string[];
  stop(): Promise<void>;
}

/** Starts the server with the notification configs of each bucket; other buckets answer 404. */
export async function startFakeStorage(
  buckets: Record<string, NotificationResource[]>,
): Promise<FakeStorageServer> {
  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    requests.push(`${req.method} ${path}`);
    // STORAGE_EMULATOR_HOST clients may leave out the /storage/v1 prefix.
    const match = /^(?:\/storage\/v1)?\/b\/([^/]+)\/notificationConfigs$/.exec(path);
    const bucket = match?.[1] === undefined ? undefined : decodeURIComponent(match[1]);
    const items = bucket === undefined ? undefined : buckets[bucket];
    res.setHeader('content-type', 'application/json');
    if (req.method !== 'GET' || items === undefined) {
      res.statusCode = 404;
      res.end(JSON.stringify({ error: { code: 404, message: `The specified bucket does not exist.` } }));
      return;
    }
    res.end(
      JSON.stringify({
        kind: 'storage#notifications',
        items: items.map((n) => ({
          kind: 'storage#notification',
          selfLink: `http://127.0.0.1/storage/v1/b/${bucket}/notificationConfigs/${n.id}`,
          etag: n.id,
          ...n,
        })),
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

/** {@link feeding}'s notification config in the JSON API's own shape. */
export function pipelineNotification(id: string, topic?: string): NotificationResource {
  const n = feeding(id, topic);
  return { id, topic: n.topic, event_types: [...n.eventTypes], payload_format: n.payloadFormat };
}
