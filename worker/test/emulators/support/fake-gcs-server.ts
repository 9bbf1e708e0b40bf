import { freePort } from '../../../../local/lib/emulator';
import { startToolProcess } from './tool-process';

/**
 * fake-gcs-server (github.com/fsouza/fake-gcs-server), an independent implementation of the Cloud
 * Storage JSON API, started on a loopback port with the in-memory backend over plain HTTP. With
 * `pubsub`, it publishes JSON_API_V1 notifications of finalized objects only (as docline's
 * notification config) to a topic of the Pub/Sub emulator — the topic must exist before the first upload.
 */

export interface FakeGcsServerOptions {
  /** Publish notifications to this Pub/Sub emulator topic. */
  pubsub?: {
    /** `127.0.0.1:PORT` of the Pub/Sub emulator (fake-gcs-server reads PUBSUB_EMULATOR_HOST). */
    emulatorHost: string;
    projectId: string;
    topic: string;
  };
}

export interface FakeGcsServer {
  /** `http://127.0.0.1:PORT`: the `apiEndpoint` of @google-cloud/storage. */
  readonly url: string;
  /**
   * The value of STORAGE_EMULATOR_HOST for @google-cloud/storage 8: the JSON API base *with*
   * `/storage/v1` (the library uses the variable as its base URL as it is; without the path every
   * call answers 404).
   */
  readonly storageEmulatorHost: string;
  /** Creates a bucket (fake-gcs-server creates none on its own). */
  createBucket(name: string, options?: { versioning?: boolean }): Promise<void>;
  stop(): Promise<void>;
}

/** Starts fake-gcs-server and resolves once its health check answers. */
export async function startFakeGcsServer(options: FakeGcsServerOptions = {}): Promise<FakeGcsServer> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const args = [
    '-scheme',
    'http',
    '-host',
    '127.0.0.1',
    '-port',
    String(port),
    // The default backend is a folder (/storage); memory keeps runs independent.
    '-backend',
    'memory',
    '-public-host',
    `127.0.0.1:${port}`,
    '-external-url',
    url,
    '-log-level',
    'warn',
  ];
  const env: Record<string, string> = {};
  if (options.pubsub) {
    args.push(
      '-event.pubsub-project-id',
      options.pubsub.projectId,
      '-event.pubsub-topic',
      options.pubsub.topic,
      '-event.list',
      'finalize',
    );
    env.PUBSUB_EMULATOR_HOST = options.pubsub.emulatorHost;
  }
  const tool = await startToolProcess({
    name: 'fake-gcs-server',
    args,
    env,
    ready: async () =>
      (await fetch(`${url}/_internal/healthcheck`, { signal: AbortSignal.timeout(1_000) })).ok,
  });

  return {
    url,
    storageEmulatorHost: `${url}/storage/v1`,
    async createBucket(name, bucketOptions = {}) {
      const res = await fetch(`${url}/storage/v1/b?project=docline`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name, versioning: { enabled: bucketOptions.versioning ?? false } }),
      });
      if (!res.ok) throw new Error(`creating bucket ${name} failed with ${res.status}: ${await res.text()}`);
    },
    stop: () => tool.stop(),
  };
}
