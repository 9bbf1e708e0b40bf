/**
 * The browser suite (`npm run test:browser`): the review page in Debian's Chromium, headless,
 * driven by playwright-core. scripts/install-chromium.sh installs the browser first.
 * @type {import('jest').Config}
 */
module.exports = {
  ...require('./jest.base'),
  testMatch: ['<rootDir>/local/test/**/*.browser.test.ts'],
  testTimeout: 120_000,
};
