import { BigQuery, type Query } from '@google-cloud/bigquery';
import { duplicateObjectsCheckSql } from '../../../infra/components/alerts';
import * as bigQueryStoreModule from '../../src/adapters/bigquery-store';
import { BigQueryStore, lookupSql, mergeSql, WINDOW_PARAMETER } from '../../src/adapters/bigquery-store';
import { COLUMNS } from '../../src/contract/row';
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
 * a SELECT, see bigquery-store.test.ts), and fake-bigquery only checks what we thought of; this is
 * the independent check that each one names real columns and functions, types its parameters so
 * that they bind, and has the shape BigQuery accepts.
 *
 * Covered: BigQueryStore's lookup and MERGE (captured from the store itself, so the SQL and the
 * parameter types are exactly what it sends); the views of contract/views.ts (GoogleSQL, every view
 * name); the scheduled duplicate check of infra/components/alerts.ts, against the duplicate_objects
 * view's own analysed columns; the group-commit statements (BATCHED_STATEMENTS). The append store
 * (Storage Write API) sends no SQL of its own: its seen() is BigQueryStore's lookup.
 */

const PROJECT = 'docline-zetasql';
const DATASET = `${PROJECT}.docline`;
const TABLE = `${DATASET}.documents`;

/** The table as BigQuery holds it: every column of contract/row.ts with its type, in order. */
const TABLE_SCHEMA: CatalogTable = {
  name: TABLE,
  columns: COLUMNS.map((c) => ({ name: c.name, type: c.type })),
};

/** One row as a STRUCT: every column of contract/row.ts, in order, with its type. */
const ROW_STRUCT: Readonly<Record<string, SqlType>> = Object.fromEntries(
  COLUMNS.map((c) => [c.name, c.type]),
);

interface Statement {
  /** The exported function of bigquery-store.ts that builds it. */
  readonly name: string;
  readonly sql: string;
  readonly parameters: Readonly<Record<string, SqlType>>;
  /** `query` for a SELECT (with the columns the store reads), `merge` for the MERGE. */
  readonly expect: { kind: 'merge' } | { kind: 'query'; columns: readonly string[] };
}

/**
 * The group-commit statements of the api brief (BatchStore on BigQuery), one line each.
 * LEAD: they were not on main when this file was written; add one line per statement once
 * `batchLookupSql`, `batchMergeSql` and `winnersSql` exist in bigquery-store.ts (the "every
 * exported …Sql is analysed" test below fails until each one is listed):
 *   { name: 'batchLookupSql', sql: batchLookupSql(TABLE), parameters: { keys: ['STRING'], [WINDOW_PARAMETER]: 'TIMESTAMP' }, expect: { kind: 'query', columns: ['dedup_key'] } },
 *   { name: 'batchMergeSql', sql: batchMergeSql(TABLE), parameters: { rows: [ROW_STRUCT], [WINDOW_PARAMETER]: 'TIMESTAMP' }, expect: { kind: 'merge' } },
 *   { name: 'winnersSql', sql: winnersSql(TABLE), parameters: { keys: ['STRING'], [WINDOW_PARAMETER]: 'TIMESTAMP' }, expect: { kind: 'query', columns: ['dedup_key', 'message_id'] } },
 */
const BATCHED_STATEMENTS: readonly Statement[] = [];

const KINDS = { query: 'resolvedQueryStmtNode', merge: 'resolvedMergeStmtNode' } as const;

/**
 * The statements BigQueryStore sends, with the parameter types it declares: its seen() and record()
 * run against a client whose `query` (the one call to BigQuery) records the request.
 */
async function storeStatements(): Promise<Statement[]> {
  const bigquery = new BigQuery({ projectId: PROJECT });
  const sent: Query[] = [];
  jest.spyOn(bigquery, 'query').mockImplementation((async (query: Query) => {
    sent.push(query);
    return [[], null, { dmlStats: { insertedRowCount: '1' } }];
  }) as never);
  const store = new BigQueryStore({ bigquery, table: TABLE });
  await store.seen('gs://bucket/a.pdf#1');
  // Every nullable column null, so that every parameter's type comes from the declared types.
  await store.record(
    testRow(Object.fromEntries(COLUMNS.filter((c) => c.mode === 'NULLABLE').map((c) => [c.name, null]))),
  );
  const [seen, record] = sent;
  if (!seen || !record) throw new Error(`BigQueryStore sent ${sent.length} queries, expected 2`);
  const parameters = (query: Query) => {
    const types = (query.types ?? {}) as Record<string, SqlType>;
    // Every parameter the statement binds has a declared type: BigQuery cannot bind a typeless null.
    expect(Object.keys(types).sort()).toEqual(Object.keys(query.params as object).sort());
    return types;
  };
  return [
    {
      name: 'lookupSql',
      sql: seen.query ?? '',
      parameters: parameters(seen),
      expect: { kind: 'query', columns: ['found'] },
    },
    { name: 'mergeSql', sql: record.query ?? '', parameters: parameters(record), expect: { kind: 'merge' } },
  ];
}

describe('ZetaSQL analysis of every statement docline sends to BigQuery', () => {
  let zetasql: ZetaSqlServer;
  let catalog: string;
  let statements: Statement[];

  beforeAll(async () => {
    zetasql = await startZetaSql();
    catalog = await zetasql.registerCatalog([TABLE_SCHEMA]);
    statements = [...(await storeStatements()), ...BATCHED_STATEMENTS];
  });

  afterAll(async () => {
    await zetasql?.stop();
  });

  it('captures the store statements that lookupSql and mergeSql build', () => {
    expect(statements.find((s) => s.name === 'lookupSql')?.sql).toBe(lookupSql(TABLE));
    expect(statements.find((s) => s.name === 'mergeSql')?.sql).toBe(mergeSql(TABLE));
    // record() binds one parameter per column, typed as the column: the row STRUCT of the batch.
    const { [WINDOW_PARAMETER]: window, ...row } = statements.find((s) => s.name === 'mergeSql')!.parameters;
    expect(window).toBe('TIMESTAMP');
    expect(row).toEqual(ROW_STRUCT);
  });

  it('analyses every statement builder that bigquery-store.ts exports (every exported …Sql)', () => {
    const exported = Object.keys(bigQueryStoreModule).filter((name) => /Sql$/.test(name));
    expect(exported).toEqual(expect.arrayContaining(['lookupSql', 'mergeSql']));
    expect(statements.map((s) => s.name).sort()).toEqual(expect.arrayContaining(exported.sort()));
  });

  it('accepts each statement with its parameters typed as sent', async () => {
    // All analysed, then compared at once, so that one failure does not hide the next.
    const outcomes = await Promise.all(
      statements.map(async (statement) => {
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
      statements.map((statement) => ({
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

  it('gives the documents view every column of the table, with its type', async () => {
    const analysed = await zetasql.analyze(catalog, viewSql('googlesql', 'documents', TABLE), {});
    expect(analysed.outputColumns).toEqual(COLUMNS.map((c) => ({ name: c.name, type: c.type })));
  });

  it('accepts the scheduled duplicate check against the duplicate_objects view it reads', async () => {
    const view = await zetasql.analyze(catalog, viewSql('googlesql', 'duplicate_objects', TABLE), {});
    const viewName = `${DATASET}.duplicate_objects`;
    const withView = await zetasql.registerCatalog([
      TABLE_SCHEMA,
      { name: viewName, columns: view.outputColumns },
    ]);
    const check = await zetasql.analyze(withView, duplicateObjectsCheckSql(viewName), {});
    expect(check.outputColumns).toEqual([{ name: 'result', type: 'STRING' }]);
  });

  describe('refuses what BigQuery would refuse', () => {
    it('fails a statement that names a column the table does not have', async () => {
      const sql = lookupSql(TABLE).replace('dedup_key =', 'dedup_id =');
      expect(sql).toContain('dedup_id');
      await expect(
        zetasql.analyze(catalog, sql, { dedup_key: 'STRING', [WINDOW_PARAMETER]: 'TIMESTAMP' }),
      ).rejects.toMatchObject({
        name: ZetaSqlAnalysisError.name,
        code: 'zetasql_analysis_failed',
        message: expect.stringMatching(/^Unrecognized name: dedup_id\b/),
      });
    });

    it('fails the MERGE against a table that lacks one of its columns', async () => {
      const merge = statements.find((s) => s.name === 'mergeSql')!;
      const shorter = await zetasql.registerCatalog([
        { name: TABLE, columns: TABLE_SCHEMA.columns.filter((c) => c.name !== 'worker_version') },
      ]);
      await expect(zetasql.analyze(shorter, merge.sql, merge.parameters)).rejects.toThrow(
        /^Column worker_version is not present in target table/,
      );
    });

    it('fails the lookup when the window parameter is not a TIMESTAMP', async () => {
      await expect(
        zetasql.analyze(catalog, lookupSql(TABLE), { dedup_key: 'STRING', [WINDOW_PARAMETER]: 'INT64' }),
      ).rejects.toThrow(/^No matching signature for operator >=/);
    });
  });
});
