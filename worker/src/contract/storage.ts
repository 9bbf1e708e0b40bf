/**
 * The Cloud Storage side of the pipeline: what the bucket's notification delivers, how the push
 * subscription filters it, and what a bucket name looks like. The stack, the policy pack, the
 * worker and the local tools read these, so a notification and the worker that parses it agree.
 */

/** The event type that is work: a new object (or a new generation of one). */
export const NOTIFIED_EVENT_TYPE = 'OBJECT_FINALIZE';

/** The notification payload the worker parses: the object resource as JSON, with its generation. */
export const NOTIFICATION_PAYLOAD_FORMAT = 'JSON_API_V1';

/** The push subscription's filter: only new objects are work. */
export const PUSH_FILTER = `attributes.eventType = "${NOTIFIED_EVENT_TYPE}"`;

/** A Cloud Storage bucket name (3–222 characters; dots allowed, as in domain-named buckets). */
export const BUCKET_NAME = /^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$/;

/**
 * Where the memo bucket keeps its keys' lease objects: the one prefix of it the worker may
 * overwrite (the stack's IAM condition names it; GcsMemoStore writes there).
 */
export const MEMO_LEASE_PREFIX = 'leases/';
