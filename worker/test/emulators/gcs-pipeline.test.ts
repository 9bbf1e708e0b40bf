import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CRC32C, Storage } from '@google-cloud/storage';
import { Announcer } from '../../../local/lib/announcer';
import { type PubSubEmulator, startPubSubEmulator } from '../../../local/lib/emulator';
import { LocalBucket } from '../../../local/lib/local-bucket';
import { LOCAL_NAMES, LOCAL_PROJECT, type Pipeline, startPipeline } from '../../../local/lib/pipeline';
import { PubSubClient, type ReceivedMessage } from '../../../local/lib/pubsub';
import { postPush, type WorkerLogLine } from '../../../local/lib/worker-process';
import { SqliteStore } from '../../src/adapters/stores/sqlite-store';
import { parsePush } from '../../src/core/event';
import { type FakeGcsServer, startFakeGcsServer } from './support/fake-gcs-server';
import { toolVersion } from './support/tool-process';

/*
 * The full local pipeline with Cloud Storage played by fake-gcs-server (fsouza), not by our local
 * bucket: uploads go through @google-cloud/storage, fake-gcs-server publishes its own JSON_API_V1
 * notifications (OBJECT_FINALIZE only, as docline's notification config) to the Pub/Sub emulator
 * topic, the push subscription delivers them to a worker process running with DOCLINE_READER=gcs,
 * and GcsReader reads the exact generation back from fake-gcs-server. Rows land in the SQLite store.
 *
 * The worker finds fake-gcs-server through STORAGE_EMULATOR_HOST, which @google-cloud/storage 8
 * uses *as its JSON API base URL*: it must end in /storage/v1 (`http://127.0.0.1:PORT` alone gives
 * 404 on every call).
 *
 * The second part compares what fake-gcs-server publishes with what local/lib/announcer.ts publishes
 * for the same upload. Differences found (fake-gcs-server v1.56.1):
 * - fake-gcs-server sends no `notificationConfig` attribute (Cloud Storage always does; docline
 *   only logs it). Every other attribute key is the same, overwroteGeneration included.
 * - Its eventTime has whole seconds (Cloud Storage: microseconds; ours: milliseconds); the worker
 *   accepts all three.
 * - Its object resource has no selfLink, mediaLink, metageneration, etag or timeStorageClassUpdated,
 *   and its `id` is bucket/name#generation (Cloud Storage: bucket/name/generation). The worker
 *   reads none of these.
 * - LOCAL_BUCKET_GAPS is a tripwire: a field Cloud Storage sends that our local bucket does not.
 */

const BUCKET = 'docline-emulated';
const INVOICE = (n: number) =>
  Buffer.from(
    `FACTURE N° 2026-${String(n).padStart(4, '0')}\nFournisseur : ACME SARL\nTotal TTC : 1 234,56 €\n`,
  );

/** Notification data fields the worker reads (core/event.ts). */
const WORKER_READS = ['name', 'bucket', 'generation', 'contentType', 'size', 'md5Hash', 'crc32c'] as const;
/** Fields Cloud Storage sends that our local bucket does not write (none: keep it that way). */
const LOCAL_BUCKET_GAPS: string[] = [];

const CAPTURE = 'fake-gcs-capture';
const COMPARE_TOPIC = 'local-bucket-announcements';
const COMPARE_CAPTURE = 'local-bucket-capture';

describe(`the local pipeline on fake-gcs-server ${toolVersion('fake-gcs-server')} and the Pub/Sub emulator`, () => {
  let emulator: PubSubEmulator;
  let pubsub: PubSubClient;
  let gcs: FakeGcsServer;
  let storage: Storage;
  let pipeline: Pipeline;
  let store: SqliteStore;
  let dataDir: string;

  beforeAll(async () => {
    emulator = await startPubSubEmulator();
    pubsub = new PubSubClient(emulator.baseUrl, LOCAL_PROJECT);
    // fake-gcs-server publishes to an existing topic only, and startPipeline creates it after the worker starts.
    await pubsub.ensureTopic(LOCAL_NAMES.topic);
    await pubsub.ensureSubscription(CAPTURE, { topic: LOCAL_NAMES.topic, ackDeadlineSeconds: 60 });
    await pubsub.ensureTopic(COMPARE_TOPIC);
    await pubsub.ensureSubscription(COMPARE_CAPTURE, { topic: COMPARE_TOPIC, ackDeadlineSeconds: 60 });
    gcs = await startFakeGcsServer({
      pubsub: { emulatorHost: emulator.host, projectId: LOCAL_PROJECT, topic: LOCAL_NAMES.topic },
    });
    await gcs.createBucket(BUCKET);
    storage = new Storage({ apiEndpoint: gcs.url, projectId: LOCAL_PROJECT });
    dataDir = await mkdtemp(path.join(tmpdir(), 'docline-fake-gcs-'));
    pipeline = await startPipeline({
      dataDir,
      emulatorHost: emulator.host,
      // A worker that is down comes back within seconds, not the production 10 s minimum backoff.
      settings: { minRetryBackoffSeconds: 1, maxRetryBackoffSeconds: 2 },
      workerEnv: { DOCLINE_READER: 'gcs', STORAGE_EMULATOR_HOST: gcs.storageEmulatorHost },
    });
    store = new SqliteStore({ path: path.join(dataDir, 'docline.sqlite') });
  }, 120_000);

  afterAll(async () => {
    await store?.close();
    await pubsub?.close();
    await pipeline?.stop();
    await gcs?.stop();
    await emulator?.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  /** Uploads through @google-cloud/storage and returns the generation fake-gcs-server assigned. */
  async function upload(name: string, bytes: Buffer): Promise<string> {
    const file = storage.bucket(BUCKET).file(name);
    await file.save(bytes, { contentType: 'text/plain', resumable: false });
    const [metadata] = await file.getMetadata();
    return String(metadata.generation);
  }

  const uri = (name: string, generation: string) => `gs://${BUCKET}/${name}#${generation}`;

  /** The worker's outcome line for one object generation (ok or rejected). */
  const outcome = (objectUri: string) =>
    pipeline.worker.waitForLine(
      (l: WorkerLogLine) => l.objectUri === objectUri && (l.status === 'ok' || l.status === 'rejected'),
      60_000,
    );

  /** Messages pulled so far, per capture subscription (each pull acknowledges what it got). */
  const pulled = new Map<string, ReceivedMessage['message'][]>();

  /** Waits until a capture subscription has received `count` messages about an object. */
  async function captured(subscription: string, objectId: string, count: number) {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const batch = await pubsub.pull(subscription, 100);
      await pubsub.acknowledge(
        subscription,
        batch.map((m) => m.ackId),
      );
      const all = [...(pulled.get(subscription) ?? []), ...batch.map((m) => m.message)];
      pulled.set(subscription, all);
      const matching = all.filter((m) => m.attributes?.objectId === objectId);
      if (matching.length >= count) {
        return matching.sort((a, b) =>
          BigInt(a.attributes!.objectGeneration!) < BigInt(b.attributes!.objectGeneration!) ? -1 : 1,
        );
      }
      if (Date.now() > deadline) {
        throw new Error(`${subscription} received ${matching.length} of ${count} messages about ${objectId}`);
      }
      // Publishing is asynchronous on both sides: poll the subscription until the messages are there.
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  /** The exact push body Pub/Sub would send for a pulled message. */
  const pushBodyOf = (message: ReceivedMessage['message']) => ({
    message: {
      data: message.data,
      attributes: message.attributes,
      messageId: message.messageId,
      message_id: message.messageId,
      publishTime: message.publishTime,
      publish_time: message.publishTime,
    },
    subscription: pubsub.subscriptionPath(LOCAL_NAMES.pushSubscription),
  });

  describe('GcsReader in the worker', () => {
    it('turns an upload through @google-cloud/storage into one ok row for its exact generation', async () => {
      const name = 'inbox/facture 0001.txt';
      const bytes = INVOICE(1);
      const generation = await upload(name, bytes);
      const line = await outcome(uri(name, generation));
      expect(line.status).toBe('ok');
      const rows = store.rowsWhere('object_name', name);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        status: 'ok',
        dedup_key: uri(name, generation),
        bucket: BUCKET,
        generation,
        content_type: 'text/plain',
        size_bytes: bytes.length,
        model: 'offline',
      });
      // The analysis came from the bytes GcsReader read back.
      expect(JSON.stringify(rows[0]!.analysis)).toContain('2026-0001');
    });

    it('treats an overwrite as new work: a second ok row, for the new generation', async () => {
      const name = 'inbox/facture 0002.txt';
      const first = await upload(name, INVOICE(2));
      await outcome(uri(name, first));
      const second = await upload(name, INVOICE(3));
      expect(BigInt(second) > BigInt(first)).toBe(true);
      expect((await outcome(uri(name, second))).status).toBe('ok');
      const rows = store.rowsWhere('object_name', name);
      expect(rows.map((r) => [r.generation, r.status])).toEqual([
        [first, 'ok'],
        [second, 'ok'],
      ]);
      expect(JSON.stringify(rows[1]!.analysis)).toContain('2026-0003');
    });

    it('rejects as object_gone a generation replaced before the worker read it, and analyses its successor', async () => {
      const name = 'inbox/facture 0004.txt';
      // The worker is down while the object is written and replaced: both notifications wait in Pub/Sub.
      await pipeline.worker.stop();
      const old = await upload(name, INVOICE(4));
      const live = await upload(name, INVOICE(5));
      await pipeline.restartWorker();
      const [gone, ok] = await Promise.all([outcome(uri(name, old)), outcome(uri(name, live))]);
      expect(gone).toMatchObject({ status: 'rejected', reason: 'object_gone' });
      expect(ok.status).toBe('ok');
      const rows = store.rowsWhere('object_name', name);
      expect(rows.map((r) => [r.generation, r.status, r.reason]).sort()).toEqual(
        [
          [old, 'rejected', 'object_gone'],
          [live, 'ok', null],
        ].sort(),
      );

      // fake-gcs-server's own message for the gone generation, pushed again as Pub/Sub would redeliver it.
      const [oldMessage] = await captured(CAPTURE, name, 2);
      expect(oldMessage!.attributes!.objectGeneration).toBe(old);
      const res = await postPush(pipeline.worker.url, pushBodyOf(oldMessage!));
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ status: 'duplicate' });
      expect(store.rowsWhere('object_name', name)).toHaveLength(2);
    });
  });

  describe("fake-gcs-server's notifications and the local bucket's announcements", () => {
    const name = 'compare/facture 0006.txt';
    const bytes = [INVOICE(6), INVOICE(7)];
    let theirs: ReceivedMessage['message'][];
    let ours: ReceivedMessage['message'][];

    beforeAll(async () => {
      for (const b of bytes) await upload(name, b);
      theirs = await captured(CAPTURE, name, 2);
      const local = new LocalBucket(path.join(dataDir, 'compare-bucket'));
      const announcer = new Announcer(pubsub, COMPARE_TOPIC);
      for (const b of bytes) {
        const { resource, overwroteGeneration } = await local.put(BUCKET, name, b, 'text/plain');
        await announcer.announce(resource, overwroteGeneration);
      }
      ours = await captured(COMPARE_CAPTURE, name, 2);
    });

    const data = (m: ReceivedMessage['message']) =>
      JSON.parse(Buffer.from(m.data ?? '', 'base64').toString('utf8')) as Record<string, unknown>;

    it('carry the same attribute keys, except notificationConfig, which fake-gcs-server omits', () => {
      for (const [i, ourMessage] of ours.entries()) {
        const theirAttributes = theirs[i]!.attributes!;
        const ourAttributes = ourMessage.attributes!;
        // fake-gcs-server v1.56.1 sends no notificationConfig; Cloud Storage and our announcer do.
        expect(theirAttributes.notificationConfig).toBeUndefined();
        expect(ourAttributes.notificationConfig).toMatch(
          /^projects\/_\/buckets\/.+\/notificationConfigs\/\d+$/,
        );
        expect(Object.keys(theirAttributes).sort()).toEqual(
          Object.keys(ourAttributes)
            .filter((k) => k !== 'notificationConfig')
            .sort(),
        );
      }
      expect(ours[1]!.attributes!.overwroteGeneration).toBe(ours[0]!.attributes!.objectGeneration);
      expect(theirs[1]!.attributes!.overwroteGeneration).toBe(theirs[0]!.attributes!.objectGeneration);
    });

    it('carry the same attribute values, generation-specific ones aside', () => {
      for (const [i, ourMessage] of ours.entries()) {
        const t = theirs[i]!.attributes!;
        const o = ourMessage.attributes!;
        for (const key of ['eventType', 'payloadFormat', 'bucketId', 'objectId']) expect(t[key]).toBe(o[key]);
        expect(t.objectGeneration).toBe(data(theirs[i]!).generation);
        expect(o.objectGeneration).toBe(data(ourMessage).generation);
      }
    });

    it('carry the data fields the worker reads, with the same values for the same bytes', () => {
      for (const [i, ourMessage] of ours.entries()) {
        const t = data(theirs[i]!);
        const o = data(ourMessage);
        expect(WORKER_READS.filter((f) => typeof t[f] !== 'string')).toEqual([]);
        // Tripwire: when local/lib/local-bucket.ts writes crc32c, empty LOCAL_BUCKET_GAPS.
        expect(WORKER_READS.filter((f) => typeof o[f] !== 'string')).toEqual(LOCAL_BUCKET_GAPS);
        for (const f of ['name', 'bucket', 'contentType', 'size', 'md5Hash', 'crc32c'] as const)
          expect(t[f]).toBe(o[f]);
        // What Cloud Storage computes, and what the local bucket should write.
        const crc32c = new CRC32C();
        crc32c.update(bytes[i]!);
        expect(t.crc32c).toBe(crc32c.toString());
      }
    });

    it('parse into the same document event at the worker edge', () => {
      for (const [i, ourMessage] of ours.entries()) {
        const t = parsePush(pushBodyOf(theirs[i]!));
        const o = parsePush(pushBodyOf(ourMessage));
        if (t.kind !== 'document' || o.kind !== 'document') throw new Error('expected two document events');
        const comparable = (fields: typeof t.object) => {
          const { generation, eventTime, notificationConfig, overwroteGeneration, crc32c, ...rest } = fields;
          return {
            ...rest,
            eventTime: eventTime !== null,
            overwroteGeneration: overwroteGeneration !== null,
          };
        };
        expect(comparable(t.object)).toEqual(comparable(o.object));
        expect(t.object.crc32c).not.toBeNull();
      }
    });
  });
});
