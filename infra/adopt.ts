/**
 * Writes the `pulumi import --file` document that re-adopts what a stack that keeps its data left in
 * the project on `destroy` (or when a resource left the program): the documents bucket, the dataset,
 * the table and the regional log bucket, under the logical names, types and parents the program
 * declares, with their components created empty as parents. Without it, a re-created stack would
 * fail on the fixed ids ("already exists") and watch a new, empty documents bucket.
 *
 *   node --import tsx infra/adopt.ts --project P --stack prod --region europe-west1 --bucket NAME [--table-version N]
 *
 * docs/deploy.md, "Re-adopting retained resources", has the procedure; infra/test/adopt.test.ts
 * checks the document against what the program registers.
 */
import { parseArgs } from 'node:util';
import { CORRECTIONS_TABLE } from '../worker/src/contract/corrections';
import { tableVersionNames } from './components/warehouse';

/** What identifies a stack's retained resources. */
export interface AdoptionTarget {
  readonly project: string;
  readonly stack: string;
  /** The stack's region (the log bucket lives there). */
  readonly region: string;
  /** The kept documents bucket's name (auto-named: read it from the project). */
  readonly bucket: string;
  /** The table version the stack was at. Default 1. */
  readonly tableVersion?: number;
}

/** One entry of a `pulumi import` file. */
export interface ImportEntry {
  readonly type: string;
  readonly name: string;
  readonly id?: string;
  /** The name of the entry this one is parented to (empty: the stack). */
  readonly parent?: string;
  /** An empty component created as a parent. */
  readonly component?: boolean;
}

/** The import document for a stack's retained resources (see the module comment). */
export function adoptionImport(target: AdoptionTarget): { resources: ImportEntry[] } {
  const prefix = `docline-${target.stack}`;
  const datasetId = prefix.replaceAll('-', '_');
  const documents = `${prefix}-documents`;
  const warehouse = `${prefix}-warehouse`;
  const logs = `${prefix}-logs`;
  const table = tableVersionNames(warehouse, target.tableVersion ?? 1);
  return {
    resources: [
      { type: 'docline:index:DocumentBucket', name: documents, component: true },
      { type: 'docline:index:Warehouse', name: warehouse, component: true },
      { type: 'docline:index:RegionalLogs', name: logs, component: true },
      {
        type: 'gcp:storage/bucket:Bucket',
        name: `${documents}-bucket`,
        id: target.bucket,
        parent: documents,
      },
      {
        type: 'gcp:bigquery/dataset:Dataset',
        name: `${warehouse}-dataset`,
        id: `projects/${target.project}/datasets/${datasetId}`,
        parent: warehouse,
      },
      {
        type: 'gcp:bigquery/table:Table',
        name: table.logicalName,
        id: `projects/${target.project}/datasets/${datasetId}/tables/${table.tableId}`,
        parent: warehouse,
      },
      // The accountants' corrections (a stack deployed before them has none: leave this entry out).
      {
        type: 'gcp:bigquery/table:Table',
        name: `${warehouse}-corrections`,
        id: `projects/${target.project}/datasets/${datasetId}/tables/${CORRECTIONS_TABLE}`,
        parent: warehouse,
      },
      {
        type: 'gcp:logging/projectBucketConfig:ProjectBucketConfig',
        name: `${logs}-bucket`,
        id: `projects/${target.project}/locations/${target.region}/buckets/${logs}`,
        parent: logs,
      },
    ],
  };
}

function main(): void {
  const { values } = parseArgs({
    options: {
      project: { type: 'string' },
      stack: { type: 'string' },
      region: { type: 'string' },
      bucket: { type: 'string' },
      'table-version': { type: 'string', default: '1' },
    },
  });
  const missing = (['project', 'stack', 'region', 'bucket'] as const).filter((k) => !values[k]);
  const tableVersion = Number(values['table-version']);
  if (missing.length > 0 || !Number.isInteger(tableVersion) || tableVersion < 1) {
    process.stderr.write(
      `ERROR: usage: node --import tsx infra/adopt.ts --project P --stack S --region R --bucket NAME [--table-version N]` +
        (missing.length > 0
          ? ` (missing: ${missing.map((k) => `--${k}`).join(', ')})`
          : ' (--table-version is a whole number from 1)') +
        '\n',
    );
    process.exitCode = 2;
    return;
  }
  const document = adoptionImport({
    project: values.project!,
    stack: values.stack!,
    region: values.region!,
    bucket: values.bucket!,
    tableVersion,
  });
  process.stdout.write(`${JSON.stringify(document, null, 2)}\n`);
}

if (require.main === module) main();
