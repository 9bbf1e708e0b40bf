import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CRC32C } from '@google-cloud/storage';
import { crc32c, LocalBucket } from '../lib/local-bucket';

describe('LocalBucket, the Cloud Storage simulator of the local tools', () => {
  let root: string;
  let bucket: LocalBucket;
  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), 'docline-bucket-'));
    bucket = new LocalBucket(path.join(root, 'bucket'));
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

  it('writes crc32c exactly as Cloud Storage computes it', () => {
    for (const text of ['', 'hello 1\n', 'é'.repeat(1000), 'x'.repeat(100_000)]) {
      const expected = new CRC32C();
      expected.update(Buffer.from(text));
      expect(crc32c(Buffer.from(text))).toBe(expected.toString());
    }
  });
});
