/**
 * `npm run test:reliability`: the reliability and security suites (worker/test/reliability/), which
 * drive real worker processes through the real Pub/Sub emulator. One suite at a time (they start
 * emulators and load the machine), with a summary table printed before jest's own summary.
 * @type {import('jest').Config}
 */
module.exports = {
  ...require('./jest.base'),
  testMatch: ['<rootDir>/worker/test/reliability/**/*.test.ts'],
  maxWorkers: 1,
  testTimeout: 300_000,
  reporters: ['default', '<rootDir>/worker/test/reliability/support/summary-reporter.js'],
};
