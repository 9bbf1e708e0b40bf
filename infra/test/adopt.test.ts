/**
 * The import document that re-adopts a kept stack's data names exactly what the program keeps on
 * destroy, under the logical names, types and parents it registers, with the ids Google gives them.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { adoptionImport } from '../adopt';
import { TABLE_ID } from '../components/warehouse';
import { type ProgramRun, runStack } from './harness';

const ROOT = join(__dirname, '..', '..');

describe('adoptionImport', () => {
  const check = async (run: ProgramRun, tableVersion: number) => {
    const retained = run.resources.filter(
      (r) => r.options.retainOnDelete && r.type !== 'docker-build:index:Image',
    );
    const bucket = retained.find((r) => r.type === 'gcp:storage/bucket:Bucket')!;
    const { resources } = adoptionImport({
      project: 'docline-prod-example',
      stack: 'prod',
      region: 'europe-west1',
      bucket: String(bucket.outputs.name),
      tableVersion,
    });
    const byName = new Map(resources.map((e) => [e.name, e]));
    const adopted = resources.filter((e) => !e.component);

    // Exactly the retained resources, by type and logical name.
    expect(adopted.map((e) => `${e.type} ${e.name}`).sort()).toEqual(
      retained.map((r) => `${r.type} ${r.name}`).sort(),
    );
    for (const resource of retained) {
      const entry = byName.get(resource.name)!;
      const parent = run.resources.find((r) => r.urn === resource.parent)!;
      // Under the same component (type and name), itself under the stack: the same URN as before.
      expect([entry.parent, byName.get(entry.parent!)?.type]).toEqual([parent.name, parent.type]);
      expect(byName.get(entry.parent!)?.component).toBe(true);
      expect(parent.parent).toMatch(/pulumi:pulumi:Stack::docline-prod$/);
    }
    return byName;
  };

  it('adopts the documents bucket, the dataset, the table and the log bucket of a kept stack', async () => {
    const run = await runStack('prod');
    const byName = await check(run, 1);
    expect(byName.get('docline-prod-warehouse-dataset')?.id).toBe(
      'projects/docline-prod-example/datasets/docline_prod',
    );
    expect(byName.get('docline-prod-warehouse-table')?.id).toBe(
      `projects/docline-prod-example/datasets/docline_prod/tables/${TABLE_ID}`,
    );
    expect(byName.get('docline-prod-logs-bucket')?.id).toBe(
      'projects/docline-prod-example/locations/europe-west1/buckets/docline-prod-logs',
    );
    const bucket = run.resources.find((r) => r.name === 'docline-prod-documents-bucket')!;
    expect(byName.get('docline-prod-documents-bucket')?.id).toBe(bucket.outputs.name);
  });

  it('follows the table version', async () => {
    const run = await runStack('prod', { 'docline:tableVersion': '3' });
    const byName = await check(run, 3);
    expect(byName.get('docline-prod-warehouse-table-v3')?.id).toBe(
      `projects/docline-prod-example/datasets/docline_prod/tables/${TABLE_ID}_v3`,
    );
  });

  it('prints the document, and refuses missing arguments with exit code 2', async () => {
    const run = promisify(execFile);
    const script = ['--import', 'tsx', 'infra/adopt.ts'];
    const { stdout } = await run(
      process.execPath,
      [...script, '--project', 'p', '--stack', 'prod', '--region', 'europe-west1', '--bucket', 'b'],
      { cwd: ROOT },
    );
    expect(JSON.parse(stdout).resources).toHaveLength(8);
    await expect(run(process.execPath, [...script, '--project', 'p'], { cwd: ROOT })).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^ERROR: usage: .*missing: --stack, --region, --bucket/),
    });
  });
});
