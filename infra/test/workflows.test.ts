import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The GitHub workflows, parsed: what runs before a deploy, and what a preview checks. */
type Step = { id?: string; run?: string; uses?: string; with?: Record<string, unknown> };
type Workflow = { jobs: Record<string, { needs?: string | string[]; steps: Step[] }> };

const { load } = require('js-yaml') as { load(text: string): unknown };
const workflow = (name: string) =>
  load(readFileSync(join(__dirname, '..', '..', '.github', 'workflows', name), 'utf8')) as Workflow;
const upSteps = (steps: Step[]) => steps.filter((s) => s.uses?.startsWith('pulumi/actions'));
const needsOf = (job: { needs?: string | string[] }) => (Array.isArray(job.needs) ? job.needs : [job.needs]);

describe('deploy.yml', () => {
  const deploy = workflow('deploy.yml');

  it('runs npm ci && npm test in a job every pulumi up waits for', () => {
    const testJob = Object.entries(deploy.jobs).find(([, j]) =>
      j.steps.some((s) => s.run === 'npm ci && npm test'),
    );
    expect(testJob).toBeDefined();
    const [testName] = testJob!;

    expect(needsOf(deploy.jobs.dev!)).toContain(testName);
    expect(needsOf(deploy.jobs.prod!)).toContain('dev');
    for (const job of Object.values(deploy.jobs).filter((j) => upSteps(j.steps).length > 0)) {
      expect(upSteps(job.steps).every((s) => s.with?.policyPacks === 'policies')).toBe(true);
    }
  });

  it('documents the deploy identity\u2019s roles', () => {
    const text = readFileSync(join(__dirname, '..', '..', '.github', 'workflows', 'deploy.yml'), 'utf8');
    for (const role of [
      'roles/run.admin',
      'roles/iam.serviceAccountUser',
      'roles/serviceusage.serviceUsageAdmin',
    ]) {
      expect(text).toContain(role);
    }
  });
});

describe('deploy.yml, prod image', () => {
  const deploy = workflow('deploy.yml');
  const steps = deploy.jobs.prod!.steps;

  it('pushes the image to the long-lived repository outside the stack, then runs that digest', () => {
    const build = steps.findIndex((s) => s.uses?.startsWith('docker/build-push-action'));
    const up = steps.findIndex((s) => s.uses?.startsWith('pulumi/actions'));
    const image = steps[build]!;

    expect(build).toBeGreaterThan(-1);
    expect(build).toBeLessThan(up);
    expect(image.with).toMatchObject({
      context: '.',
      file: 'worker/Dockerfile',
      push: true,
      tags: expect.stringMatching(/^\$\{\{ vars\.IMAGE_REPOSITORY \}\}\/worker:/),
    });
    const configMap = load(String(steps[up]!.with?.['config-map'])) as Record<string, { value: string }>;
    expect(configMap['docline:image']?.value).toBe(
      `\${{ vars.IMAGE_REPOSITORY }}/worker@\${{ steps.${image.id}.outputs.digest }}`,
    );
  });

  it('leaves the dev stack to build its own image', () => {
    const dev = deploy.jobs.dev!.steps;
    expect(dev.some((s) => s.uses?.startsWith('docker/build-push-action'))).toBe(false);
    expect(upSteps(dev)[0]?.with?.['config-map']).toBeUndefined();
  });
});

describe('preview.yml', () => {
  it('previews with the policy pack and documents the preview identity\u2019s roles', () => {
    const preview = workflow('preview.yml');
    const steps = Object.values(preview.jobs).flatMap((j) => upSteps(j.steps));
    const text = readFileSync(join(__dirname, '..', '..', '.github', 'workflows', 'preview.yml'), 'utf8');

    expect(steps.map((s) => [s.with?.command, s.with?.policyPacks])).toEqual([['preview', 'policies']]);
    expect(text).toContain('roles/viewer');
  });
});
