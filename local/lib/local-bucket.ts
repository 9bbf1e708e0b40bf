import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import {
  isGeneration,
  localGenerationPath,
  localObjectDir,
} from '../../worker/src/adapters/readers/local-bucket';
import { objectNameProblem } from '../../worker/src/core/event';
import type { ObjectRef } from '../../worker/src/core/ports';
import type { ObjectResource as NotifiedObjectResource } from '../../worker/src/reconcile/notification';

/**
 * A Cloud Storage simulator for the local tools: a bucket on the local disk that behaves like a
 * Cloud Storage bucket without object versioning. Every write is a new generation, and a replaced
 * generation is gone (the worker's LocalBucketReader answers `object_gone`). The folder layout is
 * the reader's (worker/src/adapters/readers/local-bucket.ts), so what this writes is what the worker reads.
 */

/** The JSON_API_V1 object resource, as Cloud Storage puts it in a notification's data. */
export interface ObjectResource extends NotifiedObjectResource {
  kind: 'storage#object';
  id: string;
  selfLink: string;
  mediaLink: string;
  name: string;
  bucket: string;
  generation: string;
  metageneration: string;
  contentType: string;
  timeCreated: string;
  updated: string;
  storageClass: string;
  timeStorageClassUpdated: string;
  size: string;
  md5Hash: string;
  crc32c: string;
  etag: string;
}

export interface PutResult {
  resource: ObjectResource;
  /** The live generation this write replaced, if any. */
  overwroteGeneration: string | null;
}

const CRC32C_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

/**
 * CRC32C (Castagnoli) of the bytes, base64 of the big-endian value, as Cloud Storage puts it in the
 * object resource. Computed here so that local runs never load the Google client libraries.
 */
export function crc32c(bytes: Buffer): string {
  let crc = 0xffffffff;
  for (const b of bytes) crc = CRC32C_TABLE[(crc ^ b) & 0xff]! ^ (crc >>> 8);
  const out = Buffer.alloc(4);
  out.writeUInt32BE((crc ^ 0xffffffff) >>> 0);
  return out.toString('base64');
}

/** The newest generation stored in an object's folder, or null (no folder, no generation). */
function liveGenerationIn(dir: string): string | null {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return null;
  }
  const generations = entries.filter(isGeneration).map((e) => BigInt(e));
  generations.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return generations.at(-1)?.toString() ?? null;
}

export class LocalBucket {
  private lastGeneration = 0n;

  /** @param root the folder that holds every local bucket. */
  constructor(readonly root: string) {}

  private objectDir(bucket: string, name: string): string {
    return localObjectDir(this.root, bucket, name);
  }

  /** Generations are microseconds since the epoch, strictly increasing, like Cloud Storage's. */
  private nextGeneration(now: Date): string {
    const micros = BigInt(now.getTime()) * 1000n;
    this.lastGeneration = micros > this.lastGeneration ? micros : this.lastGeneration + 1n;
    return this.lastGeneration.toString();
  }

  /**
   * Stores bytes as a new generation of `name` and returns its object resource. Its file calls are
   * synchronous, like the SQLite store's in the same data folder: for small files on a local disk
   * they cost a third of the CPU of promise-based ones, which a drop of thousands of files feels.
   */
  async put(
    bucket: string,
    name: string,
    bytes: Buffer,
    contentType: string,
    now = new Date(),
  ): Promise<PutResult> {
    const problem = objectNameProblem(name);
    if (problem) throw new Error(`cannot store "${name}": ${problem}`);
    const dir = this.objectDir(bucket, name);
    // A folder made just now holds no generation: a new object (most uploads) skips the listing.
    const created = mkdirSync(dir, { recursive: true });
    const previous = created === undefined ? liveGenerationIn(dir) : null;
    let generation = this.nextGeneration(now);
    if (previous && BigInt(previous) >= BigInt(generation)) {
      this.lastGeneration = BigInt(previous) + 1n;
      generation = this.lastGeneration.toString();
    }
    const md5Hash = createHash('md5').update(bytes).digest('base64');
    const checksum = crc32c(bytes);
    const time = now.toISOString();
    const encoded = encodeURIComponent(name);
    const resource: ObjectResource = {
      kind: 'storage#object',
      id: `${bucket}/${name}/${generation}`,
      selfLink: `https://www.googleapis.com/storage/v1/b/${bucket}/o/${encoded}`,
      mediaLink: `https://storage.googleapis.com/download/storage/v1/b/${bucket}/o/${encoded}?generation=${generation}&alt=media`,
      name,
      bucket,
      generation,
      metageneration: '1',
      contentType,
      timeCreated: time,
      updated: time,
      storageClass: 'STANDARD',
      timeStorageClassUpdated: time,
      size: String(bytes.length),
      md5Hash,
      crc32c: checksum,
      etag: Buffer.from(`${generation}/1`).toString('base64'),
    };
    // Write then rename: a reader never sees half a generation.
    const file = path.join(dir, generation);
    writeFileSync(`${file}.tmp`, bytes);
    writeFileSync(`${file}.json`, JSON.stringify(resource));
    renameSync(`${file}.tmp`, file);
    // No versioning: the replaced generation is gone.
    if (previous) {
      const replaced = path.join(dir, previous);
      rmSync(replaced, { force: true });
      rmSync(`${replaced}.json`, { force: true });
    }
    return { resource, overwroteGeneration: previous };
  }

  /** The live generation of `name`, or null. */
  async liveGeneration(bucket: string, name: string): Promise<string | null> {
    return liveGenerationIn(this.objectDir(bucket, name));
  }

  async deleteGeneration(bucket: string, name: string, generation: string): Promise<void> {
    const file = path.join(this.objectDir(bucket, name), generation);
    await rm(file, { force: true });
    await rm(`${file}.json`, { force: true });
  }

  /** The object resource of one generation, or null when it does not exist. */
  async metadata(ref: ObjectRef): Promise<ObjectResource | null> {
    if (!isGeneration(ref.generation)) return null;
    try {
      return JSON.parse(await readFile(`${localGenerationPath(this.root, ref)}.json`, 'utf8'));
    } catch {
      return null;
    }
  }
}
