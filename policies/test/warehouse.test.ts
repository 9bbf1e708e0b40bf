import { type Mode, mutate, FIXTURE_TYPES as T, validStack } from './fixtures';
import { check, summary } from './run';

const MODES: Mode[] = ['update', 'preview'];
type Props = Record<string, unknown>;

function table(mode: Mode, change: (props: Props) => Props) {
  return mutate(validStack(mode), 'deliveries', T.table, (t) => ({ ...t, props: change(t.props) }));
}

describe.each(MODES)('the warehouse rule (%s)', (mode) => {
  it('reports a dedup table that is not partitioned', async () => {
    const diagnostics = await check(table(mode, ({ timePartitioning: _, ...p }) => p));
    expect(summary(diagnostics)).toEqual(['dedup-table-layout @ deliveries']);
    expect(diagnostics[0]?.message).toMatch(
      /not partitioned.*timePartitioning \{ type: 'DAY', field: 'key_day' \}/,
    );
  });

  it('reports a dedup table partitioned on another column', async () => {
    const diagnostics = await check(
      table(mode, (p) => ({ ...p, timePartitioning: { type: 'DAY', field: 'event_time' } })),
    );
    expect(summary(diagnostics)).toEqual(['dedup-table-layout @ deliveries']);
    expect(diagnostics[0]?.message).toMatch(/partitioned on event_time/);
  });

  it('reports a dedup table clustered without the lookup key first', async () => {
    const diagnostics = await check(table(mode, (p) => ({ ...p, clusterings: ['message_id', 'dedup_key'] })));
    expect(summary(diagnostics)).toEqual(['dedup-table-layout @ deliveries']);
    expect(diagnostics[0]?.message).toMatch(/clustered on message_id, dedup_key.*dedup_key first/);
  });

  it('reports a dedup table without clustering', async () => {
    const diagnostics = await check(table(mode, ({ clusterings: _, ...p }) => p));
    expect(summary(diagnostics)).toEqual(['dedup-table-layout @ deliveries']);
  });

  it('leaves views and tables without the lookup key column alone', async () => {
    const stack = mutate(validStack(mode), 'documents-view', T.table, {
      props: { schema: JSON.stringify([{ name: 'dedup_key', type: 'STRING' }]) },
    });
    const other = table(mode, (p) => ({
      ...p,
      schema: JSON.stringify([{ name: 'id', type: 'STRING' }]),
      clusterings: undefined,
      timePartitioning: undefined,
    }));
    expect([await check(stack), await check(other)]).toEqual([[], []]);
  });
});
