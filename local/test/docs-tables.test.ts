import { readFileSync } from 'node:fs';
import path from 'node:path';
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
