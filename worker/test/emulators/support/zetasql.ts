import { existsSync } from 'node:fs';
import path from 'node:path';
import { freePort } from '../../../../local/lib/emulator';
import { type GroupProcess, startGroupProcess } from '../../../../local/lib/lifecycle';

/**
 * ZetaSQL, the open-source GoogleSQL analyzer, as `@fivetrandevelopers/zetasql` ships it: a gRPC
 * server (`remote_server.so localhost PORT`, linux x86-64) and a Node client.
 * `scripts/install-emulators.sh` installs the package into `.tools/zetasql` (never a dependency of
 * the project), so its client is loaded from there at run time, behind the small typed surface below.
 *
 * The analyzer resolves a statement against a catalog (tables with typed columns, the built-in
 * functions) and typed query parameters, with every language feature on: unknown names, type
 * mismatches, wrong arities and misplaced clauses are refused, as BigQuery's own analyzer
 * (GoogleSQL) would refuse them. It does not know BigQuery's quotas or DML limits.
 */

/** Where the install script puts the package. */
export const ZETASQL_DIR = path.resolve(__dirname, '../../../../.tools/zetasql');
const PACKAGE_DIR = path.join(ZETASQL_DIR, 'node_modules/@fivetrandevelopers/zetasql');
const SERVER_BINARY = path.join(PACKAGE_DIR, 'lib/zetasql/remote_server.so');

/**
 * A GoogleSQL type in @google-cloud/bigquery's `types` notation: a type name, `[element]` for an
 * ARRAY, `{field: type}` for a STRUCT (fields in order).
 */
export type SqlType = string | readonly [SqlType] | { readonly [field: string]: SqlType };

/** A table of the catalog: its name as the statements write it inside backquotes, and its columns. */
export interface CatalogTable {
  /** `project.dataset.table`: one quoted identifier in docline's statements. */
  readonly name: string;
  readonly columns: ReadonlyArray<{ readonly name: string; readonly type: SqlType }>;
}

/** What the analyzer resolved. */
export interface AnalyzedStatement {
  /** The resolved statement's node (`resolvedQueryStmtNode`, `resolvedMergeStmtNode`, …). */
  readonly kind: string;
  /** A query's output columns with their types (`STRING`, `ARRAY<STRING>`, …); empty for DML. */
  readonly outputColumns: ReadonlyArray<{ readonly name: string; readonly type: string }>;
}

/** The analyzer refused the statement; `message` is ZetaSQL's, with its `[at line:column]`. */
export class ZetaSqlAnalysisError extends Error {
  readonly code = 'zetasql_analysis_failed';
  constructor(message: string) {
    super(message);
    this.name = 'ZetaSqlAnalysisError';
  }
}

export interface ZetaSqlServer {
  /** Registers a catalog of these tables (with every built-in function) and returns its id. */
  registerCatalog(tables: readonly CatalogTable[]): Promise<string>;
  /**
   * Analyses one statement against a registered catalog with these named parameters, every language
   * feature on. Rejects with {@link ZetaSqlAnalysisError} when the analyzer refuses it.
   */
  analyze(
    catalogId: string,
    sql: string,
    parameters: Readonly<Record<string, SqlType>>,
  ): Promise<AnalyzedStatement>;
  stop(): Promise<void>;
}

/** Starts the ZetaSQL server on a free loopback port; resolves once it answers. */
export async function startZetaSql(): Promise<ZetaSqlServer> {
  if (!existsSync(SERVER_BINARY)) {
    throw new Error(
      `ZetaSQL is not installed in ${ZETASQL_DIR}. Run \`bash scripts/install-emulators.sh\` ` +
        '(needs npm and the npm registry), or `npm run test:emulators`, which runs it first.',
    );
  }
  const zetasql = loadClientPackage();
  const port = await freePort();
  // The client library talks to `localhost:PORT`; the server binds the same name.
  zetasql.ZetaSQLClient.init(port);
  const client = zetasql.ZetaSQLClient.getInstance();
  const server: GroupProcess = await startGroupProcess({
    label: 'zetasql',
    command: SERVER_BINARY,
    args: ['localhost', String(port)],
    ready: async () => {
      try {
        await client.formatSql({ sql: 'SELECT 1' });
        return true;
      } catch {
        return false;
      }
    },
    readyTimeoutMs: 30_000,
  });
  try {
    const languageOptions = (await new zetasql.LanguageOptions().enableMaximumLanguageFeatures()).serialize();
    return {
      async registerCatalog(tables) {
        const response = await client.registerCatalog({
          simpleCatalog: {
            name: 'docline',
            table: tables.map((table) => ({
              name: table.name,
              column: table.columns.map((column) => ({ name: column.name, type: typeProto(column.type) })),
            })),
            builtinFunctionOptions: { languageOptions },
          },
        });
        if (!response) throw new Error('ZetaSQL registerCatalog answered nothing');
        return String(response.registeredId);
      },
      async analyze(catalogId, sql, parameters) {
        let response: AnalyzeResponse | undefined;
        try {
          response = await client.analyze({
            registeredCatalogId: catalogId,
            sqlStatement: sql,
            options: {
              languageOptions,
              queryParameters: Object.entries(parameters).map(([name, type]) => ({
                name,
                type: typeProto(type),
              })),
              errorMessageMode: 'ERROR_MESSAGE_ONE_LINE',
            },
          });
        } catch (error) {
          const e = error as { code?: number; details?: string; message?: string };
          // gRPC INVALID_ARGUMENT (3) is the analyzer's refusal; anything else is the server's trouble.
          if (e.code === 3) throw new ZetaSqlAnalysisError(e.details ?? String(e.message));
          throw error;
        }
        const statement = response?.resolvedStatement;
        if (!statement?.node) throw new Error(`ZetaSQL resolved no statement for: ${sql}`);
        const node = statement[statement.node] as { outputColumnList?: OutputColumn[] } | undefined;
        return {
          kind: statement.node,
          outputColumns: (node?.outputColumnList ?? []).map((c) => ({
            name: c.name,
            type: typeName(c.column.type),
          })),
        };
      },
      stop: () => server.stop(),
    };
  } catch (error) {
    await server.stop();
    throw error;
  }
}

// --- The parts of the client package this module uses. ---

interface TypeProto {
  typeKind: string | number;
  arrayType?: { elementType: TypeProto } | null;
  structType?: { field: Array<{ fieldName: string; fieldType: TypeProto }> } | null;
}
interface OutputColumn {
  name: string;
  column: { type: TypeProto };
}
interface AnalyzeResponse {
  resolvedStatement?: ({ node?: string } & Record<string, unknown>) | null;
}
interface ZetaSqlClient {
  formatSql(request: { sql: string }): Promise<unknown>;
  registerCatalog(request: unknown): Promise<{ registeredId: { toString(): string } } | undefined>;
  analyze(request: unknown): Promise<AnalyzeResponse | undefined>;
}
interface ZetaSqlPackage {
  ZetaSQLClient: { init(port: number): void; getInstance(): ZetaSqlClient };
  LanguageOptions: new () => { enableMaximumLanguageFeatures(): Promise<{ serialize(): unknown }> };
}

function loadClientPackage(): ZetaSqlPackage {
  // Loaded from .tools at run time: the package is not a dependency of the project.
  return require(PACKAGE_DIR) as ZetaSqlPackage;
}

/** TypeKind numbers of zetasql/public/type.proto (the client answers enums as numbers). */
const TYPE_KINDS: Readonly<Record<string, number>> = {
  INT64: 2,
  BOOL: 5,
  DOUBLE: 7,
  STRING: 8,
  BYTES: 9,
  DATE: 10,
  ARRAY: 16,
  STRUCT: 17,
  TIMESTAMP: 19,
  TIME: 20,
  DATETIME: 21,
  GEOGRAPHY: 22,
  NUMERIC: 23,
  BIGNUMERIC: 24,
  JSON: 26,
  INTERVAL: 27,
};
const KIND_NAMES = new Map(Object.entries(TYPE_KINDS).map(([name, kind]) => [kind, name]));
// @google-cloud/bigquery also accepts the legacy names.
const ALIASES: Readonly<Record<string, string>> = {
  INTEGER: 'INT64',
  BOOLEAN: 'BOOL',
  FLOAT: 'DOUBLE',
  FLOAT64: 'DOUBLE',
};

/** A {@link SqlType} as ZetaSQL's TypeProto. */
export function typeProto(type: SqlType): TypeProto {
  if (typeof type === 'string') {
    const name = ALIASES[type] ?? type;
    if (!(name in TYPE_KINDS) || name === 'ARRAY' || name === 'STRUCT') {
      throw new Error(`no ZetaSQL simple type for "${type}"`);
    }
    return { typeKind: `TYPE_${name}` };
  }
  if (Array.isArray(type)) {
    return { typeKind: 'TYPE_ARRAY', arrayType: { elementType: typeProto((type as readonly [SqlType])[0]) } };
  }
  return {
    typeKind: 'TYPE_STRUCT',
    structType: {
      field: Object.entries(type as Record<string, SqlType>).map(([fieldName, fieldType]) => ({
        fieldName,
        fieldType: typeProto(fieldType),
      })),
    },
  };
}

/** A resolved TypeProto as GoogleSQL writes it: `STRING`, `ARRAY<STRING>`, `STRUCT<a INT64>`. */
function typeName(type: TypeProto): string {
  const kind =
    typeof type.typeKind === 'number'
      ? (KIND_NAMES.get(type.typeKind) ?? `TYPE_${type.typeKind}`)
      : type.typeKind.replace(/^TYPE_/, '');
  if (kind === 'ARRAY' && type.arrayType) return `ARRAY<${typeName(type.arrayType.elementType)}>`;
  if (kind === 'STRUCT' && type.structType) {
    return `STRUCT<${type.structType.field.map((f) => `${f.fieldName} ${typeName(f.fieldType)}`).join(', ')}>`;
  }
  return kind;
}
