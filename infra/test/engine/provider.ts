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
import * as provider from '@pulumi/pulumi/provider';
import { computedOutputs, invokeResult } from '../support/computed-outputs';

const pkg = process.env.DOCLINE_STANDIN_PACKAGE ?? 'gcp';
const VERSIONS: Record<string, string> = { gcp: '9.37.0', 'docker-build': '0.0.22', time: '0.1.1' };
const PROJECT = process.env.DOCLINE_STANDIN_PROJECT ?? 'p';

/**
 * Input properties whose change forces a replacement, per type. Each comes from the property's
 * `ForceNew: true` in the Terraform resource pulumi-gcp bridges (terraform-provider-google,
 * google/services/<service>/resource_<name>.go), or for `'*'` from a resource with no update at all.
 */
export const REPLACE_ON: Record<string, string[]> = {
  // resource_storage_notification.go: no Update function; every field is ForceNew.
  'gcp:storage/notification:Notification': ['*'],
  // resource_storage_bucket.go: name, location and project are ForceNew.
  'gcp:storage/bucket:Bucket': ['name', 'location', 'project'],
  // resource_pubsub_topic.go: name and project are ForceNew.
  'gcp:pubsub/topic:Topic': ['name', 'project'],
  // resource_pubsub_subscription.go: name, topic and project are ForceNew.
  'gcp:pubsub/subscription:Subscription': ['name', 'topic', 'project'],
  // resource_bigquery_dataset.go: dataset_id, location and project are ForceNew.
  'gcp:bigquery/dataset:Dataset': ['datasetId', 'location', 'project'],
  // resource_bigquery_table.go: dataset_id, table_id and project are ForceNew.
  'gcp:bigquery/table:Table': ['datasetId', 'tableId', 'project'],
  // resource_google_service_account.go: account_id and project are ForceNew.
  'gcp:serviceaccount/account:Account': ['accountId', 'project'],
};
/** pulumi-gcp's provider/resources.go sets DeleteBeforeReplace on the BigQuery table. */
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

const standIn: provider.Provider = {
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
    const replaces = changed.filter((key) => rule.includes('*') || rule.includes(key));
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
  async read(id, _urn, props) {
    return { id, props };
  },
  async update(_id, urn, _olds, news) {
    return { outs: outputs(urn, news) };
  },
  async delete() {},
  async invoke(token, inputs) {
    return { outputs: invokeResult(token, inputs, PROJECT) };
  },
};

provider.main(standIn, process.argv.slice(2)).catch((err: unknown) => {
  console.error(`pulumi-resource-${pkg} stand-in: ${err}`);
  process.exit(1);
});
