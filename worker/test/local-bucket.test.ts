import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CRC32C } from '@google-cloud/storage';
import { crc32c, LocalBucket, LocalBucketReader } from '../src/adapters/local-bucket';

describe('LocalBucket and LocalBucketReader', () => {
  let root: string;
  let bucket: LocalBucket;
  let reader: LocalBucketReader;
  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), 'docline-bucket-'));
    bucket = new LocalBucket(path.join(root, 'bucket'));
    reader = new LocalBucketReader(bucket);
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('stores each write as a new, increasing generation with a Cloud Storage object resource', async () => {
    const now = new Date('2026-11-30T00:00:00.000Z');
    const first = await bucket.put('inbox', 'a.txt', Buffer.from('one'), 'text/plain', now);
    const second = await bucket.put('inbox', 'a.txt', Buffer.from('two'), 'text/plain', now);
    expect(first.resource).toMatchObject({
      name: 'a.txt',
      bucket: 'inbox',
      size: '3',
      contentType: 'text/plain',
    });
    expect(first.resource.generation).toBe(String(BigInt(now.getTime()) * 1000n));
    expect(BigInt(second.resource.generation)).toBeGreaterThan(BigInt(first.resource.generation));
    expect(second.overwroteGeneration).toBe(first.resource.generation);
    expect(first.resource.md5Hash).toBe('+XxdKZQb+xsv2rCHSQargg=='); // printf one | md5sum, base64;
  });

  it('reads exactly the requested generation; a replaced generation is gone', async () => {
    const first = await bucket.put('inbox', 'a.txt', Buffer.from('one'), 'text/plain');
    const second = await bucket.put('inbox', 'a.txt', Buffer.from('two'), 'text/plain');
    const ref = { bucket: 'inbox', name: 'a.txt' };
    expect((await reader.read({ ...ref, generation: second.resource.generation }, 100)).toString()).toBe(
      'two',
    );
    await expect(reader.read({ ...ref, generation: first.resource.generation }, 100)).rejects.toMatchObject({
      code: 'object_gone',
    });
  });

  it('refuses to read more than the byte limit', async () => {
    const { resource } = await bucket.put('inbox', 'big.txt', Buffer.alloc(50, 'a'), 'text/plain');
    await expect(
      reader.read({ bucket: 'inbox', name: 'big.txt', generation: resource.generation }, 10),
    ).rejects.toMatchObject({
      code: 'too_large',
    });
  });

  it('keeps every object inside its root, whatever the name', async () => {
    await expect(bucket.put('inbox', '../../escape.txt', Buffer.from('x'), 'text/plain')).rejects.toThrow(
      '..',
    );
    await bucket.put('inbox', 'deep/é/ü ok.txt', Buffer.from('x'), 'text/plain');
    expect(readdirSync(root)).toEqual(['bucket']);
    for (const generation of ['../../../etc/passwd', '1/../../2']) {
      await expect(reader.read({ bucket: 'inbox', name: 'a.txt', generation }, 10)).rejects.toMatchObject({
        code: 'object_gone',
      });
    }
    await expect(reader.read({ bucket: '../x', name: 'a', generation: '1' }, 10)).rejects.toMatchObject({
      code: 'object_gone',
    });
  });

  it('writes crc32c exactly as Cloud Storage computes it', () => {
    for (const text of ['', 'hello 1\n', 'é'.repeat(1000), 'x'.repeat(100_000)]) {
      const expected = new CRC32C();
      expected.update(Buffer.from(text));
      expect(crc32c(Buffer.from(text))).toBe(expected.toString());
    }
  });
});
