/**
 * A command for lifecycle.test.ts: starts a server (`sleep`) in its own process group, registers a
 * graceful stop when asked (`graceful`), prints `ready <server pid>` and waits for a signal.
 */
import { startGroupProcess, stopGracefullyOnSignals } from '../../lib/lifecycle';

async function main(): Promise<void> {
  const server = await startGroupProcess({
    label: 'sleep',
    command: 'sleep',
    args: ['600'],
    ready: async () => true,
  });
  if (process.argv.includes('graceful')) {
    stopGracefullyOnSignals(async () => {
      console.log('stopping');
    });
  }
  console.log(`ready ${server.child.pid}`);
  setInterval(() => undefined, 60_000);
}

void main();
