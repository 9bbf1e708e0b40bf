/**
 * Values the stack fixes that were once stack keys: the components use them, and the preview names
 * them when a stack file still sets the retired key (RETIRED_KEYS in config.ts).
 */

/** Images the repository's cleanup policy keeps whatever their age (the most recent versions). */
export const IMAGE_KEEP_COUNT = 10;

/** A push message unacknowledged this long means the pipeline is stuck (30 minutes). */
export const OLDEST_UNACKED_AGE_SECONDS = 1800;

/** Daily at 03:00 UTC (Cloud Scheduler cron), after the day's uploads have had their hour to arrive. */
export const RECONCILE_SCHEDULE = '0 3 * * *';

/**
 * The duplicate-answers alert fires above this many `duplicate` answers per thousand over 10 minutes
 * (10 = 1 %): a few per mille is at-least-once delivery, a few percent means a doubled notification
 * or an ack deadline too short for the worker.
 */
export const DUPLICATE_RATE_PER_MILLE = 10;
