import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { findEmulatorBinary, type PubSubEmulator, startPubSubEmulator } from '../lib/emulator';
import { PubSubClient } from '../lib/pubsub';

interface Push {
  message: { messageId: string; attributes?: Record<string, string>; data?: string };
  subscription: string;
}

/** A push endpoint that records every body and answers with the status the test chooses. */
async function pushEndpoint(statusFor: (push: Push, count: number) => number) {
  const received: Push[] = [];
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      const push = JSON.parse(body) as Push;
      received.push(push);
      res.statusCode = statusFor(push, received.length);
      res.end();
      for (const w of waiters.filter((w) => received.length >= w.count)) w.resolve();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/push`;
  const waitFor = (count: number) =>
    new Promise<void>((resolve) => {
      if (received.length >= count) resolve();
      else waiters.push({ count, resolve });
    });
  return { url, received, waitFor, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe('the Pub/Sub emulator started by local/emulator', () => {
  let emulator: PubSubEmulator;
  let pubsub: PubSubClient;

  beforeAll(async () => {
    emulator = await startPubSubEmulator();
    pubsub = new PubSubClient(emulator.baseUrl, 'docline-test');
  }, 90_000);

  afterAll(async () => {
    await pubsub?.close();
    await emulator?.stop();
  });

  it('pushes a published message with its messageId and attributes', async () => {
    const endpoint = await pushEndpoint(() => 204);
    try {
      await pubsub.ensureTopic('topic-a');
      await pubsub.ensureSubscription('push-a', {
        topic: 'topic-a',
        pushConfig: { pushEndpoint: endpoint.url },
      });
      const [id] = await pubsub.publish('topic-a', [
        { data: 'hello', attributes: { eventType: 'OBJECT_FINALIZE' } },
      ]);
      await endpoint.waitFor(1);
      const push = endpoint.received[0]!;
      expect(push.message.messageId).toBe(id);
      expect(push.message.attributes).toEqual({ eventType: 'OBJECT_FINALIZE' });
      expect(Buffer.from(push.message.data ?? '', 'base64').toString()).toBe('hello');
      expect(push.subscription).toBe('projects/docline-test/subscriptions/push-a');
    } finally {
      await endpoint.close();
    }
  });

  it('delivers the same messageId again after a non-2xx answer', async () => {
    // The first delivery fails with 503, the second is acknowledged.
    const endpoint = await pushEndpoint((_push, count) => (count === 1 ? 503 : 200));
    try {
      await pubsub.ensureTopic('topic-b');
      await pubsub.ensureSubscription('push-b', {
        topic: 'topic-b',
        pushConfig: { pushEndpoint: endpoint.url },
        retryPolicy: { minimumBackoff: '1s', maximumBackoff: '2s' },
      });
      const [id] = await pubsub.publish('topic-b', [{ data: 'again' }]);
      await endpoint.waitFor(2);
      expect(endpoint.received.map((p) => p.message.messageId)).toEqual([id, id]);
    } finally {
      await endpoint.close();
    }
  });
});

describe('findEmulatorBinary', () => {
  it('says how to install the emulator when it is nowhere to be found', () => {
    const env = { PATH: '/nonexistent', DOCLINE_PUBSUB_EMULATOR_BIN: '/nonexistent/cloud-pubsub-emulator' };
    expect(() => findEmulatorBinary(env, [])).toThrow(
      /not found[\s\S]*gcloud components install pubsub-emulator/,
    );
  });

  it('takes DOCLINE_PUBSUB_EMULATOR_BIN first', () => {
    expect(
      findEmulatorBinary({ PATH: '/nonexistent', DOCLINE_PUBSUB_EMULATOR_BIN: process.execPath }, []),
    ).toBe(process.execPath);
  });
});
