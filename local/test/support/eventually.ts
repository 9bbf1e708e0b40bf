/**
 * Waits until `check` holds, polling every `everyMs`, and fails after `timeoutMs` with what it was
 * waiting for: tests wait on observable state, never on a sleep standing in for it.
 */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  what: string,
  { timeoutMs = 5_000, everyMs = 5 }: { timeoutMs?: number; everyMs?: number } = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
