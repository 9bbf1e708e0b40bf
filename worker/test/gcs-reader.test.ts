import { Storage } from '@google-cloud/storage';
import { createStorageClient, GcsReader, gcsError } from '../src/adapters/readers/gcs-reader';
import { ConfigurationError, RejectionError, TransientError } from '../src/core/errors';
import { type FakeGcs, startFakeGcs } from './support/fake-gcs';

/*
 * GcsReader runs through @google-cloud/storage against fake-gcs, a local server with the JSON API's
 * request and response shapes. Not covered: gzip transcoding (decompressive reads), requester-pays
 * buckets, and the real service's error texts beyond the documented bodies.
 */

const BUCKET = 'acme-invoices-dev';
const TEXT = Buffer.from('FACTURE N° 2026-0042\nTotal TTC : 1 234,56 €\n');

describe('GcsReader', () => {
  let fake: FakeGcs;
  let reader: GcsReader;

  beforeEach(async () => {
    fake = await startFakeGcs();
    const storage = createStorageClient({ apiEndpoint: fake.url, projectId: 'acme-dev' });
    reader = new GcsReader({ storage, timeoutMs: 2_000 });
  });
  afterEach(() => fake.stop());

  const mediaRequests = () => fake.requests.filter((r) => r.query.alt === 'media');
  const metadataRequests = () => fake.requests.filter((r) => r.query.alt !== 'media');
  /** What reading `name` at `generation`, up to 1 KiB, fails with. */
  const readError = (name: string, generation: string, from = reader) =>
    from.read({ bucket: BUCKET, name, generation }, 1024).catch((e: unknown) => e);

  it('reads the bytes of exactly the notified generation', async () => {
    const name = '2026/11/facture 0042 (copie).txt';
    const first = fake.putObject(BUCKET, name, TEXT, { contentType: 'text/plain' });
    fake.putObject(BUCKET, name, Buffer.from('a newer generation'), { contentType: 'text/plain' });
    const bytes = await reader.read({ bucket: BUCKET, name, generation: first }, 1024);
    expect(bytes.equals(TEXT)).toBe(true);
  });

  it('names the generation on the metadata call and on the download', async () => {
    const name = 'a/b/c.txt';
    const generation = fake.putObject(BUCKET, name, TEXT);
    await reader.read({ bucket: BUCKET, name, generation }, 1024);
    expect(fake.requests.map((r) => [r.path, r.query.generation, r.query.alt ?? null])).toEqual([
      [`/storage/v1/b/${BUCKET}/o/${encodeURIComponent(name)}`, generation, null],
      [`/storage/v1/b/${BUCKET}/o/${encodeURIComponent(name)}`, generation, 'media'],
    ]);
  });

  it('keeps generations beyond 2^53 exact (the library would round them as numbers)', async () => {
    const generation = '9223372036854775807';
    fake.putObject(BUCKET, 'big.txt', TEXT, { generation });
    const bytes = await reader.read({ bucket: BUCKET, name: 'big.txt', generation }, 1024);
    expect(bytes.equals(TEXT)).toBe(true);
    expect(fake.requests.map((r) => r.query.generation)).toEqual([generation, generation]);
  });

  it('rejects an object over the limit from its metadata, before downloading a byte, and reads one of exactly the limit', async () => {
    const generation = fake.putObject(BUCKET, 'big.pdf', Buffer.alloc(2048, 1));
    const error = await readError('big.pdf', generation);
    expect(error).toBeInstanceOf(RejectionError);
    expect((error as RejectionError).code).toBe('too_large');
    expect(mediaRequests()).toHaveLength(0);
    await expect(reader.read({ bucket: BUCKET, name: 'big.pdf', generation }, 2048)).resolves.toHaveLength(
      2048,
    );
  });

  it('rejects a generation that is gone as object_gone (permanent)', async () => {
    const generation = fake.putObject(BUCKET, 'gone.txt', TEXT);
    fake.deleteGeneration(BUCKET, 'gone.txt', generation);
    const error = await readError('gone.txt', generation);
    expect(error).toBeInstanceOf(RejectionError);
    expect((error as RejectionError).code).toBe('object_gone');
  });

  it('rejects as object_gone when the generation disappears between the metadata call and the download', async () => {
    const generation = fake.putObject(BUCKET, 'race.txt', TEXT);
    fake.failNext(1, 404, 'media');
    const error = await readError('race.txt', generation);
    expect(error).toBeInstanceOf(RejectionError);
    expect((error as RejectionError).code).toBe('object_gone');
    expect(mediaRequests()).toHaveLength(1);
  });

  it.each([
    [401, 'gcs_forbidden'],
    [403, 'gcs_forbidden'],
    [429, 'gcs_unavailable'],
    [500, 'gcs_unavailable'],
    [502, 'gcs_unavailable'],
    [503, 'gcs_unavailable'],
  ] as const)('treats a %i on the metadata call as transient (%s), in one request', async (status, code) => {
    const generation = fake.putObject(BUCKET, 'x.txt', TEXT);
    fake.failNext(1, status);
    const error = await readError('x.txt', generation);
    expect(error).toBeInstanceOf(TransientError);
    expect((error as TransientError).code).toBe(code);
    expect(fake.requests).toHaveLength(1); // no retry inside the library: Pub/Sub retries
  });

  it.each([403, 503] as const)('treats a %i on the download as transient', async (status) => {
    const generation = fake.putObject(BUCKET, 'x.txt', TEXT);
    fake.failNext(1, status, 'media');
    const error = await readError('x.txt', generation);
    expect(error).toBeInstanceOf(TransientError);
    expect(metadataRequests()).toHaveLength(1);
    expect(mediaRequests()).toHaveLength(1);
  });

  it('treats a download that fails its checksum as transient', async () => {
    const generation = fake.putObject(BUCKET, 'x.txt', TEXT);
    fake.corruptNextDownload();
    const error = await readError('x.txt', generation);
    expect(error).toBeInstanceOf(TransientError);
    expect((error as TransientError).code).toBe('gcs_corrupt_download');
  });

  it('gives up after its deadline when Cloud Storage does not answer', async () => {
    const generation = fake.putObject(BUCKET, 'slow.txt', TEXT);
    const storage = createStorageClient({ apiEndpoint: fake.url, projectId: 'acme-dev' });
    const impatient = new GcsReader({ storage, timeoutMs: 200 });
    fake.stallNext(1);
    const error = await readError('slow.txt', generation, impatient);
    expect(error).toBeInstanceOf(TransientError);
    expect((error as TransientError).code).toBe('gcs_timeout');
  });

  it('treats an unreachable Cloud Storage as transient', async () => {
    await fake.stop();
    const error = await readError('x.txt', '1');
    expect(error).toBeInstanceOf(TransientError);
    fake = await startFakeGcs();
  });

  it('refers any other refusal to an operator (ConfigurationError)', () => {
    // A 400 cannot come from a valid request: it is our bug or our configuration, not the document's.
    const error = gcsError(
      { code: 400, message: 'Invalid argument' },
      { bucket: 'b', name: 'n', generation: '1' },
    );
    expect(error).toBeInstanceOf(ConfigurationError);
  });

  it('is built from a plain Storage client too', async () => {
    const generation = fake.putObject(BUCKET, 'plain.txt', TEXT);
    const plain = new GcsReader({
      storage: new Storage({
        apiEndpoint: fake.url,
        projectId: 'acme-dev',
        retryOptions: { autoRetry: false },
      }),
    });
    await expect(plain.read({ bucket: BUCKET, name: 'plain.txt', generation }, 1024)).resolves.toEqual(TEXT);
  });
});
