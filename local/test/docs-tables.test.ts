import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../worker/src/config';
import { docsTableRows } from '../../worker/test/support/docs-table';
import { RECONCILE_OPTIONS } from '../commands/reconcile';
import { REPO_ROOT } from '../lib/worker-process';

describe('the reconcile options table of docs/operations.md', () => {
  it('lists exactly the options the command parses (help aside)', () => {
    const listed = docsTableRows('docs/operations.md', 'reconcile-options').map(
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
      docsTableRows('docs/testing.md', 'emulator-tools').map(([tool, version]) => [
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
      docsTableRows('docs/configuration.md', 'worker-env').map(([variable, fallback]) => [
        /`([A-Z0-9_]+)`/.exec(variable ?? '')?.[1],
        /`([^`]+)`/.exec(fallback ?? '')?.[1],
      ]),
    );

  it('gives the defaults the worker applies when the variable is unset', () => {
    // A BigQuery table makes the worker read the store's settings too; nothing else is set.
    const config = loadConfig({ BIGQUERY_TABLE: 'acme-dev.docline_dev.deliveries' });
    if (config.store.kind !== 'bigquery') throw new Error('expected the BigQuery store');
    const applied = {
      REDELIVERY_WINDOW_DAYS: String(config.store.redeliveryWindowDays),
      MAXIMUM_BYTES_BILLED: String(config.store.maximumBytesBilled),
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
