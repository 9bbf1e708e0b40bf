import { runMemoryDeliveries } from './stage';

/**
 * The memory stage's worker process (`node --expose-gc --import tsx child.ts DELIVERIES EVERY
 * CONCURRENCY REDELIVERY_EVERY`): runs the deliveries and prints one JSON line per sample, then
 * one with the summary, to stdout (bench/memory/run-memory.ts reads them).
 */
async function main(): Promise<void> {
  const [deliveries, sampleEvery, concurrency, redeliveryEvery] = process.argv.slice(2).map(Number);
  const summary = await runMemoryDeliveries({
    deliveries: deliveries!,
    sampleEvery: sampleEvery!,
    concurrency: concurrency!,
    redeliveryEvery: redeliveryEvery!,
    onSample: (sample) => process.stdout.write(`${JSON.stringify({ sample })}\n`),
  });
  process.stdout.write(`${JSON.stringify({ summary })}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
