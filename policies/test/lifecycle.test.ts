import { type Mode, mutate, FIXTURE_TYPES as T, validStack } from './fixtures';
import { check, summary } from './run';

const MODES: Mode[] = ['update', 'preview'];

describe.each(MODES)('notification-delete-before-replace (%s)', (mode) => {
  it('passes the shipped notification, which is replaced delete-first', async () => {
    expect(await check(validStack(mode))).toEqual([]);
  });

  it('blocks a notification without the option: the engine would replace it create-before-delete', async () => {
    const stack = mutate(validStack(mode), 'documents', T.notification, { options: {} });
    const diagnostics = await check(stack);

    expect(summary(diagnostics)).toEqual(['notification-delete-before-replace @ documents']);
    expect(diagnostics[0]?.enforcementLevel).toBe('mandatory');
    expect(diagnostics[0]?.message).toMatch(/two notifications, publishing every upload twice/);
    expect(diagnostics[0]?.message).toMatch(/deleteBeforeReplace: true/);
  });

  it('blocks a notification with deleteBeforeReplace set to false', async () => {
    const stack = mutate(validStack(mode), 'documents', T.notification, {
      options: { deleteBeforeReplace: false },
    });

    expect(summary(await check(stack))).toEqual(['notification-delete-before-replace @ documents']);
  });

  it('looks at notifications only: a subscription without the option is not its concern', async () => {
    const stack = mutate(validStack(mode), 'documents-push', T.subscription, {
      options: { deleteBeforeReplace: false },
    });

    expect(await check(stack)).toEqual([]);
  });
});

describe.each(MODES)('kept-data-protected (%s)', (mode) => {
  /** The shipped fixture as a stack that keeps its data: explicit keep settings, and protected. */
  const kept = (protect: boolean) => {
    let stack = validStack(mode);
    stack = mutate(stack, 'documents', T.bucket, { props: { forceDestroy: false }, options: { protect } });
    stack = mutate(stack, 'docline', T.dataset, {
      props: { deleteContentsOnDestroy: false },
      options: { protect },
    });
    return mutate(stack, 'deliveries', T.table, {
      props: { deletionProtection: true },
      options: { protect },
    });
  };

  it('passes kept data that is protected, and data that is not kept (a throwaway stack)', async () => {
    expect(await check(kept(true))).toEqual([]);
    const throwaway = mutate(validStack(mode), 'documents', T.bucket, { props: { forceDestroy: true } });
    expect(await check(throwaway)).toEqual([]);
  });

  it('blocks the documents bucket, the dataset and the table when they keep their data unprotected', async () => {
    const diagnostics = await check(kept(false));

    expect(summary(diagnostics)).toEqual([
      'kept-data-protected @ documents',
      'kept-data-protected @ docline',
      'kept-data-protected @ deliveries',
    ]);
    expect(diagnostics.every((d) => d.enforcementLevel === 'mandatory')).toBe(true);
    expect(diagnostics[0]?.message).toMatch(
      /keeps the documents \(forceDestroy: false\) but is not protected/,
    );
    expect(diagnostics[2]?.message).toMatch(/protect: true \(docline: deletionProtection\)/);
  });

  it('looks at the documents bucket only, and at tables, not views', async () => {
    let stack = mutate(kept(true), 'documents-view', T.table, { props: { deletionProtection: true } });
    stack = mutate(stack, 'documents', T.bucket, {
      props: { labels: { 'docline-role': 'memo' } },
      options: {},
    });
    expect(summary(await check(stack)).filter((d) => d.startsWith('kept-data'))).toEqual([]);
  });
});
