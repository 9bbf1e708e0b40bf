/**
 * A stand-in for the Node language host (`pulumi-language-nodejs`), whose Go module the Go module
 * proxy refuses. The engine starts it from PATH as `pulumi-language-nodejs [flags]
 * ENGINE_ADDRESS`, reads the port it prints, and calls the LanguageRuntime service over gRPC.
 *
 * `Run` starts the Node SDK's own program runner (`@pulumi/pulumi/cmd/run`, resolved from the
 * program's directory) the way the real host does (sdk/nodejs/cmd/pulumi-language-nodejs in
 * pulumi/pulumi): working directory = the `pwd` the engine sends, arguments --monitor/--engine/
 * --organization/--project/--stack/--pwd/--dry-run/--parallel and the program, configuration in
 * PULUMI_CONFIG and PULUMI_CONFIG_SECRET_KEYS, and PULUMI_NODEJS_TYPESCRIPT (plus
 * PULUMI_NODEJS_TSCONFIG_PATH) from Pulumi.yaml's runtime options. Exit code 32 is the runner's
 * "error already reported", answered as a bail. Its behaviour is the reference; its code is not copied.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';

// biome-ignore lint/suspicious/noExplicitAny: the generated modules, their messages and requests carry no types
type Untyped = any;
const languageGrpc: Untyped = require('@pulumi/pulumi/proto/language_grpc_pb.js');
const languagePb: Untyped = require('@pulumi/pulumi/proto/language_pb.js');
const pluginPb: Untyped = require('@pulumi/pulumi/proto/plugin_pb.js');

const VERSION = '3.276.0';
/** The runner's exit code for "the error is already reported" (cmd/run). */
const BAIL_EXIT_CODE = 32;

const engineAddress = process.argv.slice(2).find((arg) => !arg.startsWith('-')) ?? '';

function runtimeOptions(info: Untyped): Record<string, unknown> {
  const options = info?.getOptions?.();
  return options ? (options.toJavaScript() as Record<string, unknown>) : {};
}

function run(call: Untyped, callback: grpc.sendUnaryData<unknown>): void {
  const req = call.request;
  const pwd: string = req.getPwd() || process.cwd();
  const options = runtimeOptions(req.getInfo());
  const config: Record<string, string> = {};
  req.getConfigMap().forEach((value: string, key: string) => {
    config[key] = value;
  });
  let runner: string;
  try {
    runner = path.dirname(require.resolve('@pulumi/pulumi/cmd/run/index.js', { paths: [pwd] }));
  } catch (err) {
    callback(
      null,
      new languagePb.RunResponse().setError(`could not find @pulumi/pulumi from ${pwd}: ${err}`),
    );
    return;
  }
  const args = [runner, `--monitor=${req.getMonitorAddress()}`];
  if (engineAddress) args.push(`--engine=${engineAddress}`);
  if (req.getOrganization()) args.push(`--organization=${req.getOrganization()}`);
  args.push(`--project=${req.getProject()}`, `--stack=${req.getStack()}`, `--pwd=${pwd}`);
  if (req.getDryrun()) args.push('--dry-run');
  if (req.getQuerymode()) args.push('--query-mode');
  if (req.getParallel() > 0) args.push(`--parallel=${req.getParallel()}`);
  args.push(req.getProgram() || '.', ...req.getArgsList());
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PULUMI_CONFIG: JSON.stringify(config),
    PULUMI_CONFIG_SECRET_KEYS: JSON.stringify(req.getConfigsecretkeysList()),
    PULUMI_NODEJS_TYPESCRIPT: options.typescript === false ? 'false' : 'true',
  };
  if (typeof options.tsconfig === 'string') env.PULUMI_NODEJS_TSCONFIG_PATH = options.tsconfig;
  const child = spawn(process.execPath, args, { cwd: pwd, env, stdio: ['ignore', 'inherit', 'inherit'] });
  child.on('error', (err) => callback(null, new languagePb.RunResponse().setError(String(err))));
  child.on('exit', (code, signal) => {
    const res = new languagePb.RunResponse();
    if (code === 0) callback(null, res);
    else if (code === BAIL_EXIT_CODE) callback(null, res.setBail(true));
    else callback(null, res.setError(`Program exited with non-zero exit code: ${code ?? signal}`));
  });
}

/**
 * A plugin written in Node, the policy pack above all (kind `analyzer`): the real host starts the
 * SDK's `cmd/run-policy-pack` for an analyzer and `cmd/run-plugin` otherwise, in the plugin's
 * directory with the engine's arguments and environment, and streams its output back.
 */
function runPlugin(call: Untyped): void {
  const req = call.request;
  const pwd: string = req.getPwd() || process.cwd();
  const entry = req.getKind() === 'analyzer' ? 'run-policy-pack' : 'run-plugin';
  let runner: string;
  try {
    runner = path.dirname(require.resolve(`@pulumi/pulumi/cmd/${entry}/index.js`, { paths: [pwd] }));
  } catch (err) {
    call.write(
      new languagePb.RunPluginResponse().setStderr(
        Buffer.from(`could not find @pulumi/pulumi from ${pwd}: ${err}\n`),
      ),
    );
    call.write(new languagePb.RunPluginResponse().setExitcode(1));
    call.end();
    return;
  }
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const pair of req.getEnvList() as string[]) {
    const at = pair.indexOf('=');
    if (at > 0) env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  const program: string = req.getInfo()?.getProgramDirectory() || req.getProgram() || pwd;
  // The pack runs from its own directory (its package.json names its version), as program `.`.
  const child = spawn(process.execPath, [runner, ...req.getArgsList(), '.'], {
    cwd: program,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (d: Buffer) => call.write(new languagePb.RunPluginResponse().setStdout(d)));
  child.stderr?.on('data', (d: Buffer) => call.write(new languagePb.RunPluginResponse().setStderr(d)));
  child.on('exit', (code) => {
    call.write(new languagePb.RunPluginResponse().setExitcode(code ?? 1));
    call.end();
  });
}

const server = new grpc.Server();
server.addService(languageGrpc.LanguageRuntimeService, {
  handshake(_call: Untyped, cb: grpc.sendUnaryData<unknown>) {
    cb(null, new languagePb.LanguageHandshakeResponse());
  },
  getPluginInfo(_call: Untyped, cb: grpc.sendUnaryData<unknown>) {
    cb(null, new pluginPb.PluginInfo().setVersion(VERSION));
  },
  // The engine loads each provider when the program first needs it, from PATH or its cache.
  getRequiredPlugins(_call: Untyped, cb: grpc.sendUnaryData<unknown>) {
    cb(null, new languagePb.GetRequiredPluginsResponse());
  },
  getRequiredPackages(_call: Untyped, cb: grpc.sendUnaryData<unknown>) {
    cb(null, new languagePb.GetRequiredPackagesResponse());
  },
  // Dependencies are the checkout's own (`npm ci`); nothing to install.
  installDependencies(call: Untyped) {
    call.end();
  },
  about(_call: Untyped, cb: grpc.sendUnaryData<unknown>) {
    cb(null, new languagePb.AboutResponse().setExecutable(process.execPath).setVersion(process.version));
  },
  run,
  runPlugin,
});
server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) {
    console.error(`pulumi-language-nodejs stand-in: ${err.message}`);
    process.exit(1);
  }
  // The engine reads the port from the first line of stdout.
  process.stdout.write(`${port}\n`);
});
