import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../worker/src/config';
import { RECONCILE_OPTIONS } from '../commands/reconcile';
import { REPO_ROOT } from '../lib/worker-process';

/** The rows of a docs table between `<!-- NAME:start -->` and `<!-- NAME:end -->`, as cells. */
function tableRows(file: string, name: string): string[][] {
  const doc = readFileSync(path.join(REPO_ROOT, file), 'utf8');
  const section = doc.split(`<!-- ${name}:start -->`)[1]?.split(`<!-- ${name}:end -->`)[0] ?? '';
  return section
    .split('\n')
    .filter((line) => line.startsWith('|') && !line.startsWith('|---'))
    .slice(1)
    .map((line) =>
      line
        .replaceAll('\\|', '\u0000')
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim().replaceAll('\u0000', '|')),
    );
}

describe('the reconcile options table of docs/operations.md', () => {
  it('lists exactly the options the command parses (help aside)', () => {
    const listed = tableRows('docs/operations.md', 'reconcile-options').map(
      ([option]) => /^`--([\w-]+)/.exec(option ?? '')?.[1],
    );
    const parsed = Object.keys(RECONCILE_OPTIONS).filter((name) => name !== 'help');
    expect(listed).toEqual(parsed);
  });
});

describe('the emulator tools table of docs/testing.md', () => {
  const script = readFileSync(path.join(REPO_ROOT, 'scripts/install-emulators.sh'), 'utf8');
  const pinned = (variable: string) => new RegExp(`^${variable}="([^"]+)"`, 'm').exec(script)?.[1];

  it('gives the versions scripts/install-emulators.sh pins', () => {
    const versions = Object.fromEntries(
      tableRows('docs/testing.md', 'emulator-tools').map(([tool, version]) => [
        (tool ?? '').split(/[ ,]/)[0],
        version,
      ]),
    );
    expect(versions).toEqual({
      'fake-gcs-server': pinned('FAKE_GCS_SERVER_VERSION'),
      'bigquery-emulator': pinned('BIGQUERY_EMULATOR_VERSION'),
      ZetaSQL: pinned('ZETASQL_VERSION'),
    });
    expect(pinned('ZETASQL_VERSION')).toMatch(/^\d+\.\d+\.\d+$/);
  });
});

describe('the worker variables table of docs/configuration.md', () => {
  /** The default a row gives: the first number or word in backticks of its default cell. */
  const documentedDefaults = () =>
    Object.fromEntries(
      tableRows('docs/configuration.md', 'worker-env').map(([variable, fallback]) => [
        /`([A-Z0-9_]+)`/.exec(variable ?? '')?.[1],
        /`([^`]+)`/.exec(fallback ?? '')?.[1],
      ]),
    );

  it('gives the defaults the worker applies when the variable is unset', () => {
    // A BigQuery table makes the worker read the store's settings too; nothing else is set.
    const config = loadConfig({ BIGQUERY_TABLE: 'acme-dev.docline_dev.deliveries' });
    if (config.store.kind !== 'bigquery') throw new Error('expected the BigQuery store');
    const applied = {
      DEDUP_WINDOW_DAYS: String(config.store.dedupWindowDays),
      MAXIMUM_BYTES_BILLED: String(config.store.maximumBytesBilled),
      WRITE_MODE: config.store.writeMode,
      DEDUP_KEY: config.dedupKeyMode,
      MAX_OBJECT_BYTES: String(config.maxObjectBytes),
      PUSH_BODY_LIMIT_BYTES: String(config.pushBodyLimitBytes),
      ANALYZER_MAX_IN_FLIGHT: String(config.admission.maxInFlight),
      ANALYZER_QUOTA_WAIT_MS: String(config.admission.maxWaitMs),
    };
    const documented = documentedDefaults();

    expect(Object.fromEntries(Object.keys(applied).map((name) => [name, documented[name]]))).toEqual(applied);
  });
});
