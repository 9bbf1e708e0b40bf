/**
 * A jest reporter that prints the reliability summary table (case, expected, observed, rows,
 * analyses) at the end of `npm run test:reliability`. Each suite appends one JSON line per case to
 * the summary file (support/harness.ts); this reporter empties the file before the run and prints
 * it after, on stdout, so that `--silent` (which silences the tests' console) still shows it. It
 * runs before jest's own summary reporter, whose lines stay the last ones.
 */
const { existsSync, readFileSync, writeFileSync } = require('node:fs');
const { tmpdir } = require('node:os');
const path = require('node:path');

const SUMMARY_FILE =
  process.env.DOCLINE_RELIABILITY_SUMMARY ?? path.join(tmpdir(), 'docline-reliability-summary.jsonl');

const COLUMNS = ['suite', 'case', 'expected', 'observed', 'rows', 'analyses', 'result'];

function cell(value) {
  return String(value ?? '')
    .replaceAll('|', '\\|')
    .replaceAll('\n', ' ');
}

class SummaryReporter {
  onRunStart() {
    writeFileSync(SUMMARY_FILE, '');
  }

  onRunComplete() {
    const entries = existsSync(SUMMARY_FILE)
      ? readFileSync(SUMMARY_FILE, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line))
      : [];
    if (entries.length === 0) return;
    const rows = entries.map((e) => ({ ...e, result: e.pass ? 'ok' : 'MISMATCH' }));
    const widths = COLUMNS.map((c) =>
      Math.min(120, Math.max(c.length, ...rows.map((r) => cell(r[c]).length))),
    );
    const line = (values) =>
      `| ${values.map((v, i) => cell(v).slice(0, widths[i]).padEnd(widths[i])).join(' | ')} |`;
    const out = [
      '',
      'docline reliability summary',
      line(COLUMNS),
      `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`,
      ...rows.map((r) => line(COLUMNS.map((c) => r[c]))),
      `${rows.filter((r) => r.pass).length}/${rows.length} cases as expected`,
      '',
    ];
    process.stdout.write(`${out.join('\n')}\n`);
  }
}

module.exports = SummaryReporter;
