/**
 * The stack under the real Pulumi engine. The CLI is the pinned v3.276.0 built by
 * scripts/install-pulumi.sh; the engine, the CLI, the policy analyzer protocol, config typing and
 * state are real; the language host (language-host.ts) and the providers (provider.ts) are
 * stand-ins on PATH. Each run works in a temporary copy of the checkout on a file:// backend.
 */
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const REPO = path.resolve(__dirname, '../../..');
const PULUMI = path.join(REPO, '.tools/bin/pulumi');
const COPIED = [
  'Pulumi.yaml',
  'Pulumi.dev.yaml',
  'Pulumi.prod.yaml',
  'package-lock.json',
  'package.json',
  'tsconfig.json',
  'infra',
  'policies',
  'worker',
  // One of the image's sources (IMAGE_SOURCES in infra/components/worker-image.ts): its content tag hashes it.
  'scripts/install-en16931.sh',
];

/** How every preview and up that checks the policies names the pack (as the workflows do). */
const PACK = ['--policy-pack', 'policies'];

type Props = Record<string, unknown>;

/** The data-bearing resources of a state: their types are DATA_TYPES, less views and the memo cache. */
function dataResources<R extends { urn: string; type: string; inputs?: Props }>(resources: R[]): R[] {
  return resources.filter(
    (r) =>
      DATA_TYPES.has(r.type) &&
      // Views hold no data; the documents bucket does, the memo bucket is a cache.
      !(r.type === 'gcp:bigquery/table:Table' && r.inputs?.view) &&
      !(r.type === 'gcp:storage/bucket:Bucket' && /memo/.test(r.urn)),
  );
}

type StateResource = { urn: string; type: string; protect?: boolean; inputs?: Props };

/** The resources of the stack's state, as `pulumi stack export` prints them. */
function exported(ws: Workspace, stack: string): StateResource[] {
  const state = JSON.parse(ok(ws.pulumi(['stack', 'export', '-s', stack])).stdout) as {
    deployment: { resources?: StateResource[] };
  };
  return state.deployment.resources ?? [];
}

/** The resources that hold documents or rows: destroy and a rename must never take them. */
const DATA_TYPES = new Set([
  'gcp:storage/bucket:Bucket',
  'gcp:bigquery/dataset:Dataset',
  'gcp:bigquery/table:Table',
  'gcp:logging/projectBucketConfig:ProjectBucketConfig',
]);

interface Workspace {
  dir: string;
  /** The URNs the engine has asked a provider to delete so far. */
  deleted(): string[];
  /** Has the providers answer that these resources are gone, as if deleted outside Pulumi ([] undoes it). */
  goneOutsidePulumi(urns: string[]): void;
  pulumi(args: string[]): { status: number | null; stdout: string; stderr: string; output: string };
}

/** A copy of the checkout (node_modules linked) with its own file:// backend and PULUMI_HOME. */
function workspace(edit?: (dir: string) => void): Workspace {
  const root = mkdtempSync(path.join(tmpdir(), 'docline-engine-'));
  const dir = path.join(root, 'checkout');
  for (const entry of COPIED) {
    cpSync(path.join(REPO, entry), path.join(dir, entry), {
      recursive: true,
      filter: (src) => !src.includes(`${path.sep}node_modules`),
    });
  }
  symlinkSync(path.join(REPO, 'node_modules'), path.join(dir, 'node_modules'));
  edit?.(dir);
  const env: NodeJS.ProcessEnv = {
    PATH: `${path.join(REPO, 'infra/test/engine/bin')}:${path.join(REPO, 'node_modules/.bin')}:${process.env.PATH ?? ''}`,
    HOME: root,
    PULUMI_HOME: path.join(root, 'pulumi-home'),
    PULUMI_BACKEND_URL: `file://${path.join(root, 'state')}`,
    PULUMI_CONFIG_PASSPHRASE: 'engine-suite',
    PULUMI_SKIP_UPDATE_CHECK: 'true',
    // Never reach for a plugin download: every plugin is a stand-in on PATH.
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: 'true',
    PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK: 'true',
    // The provider stand-ins append the URN of every resource the engine asks them to delete.
    DOCLINE_STANDIN_DELETES: path.join(root, 'deletes.log'),
    // The URNs of resources deleted outside Pulumi (by gcloud, say): the stand-ins' read finds them gone.
    DOCLINE_STANDIN_GONE: path.join(root, 'gone.log'),
  };
  mkdirSync(path.join(root, 'state'));
  return {
    dir,
    deleted() {
      const log = env.DOCLINE_STANDIN_DELETES as string;
      return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];
    },
    goneOutsidePulumi(urns) {
      writeFileSync(env.DOCLINE_STANDIN_GONE as string, urns.join('\n'));
    },
    pulumi(args) {
      const res = spawnSync(PULUMI, [...args, '--non-interactive'], {
        cwd: dir,
        env,
        encoding: 'utf8',
        timeout: 540_000,
        // `up --json` streams every engine event, debug ones included: far past the 1 MiB default.
        maxBuffer: 512 * 1024 * 1024,
      });
      return {
        status: res.status,
        stdout: res.stdout,
        stderr: res.stderr,
        output: `${res.stdout}\n${res.stderr}`,
      };
    },
  };
}

/** The first preview of the dev stack in a workspace that `edit` changed, removed afterwards. */
function firstPreview(edit: (dir: string) => void, ...flags: string[]): ReturnType<Workspace['pulumi']> {
  const ws = workspace(edit);
  try {
    ok(ws.pulumi(['stack', 'init', 'dev']));
    return ws.pulumi(['preview', '-s', 'dev', ...flags]);
  } finally {
    rmSync(path.dirname(ws.dir), { recursive: true, force: true });
  }
}

/** Fails with the command's own output when it did not succeed. */
function ok<T extends { status: number | null; output: string }>(res: T): T {
  if (res.status !== 0) throw new Error(`pulumi exited ${res.status}:\n${res.output.slice(-4000)}`);
  return res;
}

/** The change summary of `pulumi preview --json`. */
function changes(stdout: string): Record<string, number> {
  return (JSON.parse(stdout) as { changeSummary?: Record<string, number> }).changeSummary ?? {};
}

/** The steps the engine took on the documents bucket's notification, from `pulumi up --json`'s event stream. */
function notificationSteps(stdout: string, stack = 'dev'): Array<{ sequence: number; op: string }> {
  const steps: Array<{ sequence: number; op: string }> = [];
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    const event = JSON.parse(line) as {
      sequence: number;
      resourcePreEvent?: { metadata: { op: string; urn: string } };
    };
    const meta = event.resourcePreEvent?.metadata;
    if (meta?.urn.endsWith(`::docline-${stack}-delivery-notification`))
      steps.push({ sequence: event.sequence, op: meta.op });
  }
  return steps;
}

function changed(summary: Record<string, number>): number {
  return Object.entries(summary)
    .filter(([op]) => op !== 'same' && op !== 'read')
    .reduce((sum, [, n]) => sum + n, 0);
}

/** Fails unless a preview of the stack (with the pack) plans no change to its resources. */
function expectNoChange(ws: Workspace, stack: string): void {
  const summary = changes(ok(ws.pulumi(['preview', '-s', stack, ...PACK, '--json'])).stdout);
  expect(summary.same).toBeGreaterThan(50);
  expect(changed(summary)).toBe(0);
}

/** A URN docs/deploy.md tells users to pass (its `STACK` replaced), found by the resource name it ends with. */
function documentedUrn(stack: string, name: string): string {
  const docs = readFileSync(path.join(REPO, 'docs/deploy.md'), 'utf8');
  const urn = docs.match(new RegExp(`'(urn:pulumi:STACK::[^']*::docline-STACK-${name})'`))?.[1];
  if (!urn) throw new Error(`docs/deploy.md names no URN ending in docline-STACK-${name}`);
  return urn.replaceAll('STACK', stack);
}

describe('the dev stack under the real engine', () => {
  const ws = workspace();
  afterAll(() => rmSync(path.dirname(ws.dir), { recursive: true, force: true }));

  it('pulumi preview --policy-pack policies (as preview.yml runs it) plans the whole stack', () => {
    ok(ws.pulumi(['stack', 'init', 'dev']));
    const preview = ws.pulumi(['preview', '-s', 'dev', ...PACK, '--json']);
    expect(preview.stderr).not.toMatch(/Unable to compile TypeScript/);
    ok(preview);
    expect(changes(preview.stdout).create).toBeGreaterThan(50);
  });

  it('pulumi up creates it, and a second preview plans 0 changes', () => {
    const up = ok(ws.pulumi(['up', '-s', 'dev', '--yes', '--skip-preview', ...PACK]));
    expect(up.output).toMatch(/\d+ created/);
    expectNoChange(ws, 'dev');
  });

  it('pulumi stack output answers what docs/deploy.md reads (bucketName, and viewIds as --json)', () => {
    const bucket = ok(ws.pulumi(['stack', 'output', '-s', 'dev', 'bucketName'])).stdout.trim();
    expect(bucket).toMatch(/^docline-dev-/);
    // The CLI takes a top-level name only ('viewIds.documents' is "no output property"): the docs
    // read the map with --json, as here.
    const views = JSON.parse(
      ok(ws.pulumi(['stack', 'output', '-s', 'dev', 'viewIds', '--json'])).stdout,
    ) as Props;
    expect(views.documents).toMatch(/\.documents$/);
  });

  it('a rename of the components that hold data keeps the data: the engine follows the aliases, nothing is replaced', () => {
    // A refactor renames the components (new URNs for every child). dev has no protection and a
    // forceDestroy bucket: without the aliases the engine would create new, empty data resources
    // and delete the old ones, documents included.
    const index = path.join(ws.dir, 'infra/index.ts');
    const source = readFileSync(index, 'utf8');
    // The component names as index.ts spells them (a template literal in its source).
    const nameOf = (suffix: string) => ['`$', '{prefix}-', suffix, '`,'].join('');
    const renamed = source
      .replace(nameOf('documents'), nameOf('uploads'))
      .replace(nameOf('warehouse'), nameOf('rows'))
      .replace(nameOf('logs'), nameOf('lines'));
    expect(['uploads', 'rows', 'lines'].map((n) => renamed.includes(nameOf(n)))).toEqual([true, true, true]);
    writeFileSync(index, renamed);
    try {
      const preview = ok(ws.pulumi(['preview', '-s', 'dev', '--json']));
      // The steps the preview plans (resources that stay the same are not listed).
      const steps =
        (JSON.parse(preview.stdout) as { steps?: Array<{ op: string; urn: string }> }).steps ?? [];
      const typeOf = (urn: string) => urn.split('::')[2]?.split('$').pop() ?? '';
      const views = /-(documents|duplicate-objects|delivery-stats|duplicate-invoices)$/;
      // The rename took effect: the views (not aliased, they hold no data) move to the new name.
      expect(steps.some((s) => s.op === 'create' && /::docline-dev-rows-documents$/.test(s.urn))).toBe(true);
      const data = steps.filter(
        (s) => DATA_TYPES.has(typeOf(s.urn)) && !views.test(s.urn) && !/memo/.test(s.urn),
      );
      expect(data.map((s) => `${s.op} ${s.urn.split('::').pop()}`)).toEqual([]);
    } finally {
      writeFileSync(index, source);
    }
  });

  it('a config change that replaces the notification deletes the old one before creating the new one', () => {
    // A new project changes the topic's id, an input of the notification, which has no update.
    ok(ws.pulumi(['config', 'set', '-s', 'dev', 'gcp:project', 'docline-dev-other']));
    const up = ok(ws.pulumi(['up', '-s', 'dev', '--yes', '--skip-preview', '--json']));
    const steps = notificationSteps(up.stdout);
    const deleted = steps.find((s) => s.op === 'delete-replaced');
    const created = steps.find((s) => s.op === 'create-replacement');
    expect(deleted).toBeDefined();
    expect(created).toBeDefined();
    // The engine's own step order: never two notifications on the bucket, not even during the update.
    expect(deleted?.sequence).toBeLessThan(created?.sequence ?? -1);
  });

  it('pulumi destroy removes it (dev keeps no protected resource)', () => {
    const destroy = ok(ws.pulumi(['destroy', '-s', 'dev', '--yes', '--skip-preview']));
    expect(destroy.output).toMatch(/\d+ deleted/);
  });
});

describe('the prod stack under the real engine', () => {
  const ws = workspace();
  afterAll(() => rmSync(path.dirname(ws.dir), { recursive: true, force: true }));
  // What deploy.yml passes as docline:image: the digest CI built once and promoted after dev.
  const promoted = `europe-west1-docker.pkg.dev/docline-prod-example/docline-images/worker@sha256:${'ef'.repeat(32)}`;

  it('a first preview without an image is refused with the promoted-image message', () => {
    ok(ws.pulumi(['stack', 'init', 'prod']));
    const preview = ws.pulumi(['preview', '-s', 'prod', ...PACK]);
    expect(preview.status).not.toBe(0);
    expect(preview.output).toMatch(/promotedImage is true but no image is set and none is deployed yet/);
  });

  it('pulumi up with the promoted image, then a preview without it is a no-op (read through the self reference)', () => {
    ok(ws.pulumi(['config', 'set', '-s', 'prod', 'docline:image', promoted]));
    const up = ok(ws.pulumi(['up', '-s', 'prod', '--yes', '--skip-preview', ...PACK]));
    expect(up.output).toMatch(/\d+ created/);
    ok(ws.pulumi(['config', 'rm', '-s', 'prod', 'docline:image']));
    expectNoChange(ws, 'prod');
  });

  it('the dedupKeyMode drain as docs/deploy.md walks it: refused against the deployed value, up --refresh once allowed re-creates the notification deleted in step 1, an allowance left in place is refused', () => {
    const notification = exported(ws, 'prod').find((r) =>
      r.urn.endsWith('::docline-prod-delivery-notification'),
    );
    expect(notification).toBeDefined();
    // Step 1: the notification is deleted outside Pulumi (gcloud storage buckets notifications delete).
    ws.goneOutsidePulumi([notification!.urn]);
    // Step 3, as a user types it.
    ok(ws.pulumi(['config', 'set', '-s', 'prod', 'docline:dedupKeyMode', 'message']));
    const refused = ws.pulumi(['preview', '-s', 'prod', ...PACK]);
    expect(refused.status).not.toBe(0);
    expect(refused.output).toMatch(/dedupKeyMode is deployed as object and now set to message/);
    ok(ws.pulumi(['config', 'set', '-s', 'prod', 'docline:allowKnobChange', 'dedupKeyMode']));
    const up = ok(ws.pulumi(['up', '-s', 'prod', '--refresh', '--yes', '--skip-preview', ...PACK, '--json']));
    // Without --refresh the engine still believes in the notification and the bucket stays unannounced.
    expect(notificationSteps(up.stdout, 'prod').map((s) => s.op)).toContain('create');
    ws.goneOutsidePulumi([]);
    // Step 4.
    const left = ws.pulumi(['preview', '-s', 'prod', ...PACK]);
    expect(left.status).not.toBe(0);
    expect(left.output).toMatch(/allowKnobChange names dedupKeyMode, which does not change/);
    ok(ws.pulumi(['config', 'rm', '-s', 'prod', 'docline:allowKnobChange']));
    expect(changed(changes(ok(ws.pulumi(['preview', '-s', 'prod', '--json'])).stdout))).toBe(0);
  });

  it('a new table version, as docs/deploy.md walks it: the old table leaves the state and is never deleted, and going back is refused', () => {
    const old = documentedUrn('prod', 'warehouse-table');
    const next = documentedUrn('prod', 'warehouse-table-v2');
    expect(ok(ws.pulumi(['stack', '-s', 'prod', '--show-urns'])).stdout).toContain(old);
    ok(ws.pulumi(['state', 'unprotect', '-s', 'prod', old, '--yes']));
    ok(ws.pulumi(['config', 'set', '-s', 'prod', 'docline:tableVersion', '2']));
    ok(ws.pulumi(['up', '-s', 'prod', '--yes', '--skip-preview', '--target', next]));
    expect(exported(ws, 'prod').map((r) => r.urn)).toEqual(expect.arrayContaining([old, next]));
    ok(ws.pulumi(['up', '-s', 'prod', '--yes', '--skip-preview', ...PACK]));
    const urns = exported(ws, 'prod').map((r) => r.urn);
    expect(urns).toContain(next);
    expect(urns).not.toContain(old);
    // retainOnDelete: the engine drops the old table from its state without asking the provider.
    expect(ws.deleted()).not.toContain(old);
    ok(ws.pulumi(['config', 'set', '-s', 'prod', 'docline:tableVersion', '1']));
    const back = ws.pulumi(['preview', '-s', 'prod']);
    expect(back.status).not.toBe(0);
    expect(back.output).toMatch(/tableVersion is deployed as 2 and now set to 1/);
    ok(ws.pulumi(['config', 'set', '-s', 'prod', 'docline:tableVersion', '2']));
  });

  it('pulumi destroy is stopped by protect on the data-bearing resources', () => {
    const destroy = ws.pulumi(['destroy', '-s', 'prod', '--yes', '--skip-preview']);
    expect(destroy.status).not.toBe(0);
    expect(destroy.output).toMatch(/protected/);
    // The engine's own state says which resources it protects: every data-bearing one must be.
    const data = dataResources(exported(ws, 'prod'));
    expect([...new Set(data.map((r) => r.type))].sort()).toEqual([...DATA_TYPES].sort());
    // The accountants' corrections are kept like the rows they correct.
    expect(data.map((r) => r.urn.split('::').pop())).toContain('docline-prod-warehouse-corrections');
    expect(data.filter((r) => r.protect !== true).map((r) => r.urn)).toEqual([]);
  });

  it('pulumi state unprotect --all, then destroy: everything goes but the data, which the engine never asks to delete', () => {
    const data = dataResources(exported(ws, 'prod')).map((r) => r.urn);
    ok(ws.pulumi(['state', 'unprotect', '-s', 'prod', '--all', '--yes']));
    const destroy = ok(ws.pulumi(['destroy', '-s', 'prod', '--yes', '--skip-preview']));
    expect(destroy.output).toMatch(/\d+ deleted/);
    expect(exported(ws, 'prod')).toEqual([]);
    expect(ws.deleted().length).toBeGreaterThan(50);
    expect(ws.deleted().filter((urn) => data.includes(urn))).toEqual([]);
  });
});

describe('the checks can fail', () => {
  it('a program with a second notification on the documents bucket fails the preview on the mandatory policy', () => {
    const preview = firstPreview(
      (dir) => {
        // The fixture: the delivery component announces the bucket's uploads a second time.
        const file = path.join(dir, 'infra/components/delivery.ts');
        const source = readFileSync(file, 'utf8');
        const anchor = '    this.registerOutputs({';
        if (!source.includes(anchor)) throw new Error('fixture anchor not found in delivery.ts');
        writeFileSync(
          file,
          source.replace(
            anchor,
            `    new gcp.storage.Notification(\`\${name}-second-notification\`, {
      bucket: args.bucketName,
      topic: args.topic,
      payloadFormat: NOTIFICATION_PAYLOAD_FORMAT,
      eventTypes: [NOTIFIED_EVENT_TYPE],
    }, { ...this.child, deleteBeforeReplace: true });
${anchor}`,
          ),
        );
      },
      ...PACK,
    );
    expect(preview.status).not.toBe(0);
    expect(preview.output).toMatch(/one-notification-per-bucket/);
    expect(preview.output).toMatch(/mandatory/);
  });

  it('a stack file that still sets a key that became a constant is refused at preview, saying what to do', () => {
    // As Pulumi.prod.yaml did before the retry policy became a constant.
    const preview = firstPreview((dir) =>
      writeFileSync(
        path.join(dir, 'Pulumi.dev.yaml'),
        `${readFileSync(path.join(dir, 'Pulumi.dev.yaml'), 'utf8')}  docline:maxDeliveryAttempts: 100\n`,
      ),
    );
    expect(preview.status).not.toBe(0);
    expect(preview.output).toMatch(
      /maxDeliveryAttempts is not a setting: .*Remove docline:maxDeliveryAttempts from the stack file\./,
    );
  });

  it('without infra/tsconfig.json (the compile fix reverted), the first preview fails to compile', () => {
    const preview = firstPreview((dir) => rmSync(path.join(dir, 'infra/tsconfig.json')), ...PACK);
    expect(preview.status).not.toBe(0);
    expect(preview.output).toMatch(/Unable to compile TypeScript/);
    expect(preview.output).toMatch(/TS2550/);
  });
});
