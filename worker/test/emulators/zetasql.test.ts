import { BigQuery, type Query } from '@google-cloud/bigquery';
import { duplicateObjectsCheckSql } from '../../../infra/components/alerts';
import * as bigQueryStoreModule from '../../src/adapters/stores/bigquery-store';
import {
  BigQueryStore,
  batchLookupSql,
  batchMergeSql,
  LOOKUP_PARAMETER,
  migrationSql,
  winnersSql,
} from '../../src/adapters/stores/bigquery-store';
import { bigQueryCorrectionsSchema } from '../../src/contract/corrections';
import { COLUMNS, KEY_DAY_COLUMN } from '../../src/contract/row';
import { DELIVERY_DEFAULTS } from '../../src/contract/settings';
import { VIEW_NAMES, type ViewName, viewSql } from '../../src/contract/views';
import { testRow } from '../support/builders';
import {
  type CatalogTable,
  type SqlType,
  startZetaSql,
  ZetaSqlAnalysisError,
  type ZetaSqlServer,
} from './support/zetasql';

/*
 * Every statement docline sends to BigQuery, analysed by ZetaSQL (the open-source GoogleSQL
 * analyzer) against the table of contract/row.ts, with the parameters' real types and every
 * language feature on. No emulator here can run all of them (bigquery-emulator refuses a MERGE over
 * a SELECT, see bigquery-store.test.ts), and sim/bigquery-rest.ts only checks what we thought of; this is
 * the independent check that each one names real columns and functions, types its parameters so
 * that they bind, and has the shape BigQuery accepts.
 *
 * Covered: BigQueryStore's statements, one delivery at a time and group commit's (STATEMENTS,
 * checked against what the store itself sends: the same SQL, the same parameter types); the views
 * of contract/views.ts (GoogleSQL, every view name); the scheduled duplicate check of
 * infra/components/alerts.ts (it reads the table's recent partitions).
 */

const PROJECT = 'docline-zetasql';
const DATASET = `${PROJECT}.docline`;
const TABLE = `${DATASET}.documents`;

/** The table as BigQuery holds it: every column of contract/row.ts with its type, in order, then the key day. */
const TABLE_SCHEMA: CatalogTable = {
  name: TABLE,
  columns: [...COLUMNS, KEY_DAY_COLUMN].map((c) => ({ name: c.name, type: c.type })),
};

/** The corrections table beside it (contract/corrections.ts), which the documents view reads. */
const CORRECTIONS_SCHEMA: CatalogTable = {
  name: `${DATASET}.corrections`,
  columns: bigQueryCorrectionsSchema().map((c) => ({ name: c.name, type: c.type })),
};

/** A table of the layout before the key day (partitioned by processed_at): what a migration reads. */
const LEGACY_TABLE = `${DATASET}.deliveries_by_commit_time`;
const LEGACY_SCHEMA: CatalogTable = {
  name: LEGACY_TABLE,
  columns: COLUMNS.map((c) => ({ name: c.name, type: c.type })),
};

/** One row as a STRUCT: every column of contract/row.ts, in order, with its type, then its key day. */
const ROW_STRUCT: Readonly<Record<string, SqlType>> = Object.fromEntries(
  [...COLUMNS, KEY_DAY_COLUMN].map((c) => [c.name, c.type]),
);

interface Statement {
  /** The exported function of bigquery-store.ts that builds it. */
  readonly name: string;
  readonly sql: string;
  /** Its named parameters with the types BigQueryStore declares (checked below against what it sends). */
  readonly parameters: Readonly<Record<string, SqlType>>;
  /** `query` for a SELECT (with the columns the store reads), `merge` for a MERGE. */
  readonly expect: { kind: 'merge' } | { kind: 'insert' } | { kind: 'query'; columns: readonly string[] };
}

const LOOKUP = { [LOOKUP_PARAMETER]: 'DATE' } as const;
const DAY = { key_day_0: 'DATE' } as const;
type Parameters = Statement['parameters'];
const query = (name: string, sql: string, parameters: Parameters, columns: string[]): Statement => ({
  name,
  sql,
  parameters,
  expect: { kind: 'query', columns },
});
const merge = (name: string, sql: string, parameters: Parameters): Statement => ({
  name,
  sql,
  parameters,
  expect: { kind: 'merge' },
});

/**
 * Every statement BigQueryStore sends, one line each: builder, SQL, parameter types, and for a
 * query the columns the store reads. A statement builder exported from bigquery-store.ts and not
 * listed here fails "analyses every statement builder that bigquery-store.ts exports".
 */
const STATEMENTS: readonly Statement[] = [
  // Group commit: seenMany(), recordMany(), and its follow-up when the MERGE inserted fewer rows.
  query('batchLookupSql', batchLookupSql(TABLE), { keys: ['STRING'], ...LOOKUP }, ['dedup_key']),
  merge('batchMergeSql', batchMergeSql(TABLE), { rows: [ROW_STRUCT], ...DAY }),
  query('winnersSql', winnersSql(TABLE), { keys: ['STRING'], ...DAY }, ['dedup_key', 'message_id']),
  // A batch of two key days (a batch across midnight): the same statements with two day parameters.
  merge('batchMergeSql', batchMergeSql(TABLE, 2), { rows: [ROW_STRUCT], ...DAY, key_day_1: 'DATE' }),
  query('winnersSql', winnersSql(TABLE, 2), { keys: ['STRING'], ...DAY, key_day_1: 'DATE' }, [
    'dedup_key',
    'message_id',
  ]),
  // The one-off move of a table of the earlier layout into the key-day table (no parameters).
  {
    name: 'migrationSql',
    sql: migrationSql(LEGACY_TABLE, TABLE),
    parameters: {},
    expect: { kind: 'insert' },
  },
];

const KINDS = {
  query: 'resolvedQueryStmtNode',
  merge: 'resolvedMergeStmtNode',
  insert: 'resolvedInsertStmtNode',
} as const;

/**
 * What BigQueryStore really sends: seenMany() and recordMany() (whose MERGE
 * reports fewer rows than it carried, so that the follow-up runs too) against a client whose `query`,
 * the one call to BigQuery, records each request.
 */
async function sentByTheStore(): Promise<Query[]> {
  const bigquery = new BigQuery({ projectId: PROJECT });
  const sent: Query[] = [];
  jest.spyOn(bigquery, 'query').mockImplementation((async (query: Query) => {
    sent.push(query);
    return [[], null, { dmlStats: { insertedRowCount: '1' } }];
  }) as never);
  const store = new BigQueryStore({ bigquery, table: TABLE });
  // Every nullable column null, so that no parameter's type could come from its value.
  const nulls = () =>
    testRow(Object.fromEntries(COLUMNS.filter((c) => c.mode === 'NULLABLE').map((c) => [c.name, null])));
  await store.seenMany(['gs://bucket/a.pdf#1', 'gs://bucket/b.pdf#1']);
  await store.recordMany([nulls(), nulls()]);
  return sent;
}

describe('ZetaSQL analysis of every statement docline sends to BigQuery', () => {
  let zetasql: ZetaSqlServer;
  let catalog: string;

  beforeAll(async () => {
    zetasql = await startZetaSql();
    catalog = await zetasql.registerCatalog([TABLE_SCHEMA, LEGACY_SCHEMA, CORRECTIONS_SCHEMA]);
  });

  afterAll(async () => {
    await zetasql?.stop();
  });

  it('lists each statement BigQueryStore sends, with the parameter types it declares', async () => {
    const sent = await sentByTheStore();
    expect(sent.map((q) => STATEMENTS.find((s) => s.sql === q.query)?.name ?? q.query)).toEqual([
      'batchLookupSql',
      'batchMergeSql',
      'winnersSql',
    ]);
    for (const query of sent) {
      const listed = STATEMENTS.find((s) => s.sql === query.query)!;
      expect({ name: listed.name, types: query.types }).toEqual({
        name: listed.name,
        types: listed.parameters,
      });
      // Every bound parameter has a declared type: BigQuery cannot bind a typeless null.
      expect(Object.keys(query.params as object).sort()).toEqual(Object.keys(listed.parameters).sort());
    }
  });

  it('analyses every statement builder that bigquery-store.ts exports (every exported …Sql)', () => {
    const exported = Object.keys(bigQueryStoreModule).filter((name) => /Sql$/.test(name));
    expect(exported).toEqual(expect.arrayContaining(['batchLookupSql', 'batchMergeSql']));
    expect(STATEMENTS.map((s) => s.name).sort()).toEqual(expect.arrayContaining(exported.sort()));
  });

  it('accepts each statement with its parameters typed as sent', async () => {
    // All analysed, then compared at once, so that one failure does not hide the next.
    const outcomes = await Promise.all(
      STATEMENTS.map(async (statement) => {
        try {
          const analysed = await zetasql.analyze(catalog, statement.sql, statement.parameters);
          return {
            name: statement.name,
            kind: analysed.kind,
            ...(statement.expect.kind === 'query'
              ? { columns: analysed.outputColumns.map((c) => c.name) }
              : {}),
          };
        } catch (error) {
          return { name: statement.name, error: (error as Error).message, sql: statement.sql };
        }
      }),
    );
    expect(outcomes).toEqual(
      STATEMENTS.map((statement) => ({
        name: statement.name,
        kind: KINDS[statement.expect.kind],
        ...(statement.expect.kind === 'query' ? { columns: statement.expect.columns } : {}),
      })),
    );
  });

  it.each(VIEW_NAMES.map((view) => [view]))('accepts the GoogleSQL %s view', async (view: ViewName) => {
    const analysed = await zetasql.analyze(catalog, viewSql('googlesql', view, TABLE), {});
    expect(analysed.kind).toBe(KINDS.query);
    expect(analysed.outputColumns.length).toBeGreaterThan(0);
  });

  it('gives the documents view every column of the table, with its type, and what corrections left readable', async () => {
    const analysed = await zetasql.analyze(catalog, viewSql('googlesql', 'documents', TABLE), {});
    expect(analysed.outputColumns).toEqual([
      ...COLUMNS.map((c) => ({ name: c.name, type: c.type })),
      { name: 'original_analysis', type: 'JSON' },
      { name: 'corrected_fields', type: 'STRING' },
    ]);
  });

  it('accepts the scheduled duplicate check, which reads the table over the redelivery window', async () => {
    const sql = duplicateObjectsCheckSql(TABLE, DELIVERY_DEFAULTS.redeliveryWindowDays);
    const check = await zetasql.analyze(catalog, sql, {});
    expect(check.outputColumns).toEqual([{ name: 'result', type: 'STRING' }]);
  });

  describe('refuses what BigQuery would refuse', () => {
    it('fails a statement that names a column the table does not have', async () => {
      const sql = batchLookupSql(TABLE).replace('WHERE dedup_key IN', 'WHERE dedup_id IN');
      expect(sql).toContain('dedup_id');
      await expect(
        zetasql.analyze(catalog, sql, { keys: ['STRING'], [LOOKUP_PARAMETER]: 'DATE' }),
      ).rejects.toMatchObject({
        name: ZetaSqlAnalysisError.name,
        code: 'zetasql_analysis_failed',
        message: expect.stringMatching(/^Unrecognized name: dedup_id\b/),
      });
    });

    it('fails the batched MERGE against a table that lacks one of its columns', async () => {
      const merge = STATEMENTS.find((s) => s.name === 'batchMergeSql')!;
      const shorter = await zetasql.registerCatalog([
        { name: TABLE, columns: TABLE_SCHEMA.columns.filter((c) => c.name !== 'worker_version') },
      ]);
      await expect(zetasql.analyze(shorter, merge.sql, merge.parameters)).rejects.toThrow(
        /^Column worker_version is not present in target table/,
      );
    });

    it('fails the lookup when the key-day parameter is not a DATE', async () => {
      await expect(
        zetasql.analyze(catalog, batchLookupSql(TABLE), { keys: ['STRING'], [LOOKUP_PARAMETER]: 'INT64' }),
      ).rejects.toThrow(/^No matching signature for operator >=/);
    });

    it('fails the migration into a table without the key day', async () => {
      await expect(zetasql.analyze(catalog, migrationSql(LEGACY_TABLE, LEGACY_TABLE), {})).rejects.toThrow(
        /key_day/,
      );
    });
  });
});
