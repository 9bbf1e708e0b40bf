import type { Storage } from '@google-cloud/storage';
import { createStorageClient, GcsReader } from '../../src/adapters/readers/gcs-reader';
import { ConfigurationError, RejectionError } from '../../src/core/errors';
import type { ObjectRef } from '../../src/core/ports';
import { type FakeGcsServer, startFakeGcsServer } from './support/fake-gcs-server';
import { toolVersion } from './support/tool-process';

/*
 * GcsReader against fake-gcs-server (fsouza, an independent implementation of the Cloud Storage
 * JSON API), through the same @google-cloud/storage client the worker builds. The fake-gcs tests
 * (worker/test/gcs-reader.test.ts) check the requests themselves; here only outcomes can be
 * checked, because fake-gcs-server does not expose the requests it received. So "too_large before
 * a byte is downloaded" is checked by its outcome only.
 *
 * fake-gcs-server differences that matter here: generations are microseconds since the epoch, as in
 * Cloud Storage; a bucket without versioning answers 404 for a replaced generation, as Cloud
 * Storage does; no gzip transcoding, no requester-pays, no IAM (so no 403 path).
 */

const BUCKET = 'docline-emulated';
const VERSIONED = 'docline-versioned';
const TEXT = Buffer.from('FACTURE N° 2026-0042\nTotal TTC : 1 234,56 €\n');

describe(`GcsReader on fake-gcs-server ${toolVersion('fake-gcs-server')}`, () => {
  let server: FakeGcsServer;
  let storage: Storage;
  let reader: GcsReader;

  beforeAll(async () => {
    server = await startFakeGcsServer();
    await server.createBucket(BUCKET);
    await server.createBucket(VERSIONED, { versioning: true });
    // The worker's own client factory: no retries in the library, a request timeout.
    storage = createStorageClient({ apiEndpoint: server.url, projectId: 'docline-emu', timeoutMs: 5_000 });
    reader = new GcsReader({ storage, timeoutMs: 5_000 });
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
  });

  /** Uploads as a client would and returns the generation Cloud Storage assigned. */
  async function upload(bucket: string, name: string, bytes: Buffer): Promise<ObjectRef> {
    const file = storage.bucket(bucket).file(name);
    await file.save(bytes, { contentType: 'text/plain', resumable: false });
    const [metadata] = await file.getMetadata();
    return { bucket, name, generation: String(metadata.generation) };
  }

  it('reads the bytes of the notified generation, whichever generation is live', async () => {
    const name = 'inbox/facture 0042 (copie) é.txt';
    const first = await upload(VERSIONED, name, TEXT);
    const second = await upload(VERSIONED, name, Buffer.from('a newer generation'));
    expect(second.generation).not.toBe(first.generation);
    expect((await reader.read(first, 1024)).equals(TEXT)).toBe(true);
    expect((await reader.read(second, 1024)).toString()).toBe('a newer generation');
  });

  it('reads objects whose names need encoding in a URL (#, ?, %, spaces, accents)', async () => {
    for (const name of ['inbox/a#b?c=d.txt', 'inbox/100% réel.txt', 'inbox/ leading and trailing .txt']) {
      const ref = await upload(BUCKET, name, TEXT);
      expect((await reader.read(ref, 1024)).equals(TEXT)).toBe(true);
    }
  });

  it('rejects a generation replaced in a bucket without versioning as object_gone', async () => {
    const old = await upload(BUCKET, 'inbox/replaced.txt', TEXT);
    const live = await upload(BUCKET, 'inbox/replaced.txt', Buffer.from('replacement'));
    const error = await reader.read(old, 1024).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RejectionError);
    expect(error).toMatchObject({ code: 'object_gone' });
    expect((await reader.read(live, 1024)).toString()).toBe('replacement');
  });

  it('rejects a deleted object and an object that never existed as object_gone', async () => {
    const deleted = await upload(BUCKET, 'inbox/deleted.txt', TEXT);
    await storage.bucket(BUCKET).file(deleted.name).delete();
    for (const ref of [deleted, { bucket: BUCKET, name: 'inbox/never.txt', generation: '1' }]) {
      await expect(reader.read(ref, 1024)).rejects.toMatchObject({ code: 'object_gone' });
    }
  });

  it('rejects an object over the limit as too_large, and reads one exactly at the limit', async () => {
    const ref = await upload(BUCKET, 'inbox/sized.txt', TEXT);
    const error = await reader.read(ref, TEXT.length - 1).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RejectionError);
    expect(error).toMatchObject({ code: 'too_large' });
    expect((error as Error).message).toContain(`${TEXT.length} bytes`);
    expect((await reader.read(ref, TEXT.length)).equals(TEXT)).toBe(true);
  });

  it('treats a refused request (400: a generation that is not a number) as a configuration fault', async () => {
    // The worker validates generations at the edge; this checks the mapping against an independent server.
    const ref = await upload(BUCKET, 'inbox/bad-generation.txt', TEXT);
    const error = await reader.read({ ...ref, generation: 'abc' }, 1024).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error).toMatchObject({ code: 'gcs_request_refused' });
  });
});
