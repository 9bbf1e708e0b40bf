/**
 * Runs infra/ under the Pulumi Node SDK's own program runner (`@pulumi/pulumi/cmd/run`), the module
 * the Node language host starts for `pulumi preview` and `pulumi up`, with the arguments and the
 * working directory the engine gives it for `main: infra/` (cwd = infra/, program `.`).
 *
 * The mocks (harness.ts) load the program through jest's transform and never reach this step: the
 * runner compiles the program with ts-node and the tsconfig.json it finds in its working
 * directory, and without one there it compiles with ts-node's defaults (TS2550 on the ES2021+ APIs it uses).
 *
 * The runner is pointed at a resource monitor served here: it answers the root stack's
 * registration, and the first resource the program itself registers is the proof that the program
 * compiled and ran; the run stops there. Everything after that is the engine's job (`npm run test:engine`), not this check's.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';

// The generated gRPC code that ships in @pulumi/pulumi (CommonJS, no types for the _grpc_pb files).
// biome-ignore lint/suspicious/noExplicitAny: the generated modules, their messages and requests carry no types
type Untyped = any;
const resourceGrpc: Untyped = require('@pulumi/pulumi/proto/resource_grpc_pb.js');
const resourcePb: Untyped = require('@pulumi/pulumi/proto/resource_pb.js');

const REPO = path.resolve(__dirname, '../../..');
const NODE = path.join(REPO, 'node_modules/.bin/node');
const RUNNER = path.join(REPO, 'node_modules/@pulumi/pulumi/cmd/run');

const STOP = 'runner check: the program compiled and ran; stopping here';

export interface RunnerOutcome {
  /** Type of the first resource the program registered, or undefined when it never registered one. */
  firstResourceType: string | undefined;
  /** Everything the runner printed (stdout and stderr). */
  output: string;
}

/** Runs the program in `programDir` (infra/ by default) the way the engine does, with `config` as PULUMI_CONFIG. */
export async function runUnderRunner(
  config: Record<string, string>,
  options: { programDir?: string } = {},
): Promise<RunnerOutcome> {
  const programDir = options.programDir ?? path.join(REPO, 'infra');
  let child: ChildProcess | undefined;
  let firstResourceType: string | undefined;
  const server = new grpc.Server();
  const firstRegistration = new Promise<void>((resolve) => {
    server.addService(resourceGrpc.ResourceMonitorService, {
      supportsFeature(_call: Untyped, callback: grpc.sendUnaryData<unknown>) {
        callback(null, new resourcePb.SupportsFeatureResponse().setHassupport(false));
      },
      registerResource(call: Untyped, callback: grpc.sendUnaryData<unknown>) {
        const type: string = call.request.getType();
        const name: string = call.request.getName();
        if (type === 'pulumi:pulumi:Stack') {
          callback(
            null,
            new resourcePb.RegisterResourceResponse().setUrn(`urn:pulumi:dev::docline::${type}::${name}`),
          );
          return;
        }
        firstResourceType ??= type;
        callback({ code: grpc.status.ABORTED, details: STOP });
        resolve();
      },
      // A StackReference (infra/stack-guards.ts reads the stack's own outputs) is read, not registered.
      readResource(call: Untyped, callback: grpc.sendUnaryData<unknown>) {
        firstResourceType ??= call.request.getType();
        callback({ code: grpc.status.ABORTED, details: STOP });
        resolve();
      },
    });
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, bound) =>
      err ? reject(err) : resolve(bound),
    ),
  );
  let output = '';
  try {
    const exited = new Promise<void>((resolve) => {
      child = spawn(
        NODE,
        [
          RUNNER,
          `--monitor=127.0.0.1:${port}`,
          // A file backend's organization, as the engine passes it.
          '--organization=organization',
          '--project=docline',
          '--stack=dev',
          '--dry-run',
          `--pwd=${programDir}`,
          '.',
        ],
        {
          cwd: programDir,
          env: {
            PATH: process.env.PATH ?? '',
            HOME: process.env.HOME ?? '',
            PULUMI_CONFIG: JSON.stringify(config),
            // Set by the Node language host from Pulumi.yaml's `runtime.options.typescript` (default true).
            PULUMI_NODEJS_TYPESCRIPT: 'true',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      child.stdout?.on('data', (d: Buffer) => {
        output += d.toString();
      });
      child.stderr?.on('data', (d: Buffer) => {
        output += d.toString();
      });
      child.on('exit', () => resolve());
    });
    // Either the program registers its first resource (compiled and ran) or the runner exits first.
    await Promise.race([firstRegistration, exited]);
    child?.kill('SIGKILL');
    await exited;
  } finally {
    server.forceShutdown();
  }
  return { firstResourceType, output };
}
