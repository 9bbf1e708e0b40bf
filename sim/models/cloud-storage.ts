import type { Storage } from '@google-cloud/storage';
import type { SimClock } from '../time';
import { type Latency, latencyFrom } from './latency';

/**
 * A Cloud Storage bucket as the worker's `GcsMemoStore` uses it (`bucket(b).file(n).save()` with
 * `ifGenerationMatch: 0`, `download()`, `exists()` and `getFiles({ prefix })`), so the real memo
 * adapter runs on it unchanged. A call the adapter makes that this model lacks throws, and the memo
 * takes any failed read for "cannot tell" (every delivery then asks BigQuery first): the test beside
 * the sweep's models runs each of the adapter's calls on it. What it holds to:
 *
 * - a read takes ~30 ms and a write ~60 ms (log-normal, with a tail): assumed, not documented;
 * - create-only writes answer 412 when the object exists (documented precondition behaviour);
 * - **one write per second per object name** (documented: "up to once per second" to the same
 *   object); a write sooner than that answers 429, whether or not it would have succeeded;
 * - a missing object answers 404; `exists()` answers whether it is there (a metadata read);
 * - a listing (`getFiles({ prefix })`, strongly consistent) gives each object's name and generation,
 *   and takes a read's latency (assumed);
 * - every call is counted as the operation class it bills (writes and listings class A, reads
 *   class B).
 */
export class SimBucketStore {
  readonly objects = new Map<string, Buffer>();
  /** Each object's generation: it grows with every write, as Cloud Storage's do. */
  private readonly generations = new Map<string, number>();
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
      return {
        save: (data: string | Buffer, options?: { preconditionOpts?: { ifGenerationMatch?: number } }) =>
          this.write(path, Buffer.from(data), options?.preconditionOpts?.ifGenerationMatch === 0),
        download: () => this.read(path),
        exists: () => this.exists(path),
      };
    };
    return {
      bucket: (bucket: string) => ({
        file: (name: string) => file(bucket, name),
        getFiles: (query?: { prefix?: string }) => this.list(bucket, query?.prefix ?? ''),
      }),
    } as unknown as Storage;
  }

  private async list(
    bucket: string,
    prefix: string,
  ): Promise<[Array<{ name: string; metadata: { generation: string } }>]> {
    this.classA++;
    await this.time.sleep(this.readLatency());
    const within = `${bucket}/${prefix}`;
    const files = [...this.generations]
      .filter(([path]) => path.startsWith(within))
      .map(([path, generation]) => ({
        name: path.slice(bucket.length + 1),
        metadata: { generation: String(generation) },
      }));
    return [files];
  }

  private async write(path: string, data: Buffer, createOnly: boolean): Promise<void> {
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
    if (createOnly && this.objects.has(path)) {
      throw Object.assign(new Error('At least one of the pre-conditions you specified did not hold.'), {
        code: 412,
      });
    }
    this.objects.set(path, data);
    this.generations.set(path, this.nextGeneration++);
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
