import { ProgressLine } from '../lib/progress';

/** A fake stream that records what is written. */
const output = (isTTY: boolean) => {
  const written: string[] = [];
  return { isTTY, columns: 40, written, write: (text: string) => written.push(text) };
};

describe('ProgressLine', () => {
  it('off a terminal, writes exactly the lines and never the progress text', () => {
    const out = output(false);
    const progress = new ProgressLine(out);
    progress.update('inbox: 1 done');
    progress.line('uploaded   a.txt#1 (10 bytes, message 1)');
    progress.update('inbox: 2 done');
    progress.clear();
    expect(out.written.join('')).toBe('uploaded   a.txt#1 (10 bytes, message 1)\n');
  });

  it('on a terminal, keeps the progress text on the last line, under the lines, redrawn in place', () => {
    const out = output(true);
    let now = 0;
    const progress = new ProgressLine(out, { redrawMs: 100, now: () => now });
    progress.update('inbox: 1 done');
    progress.line('ok         a.txt#1');
    now = 150;
    progress.update('inbox: 2 done');
    progress.clear();
    expect(out.written).toEqual([
      '\r\x1b[2Kinbox: 1 done',
      '\r\x1b[2Kok         a.txt#1\ninbox: 1 done',
      '\r\x1b[2Kinbox: 2 done',
      '\r\x1b[2K',
    ]);
  });

  it('redraws at most every redrawMs, and cuts the text to the terminal width', () => {
    const out = output(true);
    let now = 0;
    const progress = new ProgressLine(out, { redrawMs: 100, now: () => now });
    progress.update('first');
    now = 10;
    progress.update('x'.repeat(100));
    expect(out.written).toEqual(['\r\x1b[2Kfirst']);
    progress.line('a line');
    expect(out.written.at(-1)).toBe(`\r\x1b[2Ka line\n${'x'.repeat(38)}…`);
    progress.clear();
  });
});
