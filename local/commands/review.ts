/**
 * `npm run review [-- --port 8080] [--who NAME] [--data-dir DIR]`: the review page for the local
 * pipeline's rows whose verdict is not `none` (local/lib/review-server.ts), on 127.0.0.1. Each
 * correction is kept beside the rows and applied by the documents view; none is a second row.
 */
import { userInfo } from 'node:os';
import { parseCommandArgs, runCommand, UsageError } from '../lib/args';
import { localReviewBackend } from '../lib/review-local';
import { createReviewServer } from '../lib/review-server';

const USAGE = 'usage: npm run review -- [--port N] [--who NAME] [--data-dir DIR]';

async function main(): Promise<void> {
  const { values } = parseCommandArgs(
    process.argv.slice(2),
    { port: { type: 'string' }, who: { type: 'string' }, 'data-dir': { type: 'string' } },
    USAGE,
  );
  const port = Number(values.port ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw new UsageError(`--port ${values.port}: not a port. ${USAGE}`);
  const backend = localReviewBackend(values['data-dir'] ?? process.env.DOCLINE_DATA_DIR);
  const who = values.who ?? userInfo().username;
  const server = createReviewServer({ backend, who });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const address = server.address();
  const open = (await backend.documents()).filter((r) => r.review && r.review !== 'none').length;
  console.log(
    `review page on http://127.0.0.1:${typeof address === 'object' && address ? address.port : port}/ ` +
      `(${open} documents whose verdict is not none; corrections by ${who}); Ctrl+C stops it`,
  );
  const stop = () => server.close(() => void backend.close());
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

runCommand('review', main);
