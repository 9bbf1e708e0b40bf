/**
 * The image's content tag names the same image on any machine: it hashes the names and bytes of what
 * the Dockerfile copies, never mode bits or timestamps (docker-build's own context hash includes mode
 * bits, which depend on the umask at checkout, pulumi/pulumi-docker-build#979).
 */
import { chmodSync, cpSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
});
