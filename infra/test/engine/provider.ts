/**
 * Provider stand-ins for the real engine: `pulumi-resource-gcp`, `-docker-build` and
 * `-time` on PATH (bin/), each this file served with `@pulumi/pulumi/provider`'s `main()` under the
 * package name its wrapper passes. Nothing reaches Google: `create` answers the inputs plus what
 * the real provider computes, from the one table the mocks use too (support/computed-outputs.ts).
 *
 * `diff` compares the old *inputs* (kept in the outputs under `__inputs`: the server hands `diff`
 * the old outputs) with the new ones, and answers a replacement where the real provider would, for
 * the properties this stack sets (REPLACE_ON below).
 */
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import * as provider from '@pulumi/pulumi/provider';
import { computedOutputs, invokeResult } from '../support/computed-outputs';

const pkg = process.env.DOCLINE_STANDIN_PACKAGE ?? 'gcp';
const VERSIONS: Record<string, string> = { gcp: '9.37.0', 'docker-build': '0.0.22', time: '0.1.1' };
const PROJECT = process.env.DOCLINE_STANDIN_PROJECT ?? 'p';

/**
 * Input properties whose change forces a replacement, per type, as `property` or `property.nested`
 * (the replacement is reported on the top-level property). Read from terraform-provider-google, the
 * provider pulumi-gcp bridges, at commit e03b762 (2026-08-21), google/services/<service>/: each
 * entry is a field with `ForceNew: true` (or `RequiresReplace()` in a framework resource) that this
 * stack sets; `'*'` marks a resource with no update at all.
 */
export const REPLACE_ON: Record<string, string[]> = {
  // storage/fw_resource_storage_notification.go: every configurable attribute RequiresReplace, and
  // Update says the resource is immutable.
  'gcp:storage/notification:Notification': ['*'],
  // storage/resource_storage_bucket.go: name, location, project, enable_object_retention,
  // hierarchical_namespace, custom_placement_config.data_locations (retention_policy.0.is_locked
  // forces a new bucket through ForceNewIfChange in CustomizeDiff, when a lock is undone).
  'gcp:storage/bucket:Bucket': [
    'name',
    'location',
    'project',
    'enableObjectRetention',
    'hierarchicalNamespace',
    'customPlacementConfig.dataLocations',
  ],
  // pubsub/resource_pubsub_topic.go: name, project, tags.
  'gcp:pubsub/topic:Topic': ['name', 'project', 'tags'],
  // pubsub/resource_pubsub_subscription.go: name, topic, project, filter, enable_message_ordering, tags.
  'gcp:pubsub/subscription:Subscription': [
    'name',
    'topic',
    'project',
    'filter',
    'enableMessageOrdering',
    'tags',
  ],
  // bigquery/resource_bigquery_dataset.go: dataset_id, location, project.
  'gcp:bigquery/dataset:Dataset': ['datasetId', 'location', 'project'],
  // bigquery/resource_bigquery_table.go: dataset_id, table_id, project, time_partitioning.field,
  // range_partitioning.field (a schema change that drops or retypes a column also replaces it,
  // through resourceBigQueryTableSchemaCustomizeDiff; the stack never makes one: it adds a table version).
  'gcp:bigquery/table:Table': [
    'datasetId',
    'tableId',
    'project',
    'timePartitioning.field',
    'rangePartitioning.field',
  ],
  // resourcemanager/resource_google_service_account.go: account_id, project.
  'gcp:serviceaccount/account:Account': ['accountId', 'project'],
};
const DELETE_BEFORE_REPLACE = new Set(['gcp:bigquery/table:Table']);

type Props = Record<string, unknown>;

function typeAndName(urn: string): { type: string; name: string } {
  const parts = urn.split('::');
  const name = parts[parts.length - 1] ?? '';
  const qualified = parts[parts.length - 2] ?? '';
  return { type: qualified.split('$').pop() ?? qualified, name };
}

function inputsOf(props: Props): Props {
  const kept = props.__inputs;
  if (kept && typeof kept === 'object') return kept as Props;
  const { __inputs: _, ...rest } = props;
  return rest;
}

function outputs(urn: string, inputs: Props): Props {
  const { type, name } = typeAndName(urn);
  return { ...inputs, ...computedOutputs(type, name, inputs, PROJECT), __inputs: inputs };
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

export const standIn: provider.Provider = {
  version: VERSIONS[pkg] ?? '0.0.1',
  async check(_urn, _olds, news) {
    return { inputs: news };
  },
  async diff(_id, urn, olds, news) {
    const { type } = typeAndName(urn);
    const old = inputsOf(olds);
    const keys = new Set([...Object.keys(old), ...Object.keys(news)]);
    const changed = [...keys].filter((key) => !same(old[key], news[key]));
    const rule = REPLACE_ON[type] ?? [];
    const forces = (path: string) => {
      const [key, ...rest] = path.split('.') as [string, ...string[]];
      const at = (props: Props) => rest.reduce<unknown>((v, k) => (v as Props | undefined)?.[k], props[key]);
      return changed.includes(key) && !same(at(old), at(news));
    };
    const replaces = rule.includes('*')
      ? changed
      : changed.filter((key) => rule.some((path) => path.split('.')[0] === key && forces(path)));
    return {
      changes: changed.length > 0,
      replaces,
      deleteBeforeReplace: replaces.length > 0 && DELETE_BEFORE_REPLACE.has(type),
    };
  },
  async create(urn, inputs) {
    const outs = outputs(urn, inputs);
    const { type, name } = typeAndName(urn);
    const id = (outs.id as string | undefined) ?? (outs.name as string | undefined) ?? `${type}/${name}`;
    return { id, outs };
  },
  async read(id, urn, props) {
    // A resource deleted outside Pulumi (the engine suite lists its URN): a refresh finds it gone.
    const gone = process.env.DOCLINE_STANDIN_GONE;
    if (gone && existsSync(gone) && readFileSync(gone, 'utf8').split('\n').includes(urn))
      return { id: '', props: {} };
    return { id, props };
  },
  async update(_id, urn, _olds, news) {
    return { outs: outputs(urn, news) };
  },
  async delete(_id, urn) {
    // The engine suite reads which resources the engine asked to delete (retainOnDelete ones never).
    const log = process.env.DOCLINE_STANDIN_DELETES;
    if (log) appendFileSync(log, `${urn}\n`);
  },
  async invoke(token, inputs) {
    return { outputs: invokeResult(token, inputs, PROJECT) };
  },
};

// Served when started as the plugin (bin/pulumi-resource-*); imported by the diff's own test.
if (require.main === module) {
  provider.main(standIn, process.argv.slice(2)).catch((err: unknown) => {
    console.error(`pulumi-resource-${pkg} stand-in: ${err}`);
    process.exit(1);
  });
}
