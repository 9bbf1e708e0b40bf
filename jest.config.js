/**
 * The unit and integration suites that `npm test` runs. Suites under `reliability/`,
 * `emulators/` and `saxon/` folders are long-running and have scripts of their own, as do
 * `*.browser.test.ts` files.
 * @type {import('jest').Config}
 */
module.exports = {
  ...require('./jest.base'),
  testMatch: ['<rootDir>/{worker,infra,policies,local,bench}/test/**/*.test.ts'],
  testPathIgnorePatterns: [
    '/node_modules/',
    '/reliability/',
    '/emulators/',
    '/saxon/',
    '/infra/test/engine/',
    '\\.browser\\.test\\.ts$',
  ],
};
