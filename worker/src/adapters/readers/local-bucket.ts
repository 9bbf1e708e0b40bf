import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { BUCKET_NAME } from '../../contract/storage';
import { RejectionError, TransientError } from '../../core/errors';
import type { ObjectRef, Reader } from '../../core/ports';

/**
 * The worker's Reader for a bucket on the local disk (`npm start`, the tests). The folder layout is
 * defined here, once: objects live under `<root>/<bucket>/<sha256(name)>/<generation>`, so no object
 * name, however hostile, can reach outside the root. The bucket simulator that writes this layout
 * (generations, object resources) belongs to the local tools: local/lib/local-bucket.ts.
 */

const GENERATION = /^\d+$/;

/** The folder of one object's generations. Throws on a bucket name Cloud Storage would refuse. */
export function localObjectDir(root: string, bucket: string, name: string): string {
  if (!BUCKET_NAME.test(bucket)) throw new Error(`invalid bucket name: ${bucket}`);
  const dir = path.join(root, bucket, createHash('sha256').update(name, 'utf8').digest('hex'));
  // Defence in depth: the hashed layout cannot escape, and this proves it at run time.
  if (!path.resolve(dir).startsWith(path.resolve(root) + path.sep))
    throw new Error('object path escapes the bucket root');
  return dir;
}

/** Whether a folder entry names a generation's bytes (not its `.json` resource or a `.tmp` write). */
export const isGeneration = (entry: string) => GENERATION.test(entry);

/** The path of one generation's bytes; its object resource sits beside it as `<generation>.json`. */
export function localGenerationPath(root: string, ref: ObjectRef): string {
  if (!isGeneration(ref.generation)) throw new Error('invalid generation');
  return path.join(localObjectDir(root, ref.bucket, ref.name), ref.generation);
}

/** Reads exactly one generation from the local bucket folder. */
export class LocalBucketReader implements Reader {
  /** @param root the folder that holds every local bucket (`<DOCLINE_DATA_DIR>/bucket`). */
  constructor(private readonly root: string) {}

  async read(ref: ObjectRef, maxBytes: number): Promise<Buffer> {
    let file: string;
    try {
      file = localGenerationPath(this.root, ref);
    } catch (error) {
      throw new RejectionError(
        'object_gone',
        `gs://${ref.bucket}/${ref.name}#${ref.generation} cannot exist`,
        { cause: error },
      );
    }
    let handle: Awaited<ReturnType<typeof open>>;
    try {
      handle = await open(file, 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        throw new RejectionError(
          'object_gone',
          `generation ${ref.generation} of ${ref.name} no longer exists`,
        );
      }
      throw new TransientError('read_failed', `reading ${ref.name} failed`, { cause: error });
    }
    try {
      const { size } = await handle.stat();
      if (size > maxBytes)
        throw new RejectionError('too_large', `the object has ${size} bytes, over the limit of ${maxBytes}`);
      return await handle.readFile();
    } finally {
      await handle.close();
    }
  }
}
