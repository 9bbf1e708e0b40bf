import type { Readable } from 'node:stream';
import { Storage, type StorageOptions } from '@google-cloud/storage';
import { DELIVERY_DEFAULTS } from '../../contract/settings';
import { ConfigurationError, RejectionError, TransientError } from '../../core/errors';
import type { ObjectRef, Reader } from '../../core/ports';

/**
 * Reads exactly the generation a notification names, from Cloud Storage through
 * @google-cloud/storage. The size is checked on the metadata of that generation before a byte is
 * downloaded; the download is cut off past the limit anyway (a gzip-encoded object is decompressed,
 * so its stored size says little). One deadline covers both requests.
 */

export interface GcsReaderOptions {
  /** A client built by {@link createStorageClient} (no retries inside the library). */
  storage: Storage;
  /** Deadline of one read, metadata and download together. */
  timeoutMs?: number;
}

interface ClientError {
  code?: number | string;
  message?: string;
}

/** Maps a Cloud Storage error to docline's errors. */
export function gcsError(error: unknown, ref: ObjectRef): Error {
  if (error instanceof RejectionError || error instanceof TransientError) return error;
  const e = (error ?? {}) as ClientError;
  const where = `gs://${ref.bucket}/${ref.name}#${ref.generation}`;
  const detail = (e.message ?? String(error)).split('\n')[0]!.slice(0, 300);
  const options = { cause: error };
  const status = typeof e.code === 'number' ? e.code : undefined;
  const refused = `reading ${where} was refused (${status}): ${detail}`;
  if (status === 404 || status === 410) {
    // Without versioning, an overwritten or deleted generation is gone for good.
    return new RejectionError('object_gone', `${where} no longer exists`, options);
  }
  if (status === 401 || status === 403) {
    // A missing grant is fixed by an operator; Pub/Sub retries until then, then dead-letters.
    return new TransientError('gcs_forbidden', refused, options);
  }
  if (e.code === 'CONTENT_DOWNLOAD_MISMATCH') {
    return new TransientError(
      'gcs_corrupt_download',
      `the download of ${where} failed its checksum`,
      options,
    );
  }
  if (status === undefined || status === 408 || status === 429 || status >= 500) {
    return new TransientError('gcs_unavailable', `reading ${where} failed: ${detail}`, options);
  }
  return new ConfigurationError('gcs_request_refused', refused, options);
}

/** {@link Reader} on Cloud Storage. */
export class GcsReader implements Reader {
  private readonly storage: Storage;
  private readonly timeoutMs: number;

  constructor(options: GcsReaderOptions) {
    this.storage = options.storage;
    this.timeoutMs = options.timeoutMs ?? DELIVERY_DEFAULTS.readTimeoutMs;
  }

  async read(ref: ObjectRef, maxBytes: number): Promise<Buffer> {
    const file = this.storage.bucket(ref.bucket).file(ref.name, { generation: ref.generation });
    // The library turns a generation into a Number; keep the exact decimal string instead
    // (generations are 64-bit, and the request must name exactly the one notified).
    (file as unknown as { generation: string }).generation = ref.generation;

    let stream: Readable | undefined;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        stream?.destroy();
        reject(
          new TransientError(
            'gcs_timeout',
            `reading gs://${ref.bucket}/${ref.name}#${ref.generation} took over ${this.timeoutMs} ms`,
          ),
        );
      }, this.timeoutMs);
    });
    const work = async (): Promise<Buffer> => {
      const [metadata] = await file.getMetadata({ generation: ref.generation });
      const size = Number(metadata.size);
      if (Number.isFinite(size) && size > maxBytes) {
        throw new RejectionError('too_large', `the object has ${size} bytes, over the limit of ${maxBytes}`);
      }
      stream = file.createReadStream({ validation: 'crc32c' });
      return await collect(stream, maxBytes);
    };
    try {
      return await Promise.race([work(), deadline]);
    } catch (error) {
      throw gcsError(error, ref);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Reads a stream into one buffer, stopping past `maxBytes`. */
async function collect(stream: Readable, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream) {
    const buffer = chunk as Buffer;
    total += buffer.length;
    if (total > maxBytes) {
      stream.destroy();
      throw new RejectionError('too_large', `the object has over ${maxBytes} bytes`);
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

/**
 * A Storage client for the worker: no retries inside the library (Pub/Sub retries the delivery
 * with backoff) and a per-request timeout.
 */
export function createStorageClient(options: StorageOptions & { timeoutMs?: number } = {}): Storage {
  const { timeoutMs, ...rest } = options;
  return new Storage({
    ...rest,
    retryOptions: { autoRetry: false, ...rest.retryOptions },
    ...(timeoutMs ? { timeout: timeoutMs } : {}),
  });
}
