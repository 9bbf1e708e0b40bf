import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LocalBucket } from '../../local/lib/local-bucket';
import { LocalBucketReader } from '../src/adapters/readers/local-bucket';

/** The worker's reader, over a folder written by the local tools' bucket simulator. */
describe('LocalBucketReader', () => {
  let root: string;
  let bucket: LocalBucket;
  let reader: LocalBucketReader;
  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), 'docline-bucket-'));
    bucket = new LocalBucket(path.join(root, 'bucket'));
    reader = new LocalBucketReader(path.join(root, 'bucket'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

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
});
