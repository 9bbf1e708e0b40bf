/**
 * One progress line for a terminal, under the usual per-outcome lines. On a TTY the progress text
 * stays on the last line and is redrawn in place (at most every `redrawMs`); every other line is
 * printed above it. Anywhere else (a pipe, a file, a test) only the lines are written, exactly as
 * they would be without a progress line, so scripts that read them see no difference.
 */

/** What the progress line writes to: process.stdout, or a fake in tests. */
export interface TextOutput {
  isTTY?: boolean;
  columns?: number;
  write(text: string): unknown;
}

const CLEAR_LINE = '\r\x1b[2K';

export class ProgressLine {
  private status = '';
  private onScreen = false;
  private lastDrawMs = Number.NEGATIVE_INFINITY;
  private pending: NodeJS.Timeout | undefined;
  private readonly tty: boolean;

  constructor(
    private readonly out: TextOutput,
    private readonly options: { redrawMs?: number; now?: () => number } = {},
  ) {
    this.tty = out.isTTY === true;
  }

  /** Whether the progress text is shown at all (on a terminal): callers skip computing it otherwise. */
  get shown(): boolean {
    return this.tty;
  }

  /** Prints one line above the progress line (or just the line, off a terminal). */
  line(text: string): void {
    if (!this.tty) {
      this.out.write(`${text}\n`);
      return;
    }
    this.out.write(`${this.onScreen ? CLEAR_LINE : ''}${text}\n${this.fitted()}`);
    this.onScreen = this.status !== '';
    this.lastDrawMs = this.now();
  }

  /** Prints a line to another stream (stderr), keeping the progress line intact on the terminal. */
  lineTo(stream: { write(text: string): unknown }, text: string): void {
    if (this.tty && this.onScreen) this.out.write(CLEAR_LINE);
    stream.write(`${text}\n`);
    if (this.tty && this.onScreen) this.out.write(this.fitted());
  }

  /** Sets the progress text; drawn on a terminal only, at most every `redrawMs` (the last one always). */
  update(text: string): void {
    this.status = text;
    if (!this.tty) return;
    const waitMs = this.lastDrawMs + (this.options.redrawMs ?? 100) - this.now();
    if (waitMs <= 0) this.draw();
    else this.pending ??= setTimeout(() => this.draw(), waitMs).unref();
  }

  /** Removes the progress line from the terminal (before the command prints its last lines). */
  clear(): void {
    clearTimeout(this.pending);
    this.pending = undefined;
    if (this.tty && this.onScreen) this.out.write(CLEAR_LINE);
    this.onScreen = false;
    this.status = '';
  }

  private draw(): void {
    clearTimeout(this.pending);
    this.pending = undefined;
    if (this.status === '' && !this.onScreen) return;
    this.out.write(`${CLEAR_LINE}${this.fitted()}`);
    this.onScreen = this.status !== '';
    this.lastDrawMs = this.now();
  }

  /** The status cut to the terminal's width, so that it never wraps onto a second line. */
  private fitted(): string {
    const width = (this.out.columns ?? 80) - 1;
    return this.status.length > width ? `${this.status.slice(0, Math.max(0, width - 1))}…` : this.status;
  }

  private now(): number {
    return (this.options.now ?? (() => performance.now()))();
  }
}
