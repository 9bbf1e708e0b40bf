import type { Storage } from '@google-cloud/storage';
import type { SimClock } from '../time';
import { type Latency, latencyFrom } from './latency';

/**
 * A Cloud Storage bucket as the worker's `GcsMemoStore` uses it (`bucket(b).file(n).save()` with
 * `ifGenerationMatch` and custom metadata, `download()`, `getMetadata()`, `exists()`), so the real
 * memo adapter runs on it unchanged. A call the adapter makes that this model lacks throws, and the memo
 * takes any failed read for "cannot tell" (every delivery then asks BigQuery first): the test beside
 * the sweep's models runs each of the adapter's calls on it. What it holds to:
 *
 * - a read takes ~30 ms and a write ~60 ms (log-normal, with a tail): assumed, not documented;
 * - a write with `ifGenerationMatch` answers 412 unless the object's generation is that one (0: it
 *   does not exist) (documented precondition behaviour); after a write, the client's
 *   `file.metadata` holds the new generation and the custom metadata;
 * - **one write per second per object name** (documented: "up to once per second" to the same
 *   object); a write sooner than that answers 429, whether or not it would have succeeded;
 * - a missing object answers 404; `exists()` and `getMetadata()` are metadata reads;
 * - every call is counted as the operation class it bills (writes class A, reads class B).
 */
export class SimBucketStore {
  readonly objects = new Map<string, Buffer>();
  /** Each object's generation (it grows with every write, as Cloud Storage's do) and custom metadata. */
  private readonly meta = new Map<string, { generation: number; metadata: Record<string, string> }>();
  private nextGeneration = 1;
  classA = 0;
  classB = 0;
  /** Writes refused by the per-object limit (429). */
  refusedObjectRate = 0;
  private readonly lastWriteMs = new Map<string, number>();
  private readonly readLatency: Latency;
  private readonly writeLatency: Latency;

  constructor(
    private readonly time: SimClock,
    seed: number,
    /** Writes allowed per object per second (documented: 1). */
    private readonly writesPerObjectPerSecond = 1,
  ) {
    this.readLatency = latencyFrom(
      { name: 'gcs read', medianMs: 30, sigma: 0.4, tailShare: 0.01, tailFactor: 20 },
      seed,
    );
    this.writeLatency = latencyFrom(
      { name: 'gcs write', medianMs: 60, sigma: 0.4, tailShare: 0.01, tailFactor: 20 },
      seed + 1,
    );
  }

  /** A stand-in for `@google-cloud/storage`'s `Storage`, enough for `GcsMemoStore`. */
  storage(): Storage {
    const file = (bucket: string, name: string) => {
      const path = `${bucket}/${name}`;
      const handle = {
        metadata: {} as { generation?: string; metadata?: Record<string, string> },
        save: async (
          data: string | Buffer,
          options?: {
            metadata?: { metadata?: Record<string, string> };
            preconditionOpts?: { ifGenerationMatch?: number };
          },
        ) => {
          handle.metadata = await this.write(
            path,
            Buffer.from(data),
            options?.metadata?.metadata ?? {},
            options?.preconditionOpts?.ifGenerationMatch,
          );
        },
        download: () => this.read(path),
        getMetadata: () => this.metadataOf(path),
        exists: () => this.exists(path),
      };
      return handle;
    };
    return {
      bucket: (bucket: string) => ({ file: (name: string) => file(bucket, name) }),
    } as unknown as Storage;
  }

  private async write(
    path: string,
    data: Buffer,
    metadata: Record<string, string>,
    ifGenerationMatch: number | undefined,
  ): Promise<{ generation: string; metadata: Record<string, string> }> {
    this.classA++;
    const now = this.time.nowMs();
    const last = this.lastWriteMs.get(path);
    this.lastWriteMs.set(path, now);
    await this.time.sleep(this.writeLatency());
    if (last !== undefined && now - last < 1_000 / this.writesPerObjectPerSecond) {
      this.refusedObjectRate++;
      throw Object.assign(new Error('The object exceeded the rate limits for object mutation operations.'), {
        code: 429,
      });
    }
    if (ifGenerationMatch !== undefined && (this.meta.get(path)?.generation ?? 0) !== ifGenerationMatch) {
      throw Object.assign(new Error('At least one of the pre-conditions you specified did not hold.'), {
        code: 412,
      });
    }
    const generation = this.nextGeneration++;
    this.objects.set(path, data);
    this.meta.set(path, { generation, metadata: { ...metadata } });
    return { generation: String(generation), metadata: { ...metadata } };
  }

  /** `file.getMetadata()`: one metadata read (class B): the generation and custom metadata. */
  private async metadataOf(
    path: string,
  ): Promise<[{ generation: string; metadata: Record<string, string> }]> {
    this.classB++;
    await this.time.sleep(this.readLatency());
    const m = this.meta.get(path);
    if (!m) throw Object.assign(new Error('No such object.'), { code: 404 });
    return [{ generation: String(m.generation), metadata: { ...m.metadata } }];
  }

  /** `file.exists()`: one metadata read (class B), a read's latency. */
  private async exists(path: string): Promise<[boolean]> {
    this.classB++;
    await this.time.sleep(this.readLatency());
    return [this.objects.has(path)];
  }

  private async read(path: string): Promise<[Buffer]> {
    this.classB++;
    await this.time.sleep(this.readLatency());
    const bytes = this.objects.get(path);
    if (!bytes) throw Object.assign(new Error('No such object.'), { code: 404 });
    return [bytes];
  }
}
