import { broken, runSeed } from '../faults/soak';

async function main() {
  const seeds = process.argv.slice(2).map(Number);
  const tally: Record<string, number> = {};
  for (const seed of seeds) {
    const { result, verdict } = await runSeed(seed);
    const c = result.faults.counts;
    for (const [id] of broken(verdict)) {
      const tags = [];
      if (id === 'I2')
        tags.push(c['bigquery.hungStatement'] ? 'hungStatement' : c['memo.hang'] ? 'memoHang' : 'other');
      if (id === 'I4') tags.push(c['bigquery.slowStatement'] ? 'slowStatement' : 'other');
      if (id === 'I5')
        tags.push(
          c['pubsub.doubledNotification'] || c['pubsub.redeliveryWhileRunning']
            ? 'concurrent deliveries'
            : c['gemini.rateLimited']
              ? '429'
              : 'other',
        );
      const k = `${id}:${tags.join(',')}`;
      tally[k] = (tally[k] ?? 0) + 1;
      if (k.endsWith('other')) console.log(seed, id, verdict.violations[id][0]?.slice(0, 150));
    }
  }
  console.log(tally);
}
main().then(() => process.exit(0));
