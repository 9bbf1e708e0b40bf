import { Storage } from '@google-cloud/storage';
import { GcsObjectLister } from '../../src/reconcile/cloud-sources';
import { objectUri } from '../../src/reconcile/notification';
import { findMissing } from '../../src/reconcile/reconcile';
import { MemoryIndex } from '../support/reconcile-fakes';
import { type FakeGcsServer, startFakeGcsServer } from './support/fake-gcs-server';
import { toolVersion } from './support/tool-process';

/*
 * Reconcile's listing through @google-cloud/storage against fake-gcs-server (an independent
 * implementation of the Cloud Storage JSON API): more than one page of 1,000 objects, the live
 * generation of an overwritten object only, and the resource exactly as the API lists it.
 */

const BUCKET = 'docline-reconcile';
const OBJECTS = 1_003;

describe(`reconcile's listing on fake-gcs-server ${toolVersion('fake-gcs-server')}`, () => {
  let server: FakeGcsServer;
  let storage: Storage;
  const generations = new Map<string, string>();

  beforeAll(async () => {
    server = await startFakeGcsServer();
    await server.createBucket(BUCKET);
    storage = new Storage({ apiEndpoint: server.url, projectId: 'docline-emu' });
    const bucket = storage.bucket(BUCKET);
    const names = Array.from({ length: OBJECTS }, (_, i) => `scans/${String(i).padStart(5, '0')}.txt`);
    // Eight uploads at a time: enough to be quick, few enough for a 2-core machine.
    for (let i = 0; i < names.length; i += 8) {
      await Promise.all(
        names
          .slice(i, i + 8)
          .map((name) =>
            bucket
              .file(name)
              .save(Buffer.from(`invoice ${name}`), { contentType: 'text/plain', resumable: false }),
          ),
      );
    }
    // One object outside the prefix, and one overwritten: only its new generation is live.
    await bucket.file('other/readme.txt').save(Buffer.from('not a scan'), { resumable: false });
    await bucket
      .file('scans/00000.txt')
      .save(Buffer.from('invoice again'), { contentType: 'text/plain', resumable: false });
    const [files] = await bucket.getFiles({ prefix: 'scans/' });
    for (const f of files) generations.set(f.name, String(f.metadata.generation));
  }, 170_000);

  afterAll(async () => {
    await server?.stop();
  });

  it('pages past 1,000 objects and lists each live generation once', async () => {
    const lister = new GcsObjectLister(storage.bucket(BUCKET));
    const pages: number[] = [];
    const listed: string[] = [];
    for await (const page of lister.pages('scans/')) {
      pages.push(page.length);
      listed.push(...page.map((o) => objectUri(o)));
    }
    expect(pages.length).toBeGreaterThanOrEqual(2);
    expect(pages.reduce((a, b) => a + b, 0)).toBe(OBJECTS);
    expect(new Set(listed).size).toBe(OBJECTS);
    expect(listed.sort()).toEqual(
      [...generations].map(([name, generation]) => `gs://${BUCKET}/${name}#${generation}`).sort(),
    );
  });

  it('gives each object its JSON_API_V1 resource: generation and size as strings, content type, creation time', async () => {
    const lister = new GcsObjectLister(storage.bucket(BUCKET), 10);
    const first = await lister.pages('scans/00000')[Symbol.asyncIterator]().next();
    const resource = first.value![0]!;
    expect(resource).toMatchObject({
      name: 'scans/00000.txt',
      bucket: BUCKET,
      generation: generations.get('scans/00000.txt'),
      contentType: 'text/plain',
      size: String(Buffer.byteLength('invoice again')),
    });
    expect(typeof resource.generation).toBe('string');
    expect(Number.isNaN(Date.parse(resource.timeCreated))).toBe(false);
  });

  it('finds the objects of a page past the first that have no row', async () => {
    const rows = [...generations]
      .filter(([name]) => name !== 'scans/01001.txt' && name !== 'scans/00000.txt')
      .map(([name, generation]) => ({
        uri: `gs://${BUCKET}/${name}#${generation}`,
        processedAt: new Date(),
      }));
    const report = await findMissing(
      { prefix: 'scans/', olderThanMs: 0 },
      {
        lister: new GcsObjectLister(storage.bucket(BUCKET)),
        index: new MemoryIndex(rows),
        clock: { now: () => new Date(Date.now() + 1_000) },
      },
    );
    expect(report).toMatchObject({ listed: OBJECTS, withLine: OBJECTS - 2, missing: 2 });
    expect(report.missingObjects.map((o) => o.name).sort()).toEqual(['scans/00000.txt', 'scans/01001.txt']);
  });
});
