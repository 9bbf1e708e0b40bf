import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';
import { bigQueryCorrectionsSchema, CORRECTIONS_TABLE } from '../../worker/src/contract/corrections';
import { bigQuerySchema, CLUSTER_COLUMNS, PARTITION_COLUMN } from '../../worker/src/contract/row';
import { VIEW_DESCRIPTIONS, VIEW_NAMES, type ViewName, viewSql } from '../../worker/src/contract/views';
import { type DataArgs, DoclineComponent, renamedChildAliases } from './component';
import { keptData } from './lifecycle';

/**
 * The table's id inside the dataset; the worker writes here, readers use the views. Partitioned by
 * the key's day (contract/row.ts): a new id, because BigQuery cannot change the partitioning of a
 * table in place.
 */
export const TABLE_ID = 'deliveries_by_key_day';

/**
 * The table of a schema version, the migration path for a schema change BigQuery cannot apply in
 * place: version 1 is {@link TABLE_ID} under the logical name `<name>-table` (the logical name every
 * stack has had so far), version N is `deliveries_vN` under `<name>-table-vN`. A new version is a new
 * resource beside the old one, never a replacement of it: pulumi-gcp replaces a table delete-first,
 * and a retained table that must be replaced leaves the state and then fails every later `up` with
 * 409. The old version leaves the program, so the engine would delete it; in a stack that keeps its
 * data it is protected and retained, so the `up` stops until an operator unprotects it on purpose,
 * and then it stays in BigQuery with its rows (docs/deploy.md, "A schema change BigQuery cannot
 * apply in place").
 */
export function tableVersionNames(name: string, version: number): { logicalName: string; tableId: string } {
  if (!Number.isInteger(version) || version < 1) {
    throw new Error(`a table version is a whole number from 1 (got ${version})`);
  }
  return version === 1
    ? { logicalName: `${name}-table`, tableId: TABLE_ID }
    : { logicalName: `${name}-table-v${version}`, tableId: `${TABLE_ID}_v${version}` };
}

/** Arguments of {@link Warehouse}. */
export interface WarehouseArgs extends DataArgs {
  /** Dataset id: letters, digits and underscores. */
  datasetId: pulumi.Input<string>;
  /**
   * Keep the dataset and the table, rows included, on `pulumi destroy` (retainOnDelete), and have
   * BigQuery refuse to delete the table on any other path (a replacement, a hand-run delete). Default true.
   */
  deletionProtection?: boolean;
  /** The table's schema version ({@link tableVersionNames}). Default 1. */
  tableVersion?: number;
  /**
   * The component's name when the stack first created the dataset and the table
   * ({@link renamedChildAliases}): both keep their URNs if the component is renamed.
   */
  stableName?: string;
}

/** The type token of {@link Warehouse}; part of the dataset's and the table's URNs, so never changed. */
export const WAREHOUSE_TYPE = 'docline:index:Warehouse';

/**
 * The dataset, the table (schema, partitioning and clustering from the worker's row contract) and
 * the four views, whose SQL is the same the worker's tests run against SQLite.
 */
export class Warehouse extends DoclineComponent {
  readonly dataset: gcp.bigquery.Dataset;
  readonly table: gcp.bigquery.Table;
  readonly views: Readonly<Record<ViewName, gcp.bigquery.Table>>;
  /** `project.dataset.table`, the worker's BIGQUERY_TABLE. */
  readonly tableRef: pulumi.Output<string>;
  /** `project.dataset.view` of each view. */
  readonly viewRefs: Readonly<Record<ViewName, pulumi.Output<string>>>;

  constructor(name: string, args: WarehouseArgs, opts?: pulumi.ComponentResourceOptions) {
    super(WAREHOUSE_TYPE, name, opts);
    const deletionProtection = args.deletionProtection ?? true;
    const version = args.tableVersion ?? 1;
    const table = tableVersionNames(name, version);
    const aliases = (child: (component: string) => string) =>
      renamedChildAliases(name, args.stableName, WAREHOUSE_TYPE, child);
    this.dataset = new gcp.bigquery.Dataset(
      `${name}-dataset`,
      {
        project: args.project,
        datasetId: args.datasetId,
        location: args.location,
        description: 'docline: one row per document delivery that won, and the views to read them.',
        deleteContentsOnDestroy: !deletionProtection,
      },
      { ...this.child, ...keptData(deletionProtection), aliases: aliases((c) => `${c}-dataset`) },
    );
    this.table = new gcp.bigquery.Table(
      table.logicalName,
      {
        project: args.project,
        datasetId: this.dataset.datasetId,
        tableId: table.tableId,
        description:
          "Rows written by the worker, partitioned by each key's day. Read through the documents view: BigQuery enforces no uniqueness.",
        schema: JSON.stringify(bigQuerySchema()),
        timePartitioning: { type: 'DAY', field: PARTITION_COLUMN },
        clusterings: [...CLUSTER_COLUMNS],
        deletionProtection,
      },
      // A stack of the earlier layout (table `deliveries`, partitioned by processed_at) sees a replacement
      // here. Where data is kept the table is protected, so that `up` stops until an operator
      // unprotects it on purpose; being retained, the old table then stays in BigQuery with every row
      // for the migration statement to move (docs/architecture.md, "Migrating a table of the earlier layout").
      {
        ...this.child,
        ...keptData(deletionProtection),
        aliases: aliases((c) => tableVersionNames(c, version).logicalName),
      },
    );
    // The accountants' corrections (contract/corrections.ts) are work people did: kept like the rows.
    // Beside the table, never in it; the documents view applies them.
    const corrections = new gcp.bigquery.Table(
      `${name}-corrections`,
      {
        project: args.project,
        datasetId: this.dataset.datasetId,
        tableId: CORRECTIONS_TABLE,
        description:
          'Corrections of the rows (field, new value, who, when, why), keyed by dedup key; the documents view applies the latest of each field.',
        schema: JSON.stringify(bigQueryCorrectionsSchema()),
        timePartitioning: { type: 'DAY', field: PARTITION_COLUMN },
        clusterings: ['dedup_key', 'field'],
        deletionProtection,
      },
      { ...this.child, ...keptData(deletionProtection), aliases: aliases((c) => `${c}-corrections`) },
    );
    // Built from the inputs, not the table's outputs, so that the view SQL is known at preview.
    this.tableRef = pulumi.interpolate`${args.project}.${args.datasetId}.${table.tableId}`;

    const views = {} as Record<ViewName, gcp.bigquery.Table>;
    const viewRefs = {} as Record<ViewName, pulumi.Output<string>>;
    for (const view of VIEW_NAMES) {
      views[view] = new gcp.bigquery.Table(
        `${name}-${view.replaceAll('_', '-')}`,
        {
          project: args.project,
          datasetId: this.dataset.datasetId,
          tableId: view,
          description: VIEW_DESCRIPTIONS[view],
          view: { query: this.tableRef.apply((ref) => viewSql('googlesql', view, ref)), useLegacySql: false },
          // A view holds no data; protecting it would only block changes to its SQL.
          deletionProtection: false,
        },
        // BigQuery refuses a view over a table that does not exist yet.
        { parent: this, dependsOn: [this.table, corrections] },
      );
      viewRefs[view] = pulumi.interpolate`${args.project}.${args.datasetId}.${view}`;
    }
    this.views = views;
    this.viewRefs = viewRefs;

    this.registerOutputs({
      datasetId: this.dataset.datasetId,
      tableRef: this.tableRef,
      viewRefs,
    });
  }
}
