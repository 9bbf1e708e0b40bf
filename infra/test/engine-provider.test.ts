import { standIn } from './engine/provider';

/**
 * The provider stand-in that `npm run test:engine` runs decides replace-or-update as the bridged
 * Terraform provider does for the fields this stack sets (REPLACE_ON): a wrong table would let the
 * engine suite pass on an update that the real provider turns into a replacement.
 */
const urn = (type: string, name = 'x') => `urn:pulumi:dev::docline::${type}::${name}`;
const diff = (type: string, olds: Record<string, unknown>, news: Record<string, unknown>) =>
  standIn.diff!('id', urn(type), { __inputs: olds }, news);

describe('the provider stand-in of the engine suite', () => {
  const table = 'gcp:bigquery/table:Table';
  const partitioned = { datasetId: 'd', tableId: 't', timePartitioning: { type: 'DAY', field: 'key_day' } };

  it('replaces the table when its partitioning field changes, deleting first', async () => {
    const result = await diff(table, partitioned, {
      ...partitioned,
      timePartitioning: { type: 'DAY', field: 'processed_at' },
    });
    expect(result).toMatchObject({
      changes: true,
      replaces: ['timePartitioning'],
      deleteBeforeReplace: true,
    });
  });

  it('updates the table in place when only the partitions expiry changes', async () => {
    const result = await diff(table, partitioned, {
      ...partitioned,
      timePartitioning: { type: 'DAY', field: 'key_day', expirationMs: 86_400_000 },
    });
    expect(result).toMatchObject({ changes: true, replaces: [], deleteBeforeReplace: false });
  });

  it('replaces a notification on any change (it has no update)', async () => {
    const result = await diff(
      'gcp:storage/notification:Notification',
      { topic: 'a', bucket: 'b' },
      { topic: 'c', bucket: 'b' },
    );
    expect(result).toMatchObject({ changes: true, replaces: ['topic'] });
  });

  it('replaces the push subscription when its filter changes, and updates its ack deadline', async () => {
    const sub = 'gcp:pubsub/subscription:Subscription';
    const base = { name: 's', topic: 't', filter: 'a', ackDeadlineSeconds: 60 };
    expect(await diff(sub, base, { ...base, filter: 'b' })).toMatchObject({ replaces: ['filter'] });
    expect(await diff(sub, base, { ...base, ackDeadlineSeconds: 90 })).toMatchObject({
      changes: true,
      replaces: [],
    });
  });

  it('reports no change for equal inputs', async () => {
    expect(await diff(table, partitioned, partitioned)).toMatchObject({ changes: false, replaces: [] });
  });
});
