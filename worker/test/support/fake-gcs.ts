import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CRC32C } from '@google-cloud/storage';

/**
 * A local stand-in for the Cloud Storage JSON API, enough for @google-cloud/storage to read one
 * generation of an object: `GET /storage/v1/b/B/o/NAME?generation=G` (metadata) and the same path
 * (or `/download/storage/v1/…`) with `alt=media` (bytes, with `x-goog-hash` crc32c/md5 so the
 * library's checksum validation really runs). A missing bucket, object or generation answers the
 * documented 404; `failNext` answers documented error bodies; `stallNext` never answers (to test
 * timeouts). Generations are decimal strings end to end. Every request is recorded.
 *
 * Not modelled: versioning (a deleted generation is simply gone), ACLs, uploads through the API
 * (tests put objects with `putObject`), gzip transcoding.
 */

export interface RecordedGcsRequest {
  method: string;
  path: string;
  query: Record<string, string>;
}

export interface FakeGcs {
  /** The `apiEndpoint` to give the client. */
  url: string;
  requests: RecordedGcsRequest[];
  /** Stores a new generation of an object and returns its generation (a decimal string). */
  putObject(
    bucket: string,
    name: string,
    bytes: Buffer,
    options?: { contentType?: string; generation?: string },
  ): string;
  /** Removes one generation, as an overwrite or a delete does on a bucket without versioning. */
  deleteGeneration(bucket: string, name: string, generation: string): void;
  /**
   * The next `count` requests (of one kind: metadata calls, media downloads, or any) answer this
   * HTTP status with the JSON API's error body.
   */
  failNext(count: number, status: GcsFailureStatus, kind?: 'metadata' | 'media' | 'any'): void;
  /** The next `count` requests are never answered. */
  stallNext(count: number): void;
  /** The next media download sends bytes that do not match the object's checksums. */
  corruptNextDownload(): void;
  stop(): Promise<void>;
}

export type GcsFailureStatus = 401 | 403 | 404 | 429 | 500 | 502 | 503;

interface StoredObject {
  bucket: string;
  name: string;
  generation: string;
  contentType: string;
  bytes: Buffer;
  crc32c: string;
  md5Hash: string;
  timeCreated: string;
}

const STATUS_TEXT: Record<number, string> = {
  401: 'Anonymous caller does not have storage.objects.get access to the Google Cloud Storage object.',
  403: "docline-worker@acme-dev.iam.gserviceaccount.com does not have storage.objects.get access to the Google Cloud Storage object. Permission 'storage.objects.get' denied on resource (or it may not exist).",
  404: 'No such object',
  429: 'The rate of change requests to the object exceeds the rate limit. Please reduce the rate of create, update, and delete requests.',
  500: 'We encountered an internal error. Please try again.',
  502: 'Bad Gateway',
  503: 'We encountered an internal error. Please try again.',
};

const REASONS: Record<number, string> = {
  401: 'required',
  403: 'forbidden',
  404: 'notFound',
  429: 'rateLimitExceeded',
  500: 'backendError',
  502: 'backendError',
  503: 'backendError',
};

function errorBody(status: number, message?: string) {
  const msg = message ?? STATUS_TEXT[status] ?? 'error';
  return {
    error: {
      code: status,
      message: msg,
      errors: [{ message: msg, domain: 'global', reason: REASONS[status] }],
    },
  };
}

/** Starts the fake on 127.0.0.1 on a free port. */
export async function startFakeGcs(): Promise<FakeGcs> {
  const requests: RecordedGcsRequest[] = [];
  const objects = new Map<string, StoredObject>();
  const failures: Array<{ status: GcsFailureStatus; kind: 'metadata' | 'media' | 'any' }> = [];
  let stalls = 0;
  let corrupt = false;
  let nextGeneration = 1764460800000000n;
  const stalled = new Set<ServerResponse>();
  const keyOf = (bucket: string, name: string, generation: string) =>
    `${bucket}\u0000${name}\u0000${generation}`;

  function sendJson(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
    res.end(JSON.stringify(body));
  }

  function resource(o: StoredObject) {
    return {
      kind: 'storage#object',
      id: `${o.bucket}/${o.name}/${o.generation}`,
      selfLink: `http://fake/storage/v1/b/${o.bucket}/o/${encodeURIComponent(o.name)}`,
      name: o.name,
      bucket: o.bucket,
      generation: o.generation,
      metageneration: '1',
      contentType: o.contentType,
      storageClass: 'STANDARD',
      size: String(o.bytes.length),
      md5Hash: o.md5Hash,
      crc32c: o.crc32c,
      etag: 'CJ+Yy9u+/IIDEAE=',
      timeCreated: o.timeCreated,
      updated: o.timeCreated,
    };
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://fake');
    requests.push({
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
    });
    if (stalls > 0) {
      stalls -= 1;
      stalled.add(res);
      return;
    }
    const kind = url.searchParams.get('alt') === 'media' ? 'media' : 'metadata';
    const failure = failures.findIndex((f) => f.kind === 'any' || f.kind === kind);
    if (failure >= 0) {
      const { status } = failures.splice(failure, 1)[0]!;
      sendJson(res, status, errorBody(status));
      return;
    }
    const match = /^(?:\/download)?\/storage\/v1\/b\/([^/]+)\/o\/([^/]+)$/.exec(url.pathname);
    if (req.method !== 'GET' || !match) {
      sendJson(res, 404, errorBody(404, `Not Found: ${url.pathname}`));
      return;
    }
    const bucket = decodeURIComponent(match[1]!);
    const name = decodeURIComponent(match[2]!);
    // GcsReader always names the generation: a request without one finds nothing.
    const generation = url.searchParams.get('generation') ?? '';
    const object = objects.get(keyOf(bucket, name, generation));
    if (!object) {
      sendJson(res, 404, errorBody(404, `No such object: ${bucket}/${name}#${generation}`));
      return;
    }
    if (url.searchParams.get('alt') !== 'media') {
      sendJson(res, 200, resource(object));
      return;
    }
    const body = corrupt ? Buffer.from(object.bytes.map((b) => b ^ 0xff)) : object.bytes;
    corrupt = false;
    res.writeHead(200, {
      'content-type': object.contentType,
      'content-length': String(body.length),
      'x-goog-generation': object.generation,
      'x-goog-metageneration': '1',
      'x-goog-stored-content-encoding': 'identity',
      'x-goog-stored-content-length': String(object.bytes.length),
      'x-goog-hash': `crc32c=${object.crc32c},md5=${object.md5Hash}`,
    });
    res.end(body);
  }

  const server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    putObject(bucket, name, bytes, options = {}) {
      nextGeneration += 1n;
      const generation = options.generation ?? String(nextGeneration);
      const crc = new CRC32C();
      crc.update(bytes);
      objects.set(keyOf(bucket, name, generation), {
        bucket,
        name,
        generation,
        contentType: options.contentType ?? 'application/octet-stream',
        bytes: Buffer.from(bytes),
        crc32c: crc.toString(),
        md5Hash: createHash('md5').update(bytes).digest('base64'),
        timeCreated: '2026-11-30T00:00:00.123Z',
      });
      return generation;
    },
    deleteGeneration(bucket, name, generation) {
      objects.delete(keyOf(bucket, name, generation));
    },
    failNext(count, status, kind = 'any') {
      for (let i = 0; i < count; i += 1) failures.push({ status, kind });
    },
    stallNext(count) {
      stalls += count;
    },
    corruptNextDownload() {
      corrupt = true;
    },
    stop: () =>
      new Promise<void>((resolve, reject) => {
        for (const res of stalled) res.destroy();
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
