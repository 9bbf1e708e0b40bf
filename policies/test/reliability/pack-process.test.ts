/**
 * The pack as the Pulumi CLI runs it: `@pulumi/pulumi`'s policy-pack runner started in policies/
 * (ts-node, type-checked, reading policies/package.json and policies/tsconfig.json), then spoken to
 * over gRPC like the engine does. Slow (the runner type-checks the pack: ~10 s), hence this folder.
 *
 * Run: jest policies/test/reliability --testPathIgnorePatterns=/node_modules/
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { AnalyzerClient } from '@pulumi/pulumi/proto/analyzer_grpc_pb';
import type * as analyzer from '@pulumi/pulumi/proto/analyzer_pb';
import { Empty } from 'google-protobuf/google/protobuf/empty_pb';
import { policies } from '../../rules';
import { add, FIXTURE_TYPES as T, validStack } from '../fixtures';
import { decode, resourceRequest, stackRequest, UNKNOWN, urnOf } from '../harness';

const ROOT = path.resolve(__dirname, '../../..');

let pack: ChildProcess | undefined;
let client: InstanceType<typeof AnalyzerClient>;

/** Starts the runner the way the CLI's nodejs policy host does, and waits for the port it prints. */
function startPack(): Promise<number> {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: '/nowhere', CLOUDSDK_CONFIG: '/nowhere' };
  delete env.GOOGLE_APPLICATION_CREDENTIALS;
  delete env.STORAGE_EMULATOR_HOST;
  pack = spawn(
    process.execPath,
    [path.join(ROOT, 'node_modules/@pulumi/pulumi/cmd/run-policy-pack/index.js'), '127.0.0.1:1', '.'],
    { cwd: path.join(ROOT, 'policies'), env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const port = /^(\d+)\s*$/m.exec(out)?.[1];
      if (port) resolve(Number(port));
    };
    pack?.stdout?.on('data', onData);
    pack?.stderr?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    pack?.on('exit', (code) => reject(new Error(`the policy pack exited with ${code}:\n${out}`)));
  });
}

beforeAll(async () => {
  const port = await startPack();
  client = new AnalyzerClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
}, 120_000);

afterAll(() => {
  client?.close();
  pack?.kill();
});

describe('the policy pack process', () => {
  it('serves every policy of the list under the name docline', async () => {
    const info = await new Promise<analyzer.AnalyzerInfo>((resolve, reject) =>
      client.getAnalyzerInfo(new Empty(), (error, response) => (error ? reject(error) : resolve(response))),
    );
    expect(info.getName()).toBe('docline');
    expect(info.getPoliciesList().map((p) => p.getName())).toEqual(policies.map((p) => p.name));
  });

  it('fails a first preview that adds a second notification to the bucket', async () => {
    const bucket = urnOf({ type: T.bucket, name: 'documents' });
    const second = {
      type: T.notification,
      name: 'documents-again',
      props: {
        bucket: UNKNOWN,
        topic: UNKNOWN,
        eventTypes: ['OBJECT_FINALIZE'],
        payloadFormat: 'JSON_API_V1',
      },
      propertyDependencies: { bucket: [bucket] },
    };
    const response = await new Promise<analyzer.AnalyzeResponse>((resolve, reject) =>
      client.analyzeStack(stackRequest(add(validStack('preview'), second)), (error, r) =>
        error ? reject(error) : resolve(r),
      ),
    );
    const diagnostics = decode(response, policies).map((d) => [d.policyName, d.enforcementLevel]);
    expect(diagnostics).toEqual([
      ['one-notification-per-bucket', 'mandatory'],
      // The live rule finds no credentials in this process and says so.
      ['live-bucket-notifications-unchecked', 'advisory'],
    ]);
  });

  it('blocks a notification that would be replaced create-before-delete, and passes one replaced delete-first', async () => {
    const notification = validStack('preview').find((r) => r.type === T.notification)!;
    const analyze = (options: { deleteBeforeReplace?: boolean }) =>
      new Promise<analyzer.AnalyzeResponse>((resolve, reject) =>
        client.analyze(resourceRequest({ ...notification, options }), (error, r) =>
          error ? reject(error) : resolve(r),
        ),
      );
    const policyDiagnostics = (response: analyzer.AnalyzeResponse) =>
      decode(response, policies)
        .filter((d) => !d.policyName.startsWith('live-bucket-notifications'))
        .map((d) => [d.policyName, d.enforcementLevel]);

    expect(policyDiagnostics(await analyze({}))).toEqual([
      ['notification-delete-before-replace', 'mandatory'],
    ]);
    expect(policyDiagnostics(await analyze({ deleteBeforeReplace: true }))).toEqual([]);
  });
});
