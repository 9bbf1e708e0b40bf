/**
 * `npm run review [-- --port 8080] [--who NAME] [--data-dir DIR]`: the review page for the local
 * pipeline's rows whose verdict is not `none` (local/lib/review-server.ts), on 127.0.0.1. Each
 * correction is kept beside the rows and applied by the documents view; none is a second row.
 * `--target cloud --dataset PROJECT.DATASET [--location EU]`: the same page over a deployed stack,
 * with the user's credentials (local/lib/review-cloud.ts).
 */
import { userInfo } from 'node:os';
import { parseCommandArgs, runCommand, UsageError } from '../lib/args';
import { cloudReviewBackend } from '../lib/review-cloud';
import { localReviewBackend } from '../lib/review-local';
import { createReviewServer } from '../lib/review-server';

const USAGE =
  'usage: npm run review -- [--port N] [--who NAME] [--data-dir DIR | --target cloud --dataset PROJECT.DATASET [--location L]]';

async function main(): Promise<void> {
  const { values } = parseCommandArgs(
    process.argv.slice(2),
    {
      port: { type: 'string' },
      who: { type: 'string' },
      'data-dir': { type: 'string' },
      target: { type: 'string' },
      dataset: { type: 'string' },
      location: { type: 'string' },
    },
    USAGE,
  );
  const port = Number(values.port ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw new UsageError(`--port ${values.port}: not a port. ${USAGE}`);
  const target = values.target ?? 'local';
  if (target !== 'local' && target !== 'cloud')
    throw new UsageError(`--target ${target}: local or cloud. ${USAGE}`);
  if (target === 'cloud' && !/^[\w-]+\.\w+$/u.test(values.dataset ?? ''))
    throw new UsageError(`--target cloud needs --dataset PROJECT.DATASET. ${USAGE}`);
  const backend =
    target === 'cloud'
      ? {
          ...cloudReviewBackend({ dataset: values.dataset!, location: values.location }),
          close: async () => {},
        }
      : localReviewBackend(values['data-dir'] ?? process.env.DOCLINE_DATA_DIR);
  const who = values.who ?? userInfo().username;
  const server = createReviewServer({ backend, who });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const address = server.address();
  const open = (await backend.documents()).filter(
    (r) => r.status === 'ok' && r.review && r.review !== 'none',
  ).length;
  console.log(
    `review page on http://127.0.0.1:${typeof address === 'object' && address ? address.port : port}/ ` +
      `(${open} documents whose verdict is not none; corrections by ${who}); Ctrl+C stops it`,
  );
  const stop = () => server.close(() => void backend.close());
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

runCommand('review', main);
