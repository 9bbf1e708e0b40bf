import type { Logger } from '../worker/src/core/ports';

/**
 * The worker's logger in a simulation: it writes nothing (the burst and the fault simulator run
 * thousands of deliveries, and the same for every run). What a run observes, it records itself.
 */
export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child: () => silentLogger,
};
