/**
 * `npm run test:engine`: the stack under the real Pulumi engine (infra/test/engine/), with the
 * language host and provider stand-ins of that folder. One engine at a time.
 * @type {import('jest').Config}
 */
module.exports = {
  ...require('./jest.base'),
  testMatch: ['<rootDir>/infra/test/engine/**/*.test.ts'],
  maxWorkers: 1,
  testTimeout: 600_000,
};
