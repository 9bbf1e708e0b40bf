import type { Storage } from '@google-cloud/storage';
import type { SimClock } from '../time';
import { type Latency, latencyFrom } from './latency';

/** One object: its bytes, custom metadata, generation, and when its name was first written. */
interface StoredObject {
  bytes: Buffer;
  metadata: Record<string, string>;
  generation: number;
  createdMs: number;
}

/** The calls of a bucket the worker's `GcsMemoStore` makes. */
export type BucketCall = 'save' | 'download' | 'getMetadata' | 'exists';

/**
 * One call to the bucket as a model runs it: its latency and faults around the act, which it runs
 * with the time the call counts at for the per-object write rate.
 */
export type CallAround = <T>(operation: BucketCall, name: string, act: (atMs: number) => T) => Promise<T>;

/**
 * The objects of a Cloud Storage bucket as the worker's `GcsMemoStore` uses them
 * (`bucket(b).file(n).save()` with `ifGenerationMatch` and custom metadata, `download()`,
 * `getMetadata()`, `exists()`), so the real memo adapter runs on it unchanged; the fault
 * simulator's memo bucket and the sweep's both hold their objects here. What it holds to:
 *
 * - a write with `ifGenerationMatch` answers 412 unless the object's generation is that one (0: it
 *   does not exist) (documented precondition behaviour); every write gives the object a new
 *   generation, which the client's `file.metadata` holds after it, with the custom metadata;
 * - **one write per second per object name** (documented: "up to once per second" to the same
 *   object); a write sooner than that answers 429, whether or not it would have succeeded;
 * - a missing object answers 404; `exists()` and `getMetadata()` are metadata reads.
 *
 * A call the adapter makes that this model lacks throws, and the memo takes any failed read for
 * "cannot tell": the test beside the sweep's models runs each of the adapter's calls on it.
 */
export class BucketObjects {
  readonly objects = new Map<string, StoredObject>();
  private readonly lastWriteMs = new Map<string, number>();
  private nextGeneration = 1;

  constructor(
    /** Told of each write the bucket refuses, before it throws. */
    private readonly refused: {
      rateLimited?(name: string): void;
      preconditionFailed?(name: string): void;
    } = {},
    /** Writes allowed per object per second (documented: 1). */
    private readonly writesPerObjectPerSecond = 1,
  ) {}

  /** A stand-in for `@google-cloud/storage`'s `Storage` whose every call goes through `around`. */
  storage(around: CallAround): Storage {
    const file = (name: string) => {
      const handle = {
        metadata: {} as { generation?: string; metadata?: Record<string, string> },
        save: async (
          data: string | Buffer,
          options?: {
            metadata?: { metadata?: Record<string, string> };
            preconditionOpts?: { ifGenerationMatch?: number };
          },
        ) => {
          handle.metadata = await around('save', name, (atMs) =>
            this.write(
              name,
              Buffer.from(data),
              options?.metadata?.metadata ?? {},
              options?.preconditionOpts?.ifGenerationMatch,
              atMs,
            ),
          );
        },
        download: () => around('download', name, () => this.read(name)),
        getMetadata: () => around('getMetadata', name, () => [this.metadataOf(name)]),
        exists: () => around('exists', name, (): [boolean] => [this.objects.has(name)]),
      };
      return handle;
    };
    return {
      bucket: (bucket: string) => ({ file: (name: string) => file(`${bucket}/${name}`) }),
    } as unknown as Storage;
  }

  /** The object `name` of bucket `bucket`, as the bucket holds it now. */
  object(bucket: string, name: string): StoredObject | undefined {
    return this.objects.get(`${bucket}/${name}`);
  }

  private write(
    path: string,
    bytes: Buffer,
    metadata: Record<string, string>,
    ifGenerationMatch: number | undefined,
    atMs: number,
  ): { generation: string; metadata: Record<string, string> } {
    const last = this.lastWriteMs.get(path);
    this.lastWriteMs.set(path, atMs);
    if (last !== undefined && atMs - last < 1_000 / this.writesPerObjectPerSecond) {
      this.refused.rateLimited?.(path);
      throw Object.assign(new Error('The object exceeded the rate limits for object mutation operations.'), {
        code: 429,
      });
    }
    const existing = this.objects.get(path);
    if (ifGenerationMatch !== undefined && (existing?.generation ?? 0) !== ifGenerationMatch) {
      this.refused.preconditionFailed?.(path);
      throw Object.assign(new Error('At least one of the pre-conditions you specified did not hold.'), {
        code: 412,
      });
    }
    const generation = this.nextGeneration++;
    this.objects.set(path, {
      bytes,
      metadata: { ...metadata },
      generation,
      createdMs: existing?.createdMs ?? atMs,
    });
    return { generation: String(generation), metadata: { ...metadata } };
  }

  private read(path: string): [Buffer] {
    const o = this.objects.get(path);
    if (!o) throw Object.assign(new Error('No such object.'), { code: 404 });
    return [o.bytes];
  }

  private metadataOf(path: string): { generation: string; metadata: Record<string, string> } {
    const o = this.objects.get(path);
    if (!o) throw Object.assign(new Error('No such object.'), { code: 404 });
    return { generation: String(o.generation), metadata: { ...o.metadata } };
  }
}

/**
 * The sweep's memo bucket: {@link BucketObjects} with each call's latency (a read ~30 ms, a write
 * ~60 ms, log-normal with a tail: assumed, not documented), every call counted as the operation
 * class it bills (writes class A, reads class B). A write counts for the per-object rate when it is
 * sent.
 */
export class SimBucketStore {
  classA = 0;
  classB = 0;
  /** Writes refused by the per-object limit (429). */
  refusedObjectRate = 0;
  private readonly bucket: BucketObjects;
  private readonly readLatency: Latency;
  private readonly writeLatency: Latency;

  constructor(
    private readonly time: SimClock,
    seed: number,
    /** Writes allowed per object per second (documented: 1). */
    writesPerObjectPerSecond = 1,
  ) {
    this.bucket = new BucketObjects(
      { rateLimited: () => this.refusedObjectRate++ },
      writesPerObjectPerSecond,
    );
    this.readLatency = latencyFrom(
      { name: 'gcs read', medianMs: 30, sigma: 0.4, tailShare: 0.01, tailFactor: 20 },
      seed,
    );
    this.writeLatency = latencyFrom(
      { name: 'gcs write', medianMs: 60, sigma: 0.4, tailShare: 0.01, tailFactor: 20 },
      seed + 1,
    );
  }

  /** The bucket's objects, by `bucket/name`. */
  get objects(): ReadonlyMap<string, { bytes: Buffer }> {
    return this.bucket.objects;
  }

  /** A stand-in for `@google-cloud/storage`'s `Storage`, enough for `GcsMemoStore`. */
  storage(): Storage {
    return this.bucket.storage(async (operation, _name, act) => {
      const write = operation === 'save';
      if (write) this.classA++;
      else this.classB++;
      const sentMs = this.time.nowMs();
      await this.time.sleep(write ? this.writeLatency() : this.readLatency());
      return act(sentMs);
    });
  }
}
