/**
 * The layout of the table the worker deduplicates on. Every `seen()` lookup filters on the lookup key
 * and its day; partitioning on that day and clustering on the key first is what keeps that lookup
 * from scanning (and billing) the whole table.
 */
import type * as gcp from '@pulumi/gcp';
import type { ResourceValidationPolicy } from '@pulumi/policy';
import { CLUSTER_COLUMNS, PARTITION_COLUMN } from '../../worker/src/contract/row';
import { configOf, peek, propsOf } from './support';
import { TYPES } from './types';

const dedupTableSchema = {
  properties: {
    lookupKeyColumn: {
      type: 'string' as const,
      default: CLUSTER_COLUMNS[0] ?? 'dedup_key',
      description: 'The column the worker looks deliveries up by; it must be the first clustering column.',
    },
    partitionColumn: {
      type: 'string' as const,
      default: PARTITION_COLUMN,
      description: 'The day column the table is partitioned on (every lookup filters on it).',
    },
  },
};

/** Column names of a BigQuery table schema given as the provider's JSON string. */
function schemaColumns(schema: unknown): string[] | undefined {
  if (typeof schema !== 'string') return undefined;
  try {
    const fields = JSON.parse(schema) as unknown;
    if (!Array.isArray(fields)) return undefined;
    return fields
      .map((f) => (f !== null && typeof f === 'object' ? (f as { name?: unknown }).name : undefined))
      .filter((n): n is string => typeof n === 'string');
  } catch {
    return undefined;
  }
}

/**
 * Partitioned on the write time, clustered on the lookup key first. Applies to every table (not view) whose schema has the lookup key column: that is the
 * table the worker deduplicates on.
 */
export const dedupTableLayout: ResourceValidationPolicy = {
  name: 'dedup-table-layout',
  description:
    'The table the worker deduplicates on is partitioned on its time column and clustered with the lookup key first.',
  enforcementLevel: 'mandatory',
  configSchema: dedupTableSchema,
  validateResource: (args, reportViolation) => {
    if (args.type !== TYPES.table) return;
    const props = propsOf<gcp.bigquery.TableState>(args);
    // Views and materialized views are tables to the provider, but hold no rows of their own.
    const view = peek(() => props.view);
    const materialized = peek(() => props.materializedView);
    if ((view.known && view.value) || (materialized.known && materialized.value)) return;
    const { lookupKeyColumn, partitionColumn } = configOf(dedupTableSchema, args);
    const schema = peek(() => props.schema);
    if (!schema.known) {
      reportViolation(
        `The schema of table '${args.name}' is unknown until the update runs, so its layout cannot be checked. Build the schema from the contract (bigQuerySchema()) as a literal JSON string.`,
      );
      return;
    }
    const columns = schemaColumns(schema.value);
    if (!columns?.includes(lookupKeyColumn)) return;

    const partitionField = peek(() => props.timePartitioning?.field);
    const partitioned = peek(() => props.timePartitioning);
    if (!partitioned.known || !partitioned.value) {
      reportViolation(
        `Table '${args.name}' is not partitioned, so every lookup of ${lookupKeyColumn} scans the whole table. Set timePartitioning { type: 'DAY', field: '${partitionColumn}' }.`,
      );
    } else if (!partitionField.known || partitionField.value !== partitionColumn) {
      reportViolation(
        `Table '${args.name}' is partitioned on ${partitionField.known ? String(partitionField.value ?? 'ingestion time') : 'an unknown column'}, but every lookup filters on ${partitionColumn}. Set timePartitioning.field: '${partitionColumn}'.`,
      );
    }
    const clustering = peek(() => props.clusterings);
    const first = clustering.known && Array.isArray(clustering.value) ? clustering.value[0] : undefined;
    if (first !== lookupKeyColumn) {
      reportViolation(
        `Table '${args.name}' is clustered on ${clustering.known && Array.isArray(clustering.value) && clustering.value.length > 0 ? clustering.value.join(', ') : 'nothing'}; lookups filter on ${lookupKeyColumn}. Set clusterings: ['${lookupKeyColumn}', ...] with ${lookupKeyColumn} first.`,
      );
    }
  },
};
