/**
 * `npm run check:notifications -- --bucket B [--topic T]`: lists the bucket's actual notification
 * configs and exits 1 when more than one feeds the pipeline, the duplicate that makes every document
 * produce two rows and two paid analyses. Run it after every deploy; a notification made by hand is
 * invisible to the policy pack's stack rules.
 *
 * Options: --topic T (topic id or projects/P/topics/T; without it every config that delivers
 * OBJECT_FINALIZE counts), --api-endpoint URL (a local test server; STORAGE_EMULATOR_HOST works too),
 * --timeout-ms N. Exit codes: 0 at most one feeds the pipeline, 1 more than one, 2 usage or API error.
 */
import { parseArgs } from 'node:util';
import { GcsNotificationLister } from './gcs-notification-lister';
import {
  deleteCommand,
  describeNotification,
  feedsPipeline,
  type NotificationLister,
  PIPELINE_EVENT_TYPE,
} from './notifications';

/** What to check. */
export interface CheckOptions {
  bucket: string;
  /** Only configs publishing to this topic feed the pipeline; all FINALIZE configs when absent. */
  topic?: string;
}

/** Exit codes of the command. */
export const EXIT = { ok: 0, duplicate: 1, error: 2 } as const;

/**
 * Lists the bucket's notifications, prints one line each, and returns the exit code. Listing errors
 * are printed and answered with {@link EXIT.error}: an unchecked bucket must not look clean.
 */
export async function checkNotifications(
  options: CheckOptions,
  lister: NotificationLister,
  print: (line: string) => void,
): Promise<number> {
  let notifications: Awaited<ReturnType<NotificationLister['list']>>;
  try {
    notifications = await lister.list(options.bucket);
  } catch (error) {
    print(
      `ERROR: cannot list the notifications of bucket ${options.bucket}: ${error instanceof Error ? error.message : String(error)}`,
    );
    return EXIT.error;
  }
  const scope = options.topic ? `${PIPELINE_EVENT_TYPE} to topic ${options.topic}` : PIPELINE_EVENT_TYPE;
  print(
    `Bucket ${options.bucket}: ${notifications.length} notification config(s); the pipeline is fed by ${scope}.`,
  );
  const feeding = notifications.filter((n) => feedsPipeline(n, options.topic));
  for (const n of notifications)
    print(`  ${feedsPipeline(n, options.topic) ? 'FEEDS ' : 'other '} ${describeNotification(n)}`);
  if (feeding.length > 1) {
    print(
      `DUPLICATE: ${feeding.length} notifications feed the pipeline, so every upload is processed and billed ${feeding.length} times. ` +
        'Keep the one the stack manages (its id is the notificationId of the stack\u2019s Notification) and delete the others:',
    );
    for (const n of feeding) print(`  ${deleteCommand(options.bucket, n.id)}`);
    return EXIT.duplicate;
  }
  if (feeding.length === 0)
    print('WARNING: no notification feeds the pipeline: uploads will not be processed.');
  else print('OK: exactly one notification feeds the pipeline.');
  return EXIT.ok;
}

/** Runs the command with the given arguments (without `node script`), returning the exit code. */
export async function main(argv: string[], print: (line: string) => void = console.log): Promise<number> {
  let values: {
    bucket?: string;
    topic?: string;
    'api-endpoint'?: string;
    'timeout-ms'?: string;
    help?: boolean;
  };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        bucket: { type: 'string' },
        topic: { type: 'string' },
        'api-endpoint': { type: 'string' },
        'timeout-ms': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    print(`ERROR: ${error instanceof Error ? error.message : String(error)}`);
    return EXIT.error;
  }
  const usage =
    'usage: npm run check:notifications -- --bucket BUCKET [--topic TOPIC] [--api-endpoint URL] [--timeout-ms N]';
  if (values.help) {
    print(usage);
    return EXIT.ok;
  }
  if (!values.bucket) {
    print(`ERROR: --bucket is required (the stack output bucketName). ${usage}`);
    return EXIT.error;
  }
  const timeoutMs = values['timeout-ms'] === undefined ? undefined : Number(values['timeout-ms']);
  if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs > 0)) {
    print(`ERROR: --timeout-ms must be a positive whole number (got ${values['timeout-ms']}).`);
    return EXIT.error;
  }
  const lister = new GcsNotificationLister({
    ...(values['api-endpoint'] ? { apiEndpoint: values['api-endpoint'] } : {}),
    ...(timeoutMs ? { timeoutMs } : {}),
  });
  return checkNotifications(
    { bucket: values.bucket, ...(values.topic ? { topic: values.topic } : {}) },
    lister,
    print,
  );
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      console.error(error);
      process.exitCode = EXIT.error;
    },
  );
}
