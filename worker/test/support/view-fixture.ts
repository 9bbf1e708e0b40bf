import { DatabaseSync } from 'node:sqlite';
import { insertSql, sqliteValues } from '../../src/adapters/sqlite-store';
import { type Row, sqliteTableDdl } from '../../src/contract/row';
import { VIEW_NAMES, viewSql } from '../../src/contract/views';
import { testRow } from './builders';

/**
 * Rows as BigQuery can hold them (no uniqueness), with each case of the views once: a race that
 * wrote one key twice, a tie on processed_at, a doubled notification in message mode, rejections,
 * an event that is not work, and two days. Shared by the dialect test and the emulator test.
 */
export const at = (time: string) => `2026-11-30T${time}.000Z`;
const objectColumns = (bucket: string, name: string, generation: string) => ({
  object_uri: `gs://${bucket}/${name}#${generation}`,
  bucket,
  object_name: name,
  generation,
});

export const VIEW_FIXTURE: Row[] = [
  // One key written twice by a race: the earlier row is the document.
  testRow({
    message_id: 'm2',
    dedup_key: 'gs://b/a.pdf#1',
    ...objectColumns('b', 'a.pdf', '1'),
    processed_at: at('10:00:01'),
  }),
  testRow({
    message_id: 'm1',
    dedup_key: 'gs://b/a.pdf#1',
    ...objectColumns('b', 'a.pdf', '1'),
    processed_at: at('10:00:00'),
  }),
  // A tie on processed_at: the smaller message_id wins.
  testRow({
    message_id: 'm4',
    dedup_key: 'gs://b/tie.pdf#1',
    ...objectColumns('b', 'tie.pdf', '1'),
    processed_at: at('11:00:00'),
  }),
  testRow({
    message_id: 'm3',
    dedup_key: 'gs://b/tie.pdf#1',
    ...objectColumns('b', 'tie.pdf', '1'),
    processed_at: at('11:00:00'),
  }),
  // Message mode: one object analysed under two message keys.
  testRow({
    message_id: 'm5',
    dedup_key: 'm5',
    ...objectColumns('b', 'twice.pdf', '7'),
    processed_at: at('12:00:00'),
  }),
  testRow({
    message_id: 'm6',
    dedup_key: 'm6',
    ...objectColumns('b', 'twice.pdf', '7'),
    processed_at: at('12:00:05'),
  }),
  // A rejection, an event that is not work (no object), a rejected duplicate of an ok object.
  testRow({
    message_id: 'm7',
    dedup_key: 'gs://b/big.pdf#3',
    ...objectColumns('b', 'big.pdf', '3'),
    status: 'rejected',
    reason: 'too_large',
    analysis: null,
    model: null,
    processed_at: at('13:00:00'),
  }),
  testRow({
    message_id: 'm8',
    dedup_key: 'm8',
    object_uri: null,
    bucket: null,
    object_name: null,
    generation: null,
    status: 'rejected',
    reason: 'unsupported_event_type',
    analysis: null,
    processed_at: '2026-12-01T00:30:00.000Z',
  }),
  testRow({
    message_id: 'm9',
    dedup_key: 'm9',
    ...objectColumns('b', 'a.pdf', '1'),
    status: 'rejected',
    reason: 'object_gone',
    analysis: null,
    processed_at: '2026-12-01T01:00:00.000Z',
  }),
];

/**
 * An in-memory SQLite table `rows` holding the given rows, without the unique key (BigQuery
 * enforces none, and the fixture needs duplicate keys), with the three SQLite views over it.
 */
export function rowsDatabase(rows: Row[]): DatabaseSync {
  const db = new DatabaseSync(':memory:');
  db.exec(sqliteTableDdl('rows', { unique: false }));
  for (const view of VIEW_NAMES) db.exec(`CREATE VIEW ${view} AS ${viewSql('sqlite', view, 'rows')}`);
  const insert = db.prepare(insertSql('rows'));
  for (const row of rows) insert.run(sqliteValues(row));
  return db;
}
