/**
 * `npm run test:validation`: e-invoices validated by Saxon-HE with the official artefacts
 * (worker/test/saxon/), installed first by scripts/install-en16931.sh. One runner at a time.
 * @type {import('jest').Config}
 */
module.exports = {
  ...require('./jest.base'),
  testMatch: ['<rootDir>/worker/test/saxon/**/*.test.ts'],
  maxWorkers: 1,
  testTimeout: 300_000,
};
