import { type Mode, mutate, FIXTURE_TYPES as T, validStack } from './fixtures';
import { check, summary } from './run';

const MODES: Mode[] = ['update', 'preview'];

describe.each(MODES)('notification-delete-before-replace (%s)', (mode) => {
  it('passes the shipped notification, which is replaced delete-first', async () => {
    expect(await check(validStack(mode))).toEqual([]);
  });

  it('blocks a notification without the option: the engine would replace it create-before-delete', async () => {
    const stack = mutate(validStack(mode), 'documents', T.notification, (n) => ({ ...n, options: {} }));
    const diagnostics = await check(stack);

    expect(summary(diagnostics)).toEqual(['notification-delete-before-replace @ documents']);
    expect(diagnostics[0]?.enforcementLevel).toBe('mandatory');
    expect(diagnostics[0]?.message).toMatch(/two notifications, publishing every upload twice/);
    expect(diagnostics[0]?.message).toMatch(/deleteBeforeReplace: true/);
  });

  it('blocks a notification with deleteBeforeReplace set to false', async () => {
    const stack = mutate(validStack(mode), 'documents', T.notification, (n) => ({
      ...n,
      options: { deleteBeforeReplace: false },
    }));

    expect(summary(await check(stack))).toEqual(['notification-delete-before-replace @ documents']);
  });

  it('looks at notifications only: a subscription without the option is not its concern', async () => {
    const stack = mutate(validStack(mode), 'documents-push', T.subscription, (s) => ({
      ...s,
      options: { deleteBeforeReplace: false },
    }));

    expect(await check(stack)).toEqual([]);
  });
});
