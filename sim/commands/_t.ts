import { runSchedule } from '../faults/run';
import { generateSchedule } from '../faults/schedule';

async function main() {
  const out: Array<[number, number, number]> = [];
  for (let seed = Number(process.argv[2]); seed < Number(process.argv[3]); seed++) {
    const t0 = performance.now();
    const r = await runSchedule(generateSchedule(seed));
    out.push([
      seed,
      Math.round(performance.now() - t0),
      r.record.requests.reduce((a, q) => a + q.calls.length, 0),
    ]);
  }
  out.sort((a, b) => b[1] - a[1]);
  console.log(
    out
      .slice(0, 8)
      .map((x) => x.join(':'))
      .join(' '),
    'total',
    out.reduce((a, x) => a + x[1], 0),
  );
}
main().then(() => process.exit(0));
