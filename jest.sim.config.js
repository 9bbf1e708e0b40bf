/**
 * `npm run test:sim`: the fault simulator's suite (sim/test/): the named scenarios, the mutants the invariants must catch,
 * a fixed set of small seeds that covers every fault kind, replay determinism, and the invariant
 * checks themselves. Each run takes the process's timers and clock (virtual time), so one suite at
 * a time.
 * @type {import('jest').Config}
 */
module.exports = {
  ...require('./jest.base'),
  testMatch: ['<rootDir>/sim/test/**/*.test.ts'],
  maxWorkers: 1,
  // One suite at a time, each in a worker process that is replaced once a suite leaves it above
  // this heap: in one process (jest's in-band mode) the suites' module registries piled up to the
  // 4 GB heap limit and CI died in the mutant hunt.
  workerIdleMemoryLimit: '1GB',
  testTimeout: 300_000,
};
