import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { detectCredentials } from '../live/credentials';
import { GcsNotificationLister } from '../live/gcs-notification-lister';
import { feedsPipeline, sameTopic, unmanagedNotifications } from '../live/notifications';
import { LIVE_POLICY, LIVE_UNCHECKED_POLICY, liveBucketNotificationsPolicies } from '../rules/live';
import { validStack } from './fixtures';
import { analyzeStack, type Diagnostic, type StackResource } from './harness';
import { FakeNotificationLister, feeding } from './support/fake-lister';
import {
  type FakeStorageServer,
  pipelineNotification,
  startFakeStorage,
} from './support/fake-storage-server';

const BUCKET = 'documents-4f2a1c';
const ROOT = path.resolve(__dirname, '../..');

/** The two live policies around a fake lister, with or without credentials. */
function runLive(
  stack: StackResource[],
  lister: FakeNotificationLister,
  credentials: 'present' | 'absent',
  config = {},
) {
  const policies = liveBucketNotificationsPolicies({
    lister: () => lister,
    credentials: () =>
      credentials === 'present'
        ? { available: true, how: 'test credentials' }
        : detectCredentials({ HOME: '/nowhere' }, undefined, () => false),
  });
  return analyzeStack(stack, {
    policies: [...policies],
    config: { [LIVE_POLICY]: config, [LIVE_UNCHECKED_POLICY]: config },
  });
}

describe('the live notification rule', () => {
  it('blocks (mandatory) on a hand-made notification publishing uploads to the pipeline\u2019s topic', async () => {
    const lister = new FakeNotificationLister({ [BUCKET]: [feeding('7'), feeding('8')] });
    const diagnostics = await runLive(validStack('update'), lister, 'present');
    expect(diagnostics).toHaveLength(1);
    expect([diagnostics[0]?.policyName, diagnostics[0]?.enforcementLevel]).toEqual([
      LIVE_POLICY,
      'mandatory',
    ]);
    expect(diagnostics[0]?.message).toMatch(
      /Bucket documents-4f2a1c has notification 8: topic \/\/pubsub.googleapis.com\/projects\/docline-dev\/topics\/documents-events-91b2, OBJECT_FINALIZE, JSON_API_V1, which this stack does not manage and which publishes the pipeline's uploads to its topic/,
    );
    expect(diagnostics[0]?.message).toMatch(
      /gcloud storage buckets notifications delete projects\/_\/buckets\/documents-4f2a1c\/notificationConfigs\/8/,
    );
  });

  it('blocks a second stack\u2019s or a hand-made notification for all event types on the topic too', async () => {
    const all = { ...feeding('9'), eventTypes: [] };
    const diagnostics = await runLive(
      validStack('update'),
      new FakeNotificationLister({ [BUCKET]: [feeding('7'), all] }),
      'present',
    );
    expect(diagnostics.map((d) => [d.policyName, d.enforcementLevel])).toEqual([[LIVE_POLICY, 'mandatory']]);
  });

  it('only warns (advisory) about an unmanaged notification that publishes elsewhere or other events', async () => {
    const elsewhere = feeding('8', 'audit-events');
    const deletes = { ...feeding('9'), eventTypes: ['OBJECT_DELETE'] };
    const diagnostics = await runLive(
      validStack('update'),
      new FakeNotificationLister({ [BUCKET]: [feeding('7'), elsewhere, deletes] }),
      'present',
    );
    expect(diagnostics.map((d) => [d.policyName, d.enforcementLevel])).toEqual([
      [LIVE_UNCHECKED_POLICY, 'advisory'],
      [LIVE_UNCHECKED_POLICY, 'advisory'],
    ]);
    expect(diagnostics[0]?.message).toMatch(
      /notification 8: .*audit-events.* does not publish to the pipeline's topic/,
    );
  });

  it('is silent when the bucket holds exactly the notification the stack manages', async () => {
    const lister = new FakeNotificationLister({ [BUCKET]: [feeding('7')] });
    expect(await runLive(validStack('update'), lister, 'present')).toEqual([]);
    // Each of the two policies lists the bucket once.
    expect(lister.asked).toEqual([BUCKET, BUCKET]);
  });

  it('says it was skipped, and why, when no credentials are present', async () => {
    const lister = new FakeNotificationLister({ [BUCKET]: [feeding('7'), feeding('8')] });
    const diagnostics = await runLive(validStack('update'), lister, 'absent');
    expect(diagnostics.map((d) => [d.policyName, d.enforcementLevel])).toEqual([
      [LIVE_UNCHECKED_POLICY, 'advisory'],
    ]);
    expect(diagnostics.map((d) => d.message)).toEqual([
      expect.stringMatching(
        /^Live notification check skipped: no Google Cloud credentials: GOOGLE_APPLICATION_CREDENTIALS is unset/,
      ),
    ]);
    expect(lister.asked).toEqual([]);
  });

  it('says it was skipped when the bucket does not exist yet (first preview)', async () => {
    const lister = new FakeNotificationLister({});
    const diagnostics = await runLive(validStack('preview'), lister, 'present');
    expect(diagnostics.map((d) => d.enforcementLevel)).toEqual(['advisory']);
    expect(diagnostics.map((d) => d.message)).toEqual([
      expect.stringMatching(/skipped for 'documents': its bucket's name is unknown until the update runs/),
    ]);
    expect(lister.asked).toEqual([]);
  });

  it('reports a bucket it cannot list instead of passing', async () => {
    const diagnostics = await runLive(validStack('update'), new FakeNotificationLister({}), 'present');
    expect(diagnostics.map((d) => d.enforcementLevel)).toEqual(['advisory']);
    expect(diagnostics.map((d) => d.message)).toEqual([
      expect.stringMatching(
        /could not list the notifications of bucket documents-4f2a1c using test credentials: 404/,
      ),
    ]);
  });

  it('can be switched off through its configuration', async () => {
    const lister = new FakeNotificationLister({ [BUCKET]: [feeding('7'), feeding('8')] });
    const diagnostics = await runLive(validStack('update'), lister, 'present', { enabled: false });
    expect([diagnostics, lister.asked]).toEqual([[], []]);
  });
});

describe('the live notification rule against a local Cloud Storage server', () => {
  let server: FakeStorageServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  /** The real rule (real client, real credential detection) in a Node process of its own. */
  async function realRule(mode: string, apiEndpoint?: string): Promise<Diagnostic[]> {
    const env: NodeJS.ProcessEnv = { ...process.env, HOME: '/nowhere', CLOUDSDK_CONFIG: '/nowhere' };
    delete env.GOOGLE_APPLICATION_CREDENTIALS;
    delete env.STORAGE_EMULATOR_HOST;
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '--import',
        'tsx',
        'policies/test/support/run-live-rule.ts',
        mode,
        ...(apiEndpoint ? [apiEndpoint] : []),
      ],
      { cwd: ROOT, env, timeout: 30_000 },
    );
    return JSON.parse(stdout) as Diagnostic[];
  }

  it('lists the bucket through the notifications API and reports the stray config', async () => {
    server = await startFakeStorage({ [BUCKET]: [pipelineNotification('7'), pipelineNotification('8')] });
    const diagnostics = await realRule('update', server.url);
    expect(server.requests).toEqual([
      `GET /storage/v1/b/${BUCKET}/notificationConfigs`,
      `GET /storage/v1/b/${BUCKET}/notificationConfigs`,
    ]);
    expect(diagnostics.map((d) => d.message)).toEqual([
      expect.stringMatching(/has notification 8: .*does not manage/),
    ]);
  });

  it('skips without credentials, saying why', async () => {
    const diagnostics = await realRule('update');
    expect(diagnostics.map((d) => d.message)).toEqual([
      expect.stringMatching(
        /skipped: no Google Cloud credentials: GOOGLE_APPLICATION_CREDENTIALS is unset and \/nowhere/,
      ),
    ]);
  });
});

describe('GcsNotificationLister', () => {
  let server: FakeStorageServer | undefined;
  const saved = process.env.STORAGE_EMULATOR_HOST;
  afterEach(async () => {
    if (saved === undefined) delete process.env.STORAGE_EMULATOR_HOST;
    else process.env.STORAGE_EMULATOR_HOST = saved;
    await server?.stop();
    server = undefined;
  });

  it('lists the configs of a bucket through GET /storage/v1/b/BUCKET/notificationConfigs', async () => {
    server = await startFakeStorage({
      b: [
        pipelineNotification('1'),
        {
          id: '2',
          topic: '//pubsub.googleapis.com/projects/p/topics/t',
          payload_format: 'NONE',
          object_name_prefix: 'in/',
        },
      ],
    });
    expect(await new GcsNotificationLister({ apiEndpoint: server.url }).list('b')).toEqual([
      {
        id: '1',
        topic: '//pubsub.googleapis.com/projects/docline-dev/topics/documents-events-91b2',
        eventTypes: ['OBJECT_FINALIZE'],
        payloadFormat: 'JSON_API_V1',
      },
      {
        id: '2',
        topic: '//pubsub.googleapis.com/projects/p/topics/t',
        eventTypes: [],
        payloadFormat: 'NONE',
        objectNamePrefix: 'in/',
      },
    ]);
    expect(server.requests).toEqual(['GET /storage/v1/b/b/notificationConfigs']);
  });

  it('honours STORAGE_EMULATOR_HOST', async () => {
    server = await startFakeStorage({ b: [pipelineNotification('1')] });
    process.env.STORAGE_EMULATOR_HOST = server.url;
    expect((await new GcsNotificationLister().list('b')).map((n) => n.id)).toEqual(['1']);
    expect(server.requests).toHaveLength(1);
  });

  it('fails on a bucket the API does not know', async () => {
    server = await startFakeStorage({});
    await expect(new GcsNotificationLister({ apiEndpoint: server.url }).list('gone')).rejects.toThrow(
      /bucket does not exist/,
    );
  });
});

describe('the live comparison', () => {
  const n = (id: string, topic = 'projects/p/topics/t', eventTypes = ['OBJECT_FINALIZE']) => ({
    id,
    topic: `//pubsub.googleapis.com/${topic}`,
    eventTypes,
    payloadFormat: 'JSON_API_V1',
  });

  it('matches managed notifications by id when the stack knows it', () => {
    expect(unmanagedNotifications([n('1'), n('2')], [{ id: '2' }]).map((x) => x.id)).toEqual(['1']);
  });

  it('matches by topic, event types and format when the id is not known, one config per managed notification', () => {
    const managed = [
      { topic: 'projects/p/topics/t', eventTypes: ['OBJECT_FINALIZE'], payloadFormat: 'JSON_API_V1' },
    ];
    expect(
      unmanagedNotifications([n('1'), n('2'), n('3', 'projects/p/topics/other')], managed).map((x) => x.id),
    ).toEqual(['2', '3']);
  });

  it('counts a config as feeding the pipeline when it delivers OBJECT_FINALIZE to the topic', () => {
    expect([
      feedsPipeline(n('1'), 't'),
      feedsPipeline(n('2', 'projects/p/topics/t', []), 'projects/p/topics/t'),
      feedsPipeline(n('3', 'projects/p/topics/t', ['OBJECT_DELETE']), 't'),
      feedsPipeline(n('4', 'projects/q/topics/t'), 'projects/p/topics/t'),
      feedsPipeline(n('5', 'projects/q/topics/u')),
    ]).toEqual([true, true, false, false, true]);
  });

  it('compares topics across the reference shapes', () => {
    expect([
      sameTopic('//pubsub.googleapis.com/projects/p/topics/t', 'projects/p/topics/t'),
      sameTopic('//pubsub.googleapis.com/projects/p/topics/t', 't'),
      sameTopic('projects/p/topics/t', 'projects/q/topics/t'),
      sameTopic('t', 'u'),
    ]).toEqual([true, true, false, false]);
  });
});

describe('detectCredentials', () => {
  const none = () => false;

  it('finds a key file, the ADC file, an emulator host or a custom endpoint', () => {
    const adc = '/home/me/.config/gcloud/application_default_credentials.json';
    expect([
      detectCredentials({ GOOGLE_APPLICATION_CREDENTIALS: '/k.json' }, undefined, (f) => f === '/k.json')
        .available,
      detectCredentials({ HOME: '/home/me' }, undefined, (f) => f === adc).available,
      detectCredentials({ STORAGE_EMULATOR_HOST: 'http://127.0.0.1:1' }, undefined, none).available,
      detectCredentials({}, 'http://127.0.0.1:1', none).available,
    ]).toEqual([true, true, true, true]);
  });

  it('says why when there are none', () => {
    expect(detectCredentials({ HOME: '/home/me' }, undefined, none)).toEqual({
      available: false,
      why: expect.stringMatching(
        /GOOGLE_APPLICATION_CREDENTIALS is unset and \/home\/me\/\.config\/gcloud\/application_default_credentials\.json does not exist/,
      ),
    });
    expect(detectCredentials({ GOOGLE_APPLICATION_CREDENTIALS: '/gone.json' }, undefined, none)).toEqual({
      available: false,
      why: 'GOOGLE_APPLICATION_CREDENTIALS points to /gone.json, which does not exist',
    });
  });
});
