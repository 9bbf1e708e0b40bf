import { execFile } from 'node:child_process';
import path from 'node:path';
import { checkNotifications, EXIT } from '../live/check-notifications';
import { FakeNotificationLister, feeding } from './support/fake-lister';
import {
  type FakeStorageServer,
  pipelineNotification,
  startFakeStorage,
} from './support/fake-storage-server';

const ROOT = path.resolve(__dirname, '../..');
const BUCKET = 'documents-4f2a1c';

/** Runs the command as `npm run check:notifications -- ARGS` does, and returns its exit code and output. */
function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; out: string }> {
  const base = { ...process.env, ...env };
  if (!('STORAGE_EMULATOR_HOST' in env)) delete base.STORAGE_EMULATOR_HOST;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [
        '--disable-warning=ExperimentalWarning',
        '--import',
        'tsx',
        'policies/live/check-notifications.ts',
        ...args,
      ],
      { cwd: ROOT, env: base, timeout: 30_000 },
      (error, stdout, stderr) => {
        const code = error ? Number((error as { code?: unknown }).code ?? -1) : 0;
        resolve({ code, out: `${stdout}${stderr}` });
      },
    );
  });
}

describe('npm run check:notifications', () => {
  let server: FakeStorageServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it('exits 0 when exactly one notification feeds the pipeline', async () => {
    server = await startFakeStorage({ [BUCKET]: [pipelineNotification('7')] });
    const { code, out } = await cli(['--bucket', BUCKET, '--api-endpoint', server.url]);
    expect(code).toBe(EXIT.ok);
    expect(out).toMatch(
      /FEEDS {2}notification 7: topic .*documents-events-91b2, OBJECT_FINALIZE, JSON_API_V1/,
    );
    expect(out).toMatch(/OK: exactly one notification feeds the pipeline/);
    expect(server.requests).toEqual([`GET /storage/v1/b/${BUCKET}/notificationConfigs`]);
  });

  it('exits 1 and prints the delete commands when a second notification feeds the same topic', async () => {
    server = await startFakeStorage({ [BUCKET]: [pipelineNotification('7'), pipelineNotification('8')] });
    const topic = 'documents-events-91b2';
    const { code, out } = await cli(['--bucket', BUCKET, '--topic', topic, '--api-endpoint', server.url]);
    expect(code).toBe(EXIT.duplicate);
    expect(out).toMatch(/DUPLICATE: 2 notifications feed the pipeline/);
    expect(out).toMatch(
      /notifications delete projects\/_\/buckets\/documents-4f2a1c\/notificationConfigs\/8/,
    );
  });

  it('counts only the given topic', async () => {
    server = await startFakeStorage({
      [BUCKET]: [pipelineNotification('7'), pipelineNotification('9', 'audit-trail')],
    });
    const topic = 'projects/docline-dev/topics/documents-events-91b2';
    const { code, out } = await cli(['--bucket', BUCKET, '--topic', topic, '--api-endpoint', server.url]);
    expect(code).toBe(EXIT.ok);
    expect(out).toMatch(/other {2}notification 9: topic .*audit-trail/);
  });

  it('honours STORAGE_EMULATOR_HOST', async () => {
    server = await startFakeStorage({ [BUCKET]: [pipelineNotification('7'), pipelineNotification('8')] });
    const { code } = await cli(['--bucket', BUCKET], { STORAGE_EMULATOR_HOST: server.url });
    expect(code).toBe(EXIT.duplicate);
    expect(server.requests).toHaveLength(1);
  });

  it('exits 2 when the bucket cannot be listed, or when --bucket is missing', async () => {
    server = await startFakeStorage({});
    const missing = await cli(['--bucket', 'gone', '--api-endpoint', server.url]);
    const usage = await cli([]);
    expect([missing.code, usage.code]).toEqual([EXIT.error, EXIT.error]);
    expect(missing.out).toMatch(/ERROR: cannot list the notifications of bucket gone/);
    expect(usage.out).toMatch(/--bucket is required/);
  });
});

describe('checkNotifications', () => {
  it('warns, without failing, when no notification feeds the pipeline', async () => {
    const lines: string[] = [];
    const code = await checkNotifications(
      { bucket: 'b' },
      new FakeNotificationLister({ b: [{ ...feeding('1'), eventTypes: ['OBJECT_DELETE'] }] }),
      (line) => lines.push(line),
    );
    expect(code).toBe(EXIT.ok);
    expect(lines.at(-1)).toMatch(/WARNING: no notification feeds the pipeline/);
  });

  it('counts a config without event types as feeding the pipeline', async () => {
    const lister = new FakeNotificationLister({ b: [feeding('1'), { ...feeding('2'), eventTypes: [] }] });
    expect(await checkNotifications({ bucket: 'b' }, lister, () => undefined)).toBe(EXIT.duplicate);
  });
});
