/**
 * The image's content tag names the same image on any machine: it hashes the names and bytes of what
 * the Dockerfile copies, never mode bits or timestamps (docker-build's own context hash includes mode
 * bits, which depend on the umask at checkout, pulumi/pulumi-docker-build#979).
 */
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { contentTag, IMAGE_SOURCES } from '../components/worker-image';

const ROOT = join(__dirname, '..', '..');

describe('contentTag', () => {
  let copy: string;
  beforeEach(() => {
    copy = mkdtempSync(join(tmpdir(), 'docline-tag-'));
    for (const source of IMAGE_SOURCES) cpSync(join(ROOT, source), join(copy, source), { recursive: true });
  });
  afterEach(() => rmSync(copy, { recursive: true, force: true }));

  it('is the same for a checkout with other mode bits and timestamps', () => {
    const before = contentTag(copy);
    expect(before).toMatch(/^[0-9a-f]{16}$/);
    expect(before).toBe(contentTag(ROOT));
    chmodSync(join(copy, 'package.json'), 0o600);
    chmodSync(join(copy, 'worker/Dockerfile'), 0o775);
    utimesSync(join(copy, 'tsconfig.json'), new Date(0), new Date(0));
    expect(contentTag(copy)).toBe(before);
  });

  it('changes with a byte of the sources, or a renamed file', () => {
    const before = contentTag(copy);
    writeFileSync(join(copy, 'worker/src/extra.ts'), 'export {};\n');
    const added = contentTag(copy);
    expect(added).not.toBe(before);
    rmSync(join(copy, 'worker/src/extra.ts'));
    writeFileSync(join(copy, 'worker/src/extra2.ts'), 'export {};\n');
    expect(contentTag(copy)).not.toBe(added);
  });

  it("changes with the e-invoice validator's inputs: its install script (the pins) and its runner", () => {
    const files = ['scripts/install-en16931.sh', 'worker/src/adapters/e-invoice/validation/Validate.java'];
    // Present in the copy even if IMAGE_SOURCES left them out: then the tag would not see them.
    for (const file of files) cpSync(join(ROOT, file), join(copy, file));
    const before = contentTag(copy);
    for (const file of files) {
      const original = readFileSync(join(copy, file));
      writeFileSync(join(copy, file), Buffer.concat([original, Buffer.from('\n')]));
      expect([file, contentTag(copy)]).not.toEqual([file, before]);
      writeFileSync(join(copy, file), original);
      expect(contentTag(copy)).toBe(before);
    }
  });
});

/** One stage of a Dockerfile: its FROM line, and its instructions (continuations joined). */
interface Stage {
  from: string;
  name: string | undefined;
  /** Each with the WORKDIR in force where it stands. */
  instructions: Array<{ op: string; args: string; workdir: string }>;
}

function stagesOf(dockerfile: string): Stage[] {
  const stages: Stage[] = [];
  let workdir = '/';
  const lines = dockerfile
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  for (const line of lines) {
    const [, op = '', args = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    if (op.toUpperCase() === 'FROM') {
      const [from = '', , name] = args.split(/\s+/);
      stages.push({ from, name, instructions: [] });
      workdir = '/';
    } else {
      if (op.toUpperCase() === 'WORKDIR') workdir = resolvePosix(workdir, args);
      stages.at(-1)?.instructions.push({ op: op.toUpperCase(), args, workdir });
    }
  }
  return stages;
}

/** A COPY's sources and destination, resolved against the stage's WORKDIR at that point. */
function copiesOf(stage: Stage): Array<{ from: string | undefined; sources: string[]; dest: string }> {
  const copies = [];
  for (const { op, args, workdir } of stage.instructions) {
    if (op !== 'COPY') continue;
    const words = args.split(/\s+/);
    const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
    const paths = words.filter((w) => !w.startsWith('--'));
    const dest = resolvePosix(workdir, paths.at(-1)!);
    copies.push({ from, sources: paths.slice(0, -1), dest });
  }
  return copies;
}

const resolvePosix = (dir: string, path: string) => posix.resolve(dir, path).replace(/\/$/, '') || '/';

/** The stage's ENV, `KEY=VALUE` pairs (no quoting in this Dockerfile). */
function envOf(stage: Stage): Record<string, string> {
  const env: Record<string, string> = {};
  for (const { op, args } of stage.instructions)
    if (op === 'ENV')
      for (const pair of args.split(/\s+/)) {
        const [key = '', ...value] = pair.split('=');
        env[key] = value.join('=');
      }
  return env;
}

describe('worker/Dockerfile', () => {
  const dockerfile = readFileSync(join(ROOT, 'worker/Dockerfile'), 'utf8');
  const stages = stagesOf(dockerfile);
  const stage = (name: string) => stages.find((s) => s.name === name)!;
  const runtime = stages.at(-1)!;
  const runs = (s: Stage) => s.instructions.filter((i) => i.op === 'RUN').map((i) => i.args);

  it('pins every FROM by digest', () => {
    expect(stages.length).toBeGreaterThan(1);
    for (const s of stages) expect(s.from).toMatch(/^[\w.\-/:]+@sha256:[0-9a-f]{64}$/);
  });

  it('copies from the build context only what IMAGE_SOURCES hashes and the .dockerignore lets through', () => {
    const allowed = readFileSync(join(ROOT, 'worker/Dockerfile.dockerignore'), 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('!'))
      .map((l) => l.slice(1).replace(/\/\*\*$/, ''));
    const within = (file: string, roots: readonly string[]) =>
      roots.some((root) => file === root || file.startsWith(`${root}/`));
    const sources = stages.flatMap((s) =>
      copiesOf(s)
        .filter((c) => !c.from)
        .flatMap((c) => c.sources),
    );
    expect(sources).toContain('scripts/install-en16931.sh');
    expect(sources).toContain('worker/src/adapters/e-invoice/validation/Validate.java');
    for (const source of sources) {
      expect(existsSync(join(ROOT, source))).toBe(true);
      expect([source, within(source, IMAGE_SOURCES)]).toEqual([source, true]);
      expect([source, within(source, allowed)]).toEqual([source, true]);
    }
  });

  it('runs the install script CI runs, with the runner where the script looks for it', () => {
    const validator = stage('validator');
    const script = readFileSync(join(ROOT, 'scripts/install-en16931.sh'), 'utf8');
    // The script finds the runner and installs the validator relative to its own folder's parent.
    const runner = /^runner="\$repo_root\/(.+)"$/m.exec(script)![1]!;
    const target = /^target="\$repo_root\/(.+)"$/m.exec(script)![1]!;
    const run = validator.instructions.find((i) => i.op === 'RUN' && i.args.includes('install-en16931.sh'))!;
    const scriptPath = /bash (\S+install-en16931\.sh)/.exec(run.args)![1]!;
    expect(existsSync(join(ROOT, scriptPath))).toBe(true);
    // Run from the WORKDIR as `bash scripts/install-en16931.sh`: that folder is the script's repo_root.
    expect(posix.dirname(posix.dirname(posix.join('/', scriptPath)))).toBe('/');
    const repoRoot = run.workdir;
    const copies = copiesOf(validator);
    expect(copies.find((c) => c.sources.includes(scriptPath))?.dest).toBe(
      posix.join(repoRoot, posix.dirname(scriptPath)),
    );
    expect(copies.find((c) => c.sources.includes(runner))?.dest).toBe(
      posix.join(repoRoot, posix.dirname(runner)),
    );
    // Java 17+ with javac and jar, and Maven: what the script checks for.
    expect(runs(validator).join(' ')).toMatch(
      /apt-get install .*openjdk-(1[7-9]|[2-9]\d)-jdk-headless.* maven/,
    );

    // The runtime copies the folder the script installed.
    const copied = copiesOf(runtime).find((c) => c.from === 'validator')!;
    expect(copied.sources).toEqual([posix.join(repoRoot, target)]);
  });

  it('names in the runtime ENV the folder a COPY creates, and installs a JRE for it as a non-root user', () => {
    const env = envOf(runtime);
    expect(env).toMatchObject({ NODE_ENV: 'production' });
    const folder = env.EN16931_VALIDATOR!;
    expect(folder).toMatch(/^\//);
    const copied = copiesOf(runtime).find((c) => c.from === 'validator')!;
    expect(copied.dest).toBe(folder);
    expect(runs(runtime).join(' ')).toMatch(/apt-get install .*openjdk-(1[7-9]|[2-9]\d)-jre-headless/);
    const users = runtime.instructions.filter((i) => i.op === 'USER');
    expect(users.at(-1)?.args).toBe('node');
    // The JRE is installed before the switch to the unprivileged user.
    const index = (op: string) => runtime.instructions.findIndex((i) => i.op === op);
    expect(index('RUN')).toBeLessThan(index('USER'));
  });
});
