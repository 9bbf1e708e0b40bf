import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SqliteStore } from '../../worker/src/adapters/stores/sqlite-store';
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import type { Row } from '../../worker/src/contract/row';
import { main as reconcileMain } from '../commands/reconcile';
import { contentTypeFor } from './announcer';
import type { CanaryProbes } from './canary';
import { listDeadLetters, pullAll } from './dead-letter-subscription';
import { type DuplicateInvoice, duplicateGroupOf } from './format';
import { LOCAL_NAMES, type Pipeline, startPipeline } from './pipeline';
import { PubSubClient, type ReceivedMessage } from './pubsub';
import { postPush } from './worker-process';

/**
 * Where the end-to-end check runs. The checks (e2e.ts) are the same for both targets; only these
 * primitive calls differ: a local pipeline on the emulator, or a deployed stack.
 */
export interface Target {
  readonly description: string;
  /** Uploads bytes as a new generation; resolves with the object URI (`gs://b/n#g`). */
  upload(name: string, bytes: Buffer): Promise<string>;
  /** Rows of the raw table (not the view) for one object URI. */
  rawRowsFor(objectUri: string): Promise<Row[]>;
  /** Dedup keys that have more than one row in the raw table. */
  keysRecordedTwice(): Promise<string[]>;
  /** The message that announced an object, as Pub/Sub delivered it (captured by a tap subscription). */
  announcement(objectUri: string): Promise<ReceivedMessage['message'] | undefined>;
  /** Publishes raw data and attributes to the pipeline's topic; returns the messageId. */
  publish(data: Buffer, attributes: Record<string, string>): Promise<string>;
  /** Sends a push body to the worker exactly as Pub/Sub would. */
  push(body: unknown): Promise<{ status: number; body: unknown }>;
  /** Dead letters carrying an attribute value, released again after reading. */
  deadLettersWith(attribute: string, value: string): Promise<number>;
  /** How many times the worker analysed an object, when the target can tell (local logs). */
  analysesOf(objectUri: string): number | undefined;
  /** Whether the worker has answered a message, when the target can tell (local logs). */
  answered(messageId: string): boolean | undefined;
  /**
   * Stores bytes WITHOUT announcing them (a document that predates the notification); resolves with
   * the object URI. Undefined where every write is announced (a bucket with its notification).
   */
  readonly writeWithoutAnnouncing: ((name: string, bytes: Buffer) => Promise<string>) | undefined;
  /** Runs `npm run reconcile` with these arguments against the target. */
  reconcile(args: string[]): Promise<ReconcileRun>;
  /** The object URIs of the duplicate_invoices group an object belongs to (empty: none). */
  duplicateGroup(objectUri: string): Promise<string[]>;
  /** How the deploy canary observes this target (local/lib/canary.ts); undefined: it cannot run here. */
  canaryProbes(): CanaryProbes | undefined;
  close(): Promise<void>;
}

const TAP = 'docline-e2e-tap';

/** What one reconcile run answered. */
export type ReconcileRun = Awaited<ReturnType<typeof reconcileMain>> & { lines: string[] };

/** Runs `npm run reconcile`'s main with these arguments, its lines collected. */
export async function runReconcile(args: string[], env: NodeJS.ProcessEnv): Promise<ReconcileRun> {
  const lines: string[] = [];
  const result = await reconcileMain(args, {
    env,
    print: (line) => lines.push(line),
    stderr: { isTTY: false, write: () => true },
  });
  return { ...result, lines };
}

/** Captures every message published to the topic, so the check can replay an exact push body. */
class Tap {
  private readonly seen = new Map<string, ReceivedMessage['message']>();
  constructor(private readonly pubsub: PubSubClient) {}

  async create(topic: string): Promise<void> {
    await this.pubsub.ensureSubscription(TAP, {
      topic: this.pubsub.topicPath(topic),
      ackDeadlineSeconds: 60,
    });
  }

  async find(objectUri: string): Promise<ReceivedMessage['message'] | undefined> {
    const batch = await pullAll(this.pubsub, TAP);
    await this.pubsub.acknowledge(
      TAP,
      batch.map((m) => m.ackId),
    );
    for (const m of batch) {
      const a = m.attributes;
      const uri = `gs://${a.bucketId}/${a.objectId}#${a.objectGeneration}`;
      if (!this.seen.has(uri)) {
        this.seen.set(uri, { messageId: m.messageId, attributes: a, data: m.data, publishTime: '' });
      }
    }
    return this.seen.get(objectUri);
  }

  async delete(): Promise<void> {
    await this.pubsub.deleteSubscription(TAP);
  }
}

/** What both targets do the same through Pub/Sub: announcements from the tap, publishing, dead letters. */
abstract class PubSubTarget {
  constructor(
    protected readonly pubsub: PubSubClient,
    protected readonly tap: Tap,
    private readonly names: { topic: string; deadLetterSubscription: string },
  ) {}

  announcement(objectUri: string) {
    return this.tap.find(objectUri);
  }

  async publish(data: Buffer, attributes: Record<string, string>): Promise<string> {
    const [id] = await this.pubsub.publish(this.names.topic, [{ data, attributes }]);
    return id!;
  }

  async deadLettersWith(attribute: string, value: string): Promise<number> {
    const letters = await listDeadLetters(this.pubsub, this.names.deadLetterSubscription);
    return letters.filter((l) => l.attributes[attribute] === value).length;
  }
}

/** A fresh local pipeline in a temporary folder, on free ports. */
export class LocalTarget extends PubSubTarget implements Target {
  readonly description = 'local pipeline (Pub/Sub emulator, SQLite, local bucket, offline analyzer)';
  private constructor(
    private readonly pipeline: Pipeline,
    private readonly store: SqliteStore,
    tap: Tap,
    private readonly dir: string,
  ) {
    super(pipeline.pubsub, tap, LOCAL_NAMES);
  }

  static async start(): Promise<LocalTarget> {
    const dir = await mkdtemp(path.join(tmpdir(), 'docline-e2e-'));
    // Short backoffs so that the poison message reaches the dead-letter topic within seconds.
    const pipeline = await startPipeline({
      dataDir: dir,
      settings: { minRetryBackoffSeconds: 1, maxRetryBackoffSeconds: 2, maxDeliveryAttempts: 5 },
      // The memo on, as in front of a paid analyzer: the doubled notification's two deliveries may
      // overlap, and only the memo's lease makes the second wait for the first's analysis (without
      // it, the free offline analyzer is simply run twice and the check of one analysis races).
      workerEnv: { MEMO: 'on' },
    });
    const tap = new Tap(pipeline.pubsub);
    await tap.create(LOCAL_NAMES.topic);
    return new LocalTarget(pipeline, new SqliteStore({ path: dataDirLayout(dir).sqlite }), tap, dir);
  }

  async upload(name: string, bytes: Buffer): Promise<string> {
    const { resource } = await this.pipeline.upload(name, bytes, { contentType: contentTypeFor(name) });
    return `gs://${resource.bucket}/${resource.name}#${resource.generation}`;
  }

  async rawRowsFor(objectUri: string): Promise<Row[]> {
    return this.store.rowsWhere('object_uri', objectUri);
  }

  async keysRecordedTwice(): Promise<string[]> {
    return this.store.keysRecordedTwice();
  }

  async push(body: unknown) {
    const res = await postPush(this.pipeline.worker.url, body);
    return { status: res.status, body: await res.json() };
  }

  analysesOf(objectUri: string): number {
    return this.pipeline.worker.lines.filter((l) => l.objectUri === objectUri && l.analysed === true).length;
  }

  answered(messageId: string): boolean {
    return this.pipeline.worker.lines.some((l) => l.messageId === messageId && l.status !== undefined);
  }

  readonly writeWithoutAnnouncing = async (name: string, bytes: Buffer): Promise<string> => {
    const { resource } = await this.pipeline.bucket.put(
      this.pipeline.bucketName,
      name,
      bytes,
      contentTypeFor(name),
    );
    return `gs://${resource.bucket}/${resource.name}#${resource.generation}`;
  };

  reconcile(args: string[]): Promise<ReconcileRun> {
    return runReconcile([...args, '--data-dir', this.pipeline.state.dataDir], {});
  }

  async duplicateGroup(objectUri: string): Promise<string[]> {
    const rows = this.store.view('duplicate_invoices') as unknown as DuplicateInvoice[];
    return duplicateGroupOf(rows, objectUri).map((d) => d.object_uri);
  }

  canaryProbes(): CanaryProbes {
    const lines = () => this.pipeline.worker.lines;
    return {
      description: this.description,
      upload: (name, bytes) => this.upload(name, bytes),
      notification: async (objectUri) => (await this.tap.find(objectUri))?.messageId,
      push: async (messageId) => lines().some((l) => l.messageId === messageId),
      worker: async (messageId) => {
        const answer = lines().findLast((l) => l.messageId === messageId && l.status !== undefined);
        return answer === undefined
          ? undefined
          : { status: String(answer.status), detail: answer.reason ?? answer.detail ?? answer.message };
      },
      row: async (objectUri) => this.store.documents().find((r) => r.object_uri === objectUri),
    };
  }

  async close(): Promise<void> {
    await this.store.close();
    await this.pipeline.stop();
    await rm(this.dir, { recursive: true, force: true });
  }
}

/**
 * A deployed stack: the bucket, topic and dead-letter subscription from the stack outputs, the
 * table through BigQuery, the worker through its URL with an identity token. Credentials come
 * from the environment (Application Default Credentials). It cannot run without a cloud project.
 */
export class CloudTarget extends PubSubTarget implements Target {
  readonly description: string;
  private constructor(
    private readonly env: {
      project: string;
      bucket: string;
      topic: string;
      deadLetterSubscription: string;
      table: string;
      workerUrl: string;
      location: string | undefined;
    },
    pubsub: PubSubClient,
    tap: Tap,
    private readonly clients: {
      storage: import('@google-cloud/storage').Storage;
      bigquery: import('@google-cloud/bigquery').BigQuery;
      idToken: () => Promise<string>;
    },
  ) {
    super(pubsub, tap, env);
    this.description = `deployed stack (bucket ${env.bucket}, table ${env.table}, worker ${env.workerUrl})`;
  }

  static async start(environment: NodeJS.ProcessEnv): Promise<CloudTarget> {
    const names = [
      'DOCLINE_PROJECT',
      'DOCLINE_BUCKET',
      'DOCLINE_TOPIC',
      'DOCLINE_DEAD_LETTER_SUBSCRIPTION',
      'DOCLINE_TABLE',
      'DOCLINE_WORKER_URL',
    ];
    const missing = names.filter((n) => !environment[n]);
    if (missing.length > 0) {
      throw new Error(
        `--target cloud needs ${missing.join(', ')} (from \`pulumi stack output\`), and Application Default Credentials.`,
      );
    }
    const env = {
      project: environment.DOCLINE_PROJECT!,
      bucket: environment.DOCLINE_BUCKET!,
      topic: environment.DOCLINE_TOPIC!,
      deadLetterSubscription: environment.DOCLINE_DEAD_LETTER_SUBSCRIPTION!,
      table: environment.DOCLINE_TABLE!,
      workerUrl: environment.DOCLINE_WORKER_URL!,
      location: environment.BIGQUERY_LOCATION || undefined,
    };
    const { GoogleAuth } = require('google-auth-library') as typeof import('google-auth-library');
    const { Storage } = require('@google-cloud/storage') as typeof import('@google-cloud/storage');
    const { BigQuery } = require('@google-cloud/bigquery') as typeof import('@google-cloud/bigquery');
    const auth = new GoogleAuth({ scopes: ['https://www.googleapis.com/auth/cloud-platform'] });
    const idClient = await auth.getIdTokenClient(env.workerUrl);
    const pubsub = new PubSubClient(undefined, env.project);
    const tap = new Tap(pubsub);
    await tap.create(env.topic);
    return new CloudTarget(env, pubsub, tap, {
      storage: new Storage({ projectId: env.project }),
      bigquery: new BigQuery({ projectId: env.project }),
      idToken: () => idClient.idTokenProvider.fetchIdToken(env.workerUrl),
    });
  }

  async upload(name: string, bytes: Buffer): Promise<string> {
    const file = this.clients.storage.bucket(this.env.bucket).file(name);
    await file.save(bytes, { contentType: contentTypeFor(name), resumable: false });
    const [metadata] = await file.getMetadata();
    return `gs://${this.env.bucket}/${name}#${metadata.generation}`;
  }

  async rawRowsFor(objectUri: string): Promise<Row[]> {
    const [rows] = await this.clients.bigquery.query({
      query: `SELECT * FROM \`${this.env.table}\` WHERE object_uri = @uri AND processed_at > TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 1 DAY)`,
      params: { uri: objectUri },
    });
    return rows as Row[];
  }

  async keysRecordedTwice(): Promise<string[]> {
    const [rows] = await this.clients.bigquery.query({
      query: `SELECT dedup_key FROM \`${this.env.table}\` WHERE processed_at > TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 1 DAY) GROUP BY dedup_key HAVING COUNT(*) > 1`,
    });
    return (rows as Array<{ dedup_key: string }>).map((r) => r.dedup_key);
  }

  async push(body: unknown) {
    const res = await postPush(this.env.workerUrl, body, {
      authorization: `Bearer ${await this.clients.idToken()}`,
    });
    return { status: res.status, body: await res.json().catch(() => null) };
  }

  analysesOf(): undefined {
    return undefined;
  }

  /** A deployed bucket announces every write through its notification. */
  readonly writeWithoutAnnouncing = undefined;

  reconcile(args: string[]): Promise<ReconcileRun> {
    return runReconcile(['--target', 'cloud', ...args], {
      DOCLINE_PROJECT: this.env.project,
      DOCLINE_BUCKET: this.env.bucket,
      DOCLINE_TOPIC: this.env.topic,
      DOCLINE_TABLE: this.env.table,
      ...(this.env.location ? { BIGQUERY_LOCATION: this.env.location } : {}),
    });
  }

  async duplicateGroup(objectUri: string): Promise<string[]> {
    const [project, dataset] = this.env.table.split('.');
    const [rows] = await this.clients.bigquery.query({
      query: `SELECT * FROM \`${project}.${dataset}.duplicate_invoices\` WHERE first_processed_at > TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 1 DAY)`,
      ...(this.env.location ? { location: this.env.location } : {}),
    });
    return duplicateGroupOf(rows as DuplicateInvoice[], objectUri).map((d) => d.object_uri);
  }

  answered(): undefined {
    return undefined;
  }

  /** The canary needs the stack's outputs (log bucket, view): `npm run canary -- --target cloud`. */
  canaryProbes(): undefined {
    return undefined;
  }

  async close(): Promise<void> {
    await this.tap.delete();
    await this.pubsub.close();
  }
}
