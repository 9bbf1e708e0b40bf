/**
 * `npm run test:emulators`: the adapters against independent emulators (worker/test/emulators/):
 * fake-gcs-server and bigquery-emulator, built by scripts/install-emulators.sh into .tools/bin,
 * plus the Pub/Sub emulator; and every BigQuery statement analysed by ZetaSQL, which the same
 * script installs into .tools/zetasql. One suite at a time: each starts its emulators once.
 * @type {import('jest').Config}
 */
module.exports = {
  ...require('./jest.base'),
  testMatch: ['<rootDir>/worker/test/emulators/**/*.test.ts'],
  maxWorkers: 1,
  testTimeout: 180_000,
};
