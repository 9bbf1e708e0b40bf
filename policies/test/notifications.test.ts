import { add, type Mode, mutate, FIXTURE_TYPES as T, validStack } from './fixtures';
import { UNKNOWN, urnOf } from './harness';
import { check, summary } from './run';

const MODES: Mode[] = ['update', 'preview'];
const bucketUrn = urnOf({ type: T.bucket, name: 'documents' });
const topicUrn = urnOf({ type: T.topic, name: 'documents-events' });

/** A second notification like the shipped one, for the bucket resource of the stack. */
function secondNotification(mode: Mode, overrides: Record<string, unknown> = {}) {
  return {
    type: T.notification,
    name: 'documents-again',
    props: {
      bucket: mode === 'preview' ? UNKNOWN : 'documents-4f2a1c',
      topic: mode === 'preview' ? UNKNOWN : 'projects/docline-dev/topics/documents-events-91b2',
      eventTypes: ['OBJECT_FINALIZE'],
      payloadFormat: 'JSON_API_V1',
      ...overrides,
    },
    propertyDependencies: { bucket: [bucketUrn], topic: [topicUrn] },
    // Replaced delete-first like the shipped one, so that only the rule under test speaks.
    options: { deleteBeforeReplace: true },
  };
}

describe.each(MODES)('the notification rules (%s)', (mode) => {
  it('pass the shipped stack without any diagnostic', async () => {
    expect(await check(validStack(mode))).toEqual([]);
  });

  it('report a notified topic that enforces its storage policy in transit, on the topic', async () => {
    const enforcing = mutate(validStack(mode), 'documents-events', T.topic, {
      props: {
        messageStoragePolicy: { allowedPersistenceRegions: ['europe-west1'], enforceInTransit: true },
      },
    });
    const diagnostics = await check(enforcing);
    expect(summary(diagnostics)).toEqual(['notified-topic-takes-publishes @ documents-events']);
    expect(diagnostics[0]?.enforcementLevel).toBe('mandatory');
    expect(diagnostics[0]?.message).toMatch(/Set messageStoragePolicy.enforceInTransit: false/);
    // Storage at rest alone is fine.
    const atRest = mutate(validStack(mode), 'documents-events', T.topic, {
      props: {
        messageStoragePolicy: { allowedPersistenceRegions: ['europe-west1'], enforceInTransit: false },
      },
    });
    expect(await check(atRest)).toEqual([]);
  });

  it('report a second notification on the same bucket resource, once, on the second notification', async () => {
    const diagnostics = await check(add(validStack(mode), secondNotification(mode)));
    expect(summary(diagnostics)).toEqual(['one-notification-per-bucket @ documents-again']);
    expect(diagnostics[0]?.enforcementLevel).toBe('mandatory');
    expect(diagnostics[0]?.message).toMatch(/'documents' and 'documents-again' both deliver OBJECT_FINALIZE/);
    expect(diagnostics[0]?.message).toMatch(/remove 'documents-again'/);
  });

  it('keep notifications on two different new buckets apart even when both names are unknown', async () => {
    const other = urnOf({ type: T.bucket, name: 'archive' });
    const stack = add(
      validStack(mode),
      { type: T.bucket, name: 'archive', props: { name: mode === 'preview' ? UNKNOWN : 'archive-1' } },
      { ...secondNotification(mode), propertyDependencies: { bucket: [other], topic: [topicUrn] } },
    );
    const withArchive = stack.map((r) =>
      r.name === 'documents-again' && mode === 'update'
        ? { ...r, props: { ...r.props, bucket: 'archive-1' } }
        : r,
    );
    // The per-bucket rule keeps them apart; only the documents-bucket rule objects, once.
    expect(summary(await check(withArchive))).toEqual(['only-documents-bucket-notifies @ documents-again']);
  });

  it('allows a second notification whose event types do not overlap, and leaves it to the format rule', async () => {
    const diagnostics = await check(
      add(validStack(mode), secondNotification(mode, { eventTypes: ['OBJECT_DELETE'] })),
    );
    expect(summary(diagnostics)).toEqual(['notification-format @ documents-again']);
  });

  it('treats a notification without event types as overlapping every other one', async () => {
    const diagnostics = await check(
      add(validStack(mode), secondNotification(mode, { eventTypes: undefined })),
      { 'notification-format': { eventTypes: ['OBJECT_FINALIZE', 'OBJECT_DELETE'] } },
    );
    expect(summary(diagnostics)).toEqual([
      'notification-format @ documents-again',
      'one-notification-per-bucket @ documents-again',
    ]);
  });

  it('treats unknown event types as overlapping instead of passing', async () => {
    const diagnostics = await check(add(validStack(mode), secondNotification(mode, { eventTypes: UNKNOWN })));
    expect(summary(diagnostics)).toEqual([
      'notification-format @ documents-again',
      'one-notification-per-bucket @ documents-again',
    ]);
    expect(diagnostics[1]?.message).toMatch(/event types unknown until the update runs/);
  });

  it('reports a notification whose bucket is unknown and comes from no bucket of the stack', async () => {
    const orphan = { ...secondNotification('preview'), propertyDependencies: {} };
    const diagnostics = await check(add(validStack(mode), orphan));
    expect(summary(diagnostics)).toEqual(['one-notification-per-bucket @ documents-again']);
    expect(diagnostics[0]?.message).toMatch(/Cannot tell which bucket/);
  });

  it('reports a policy-pack skip nowhere: no rule reads an unknown value unguarded', async () => {
    const diagnostics = await check(add(validStack(mode), secondNotification(mode)));
    expect(diagnostics.filter((d) => /can't run/.test(d.message))).toEqual([]);
  });

  it('reports event types beyond OBJECT_FINALIZE', async () => {
    const stack = mutate(validStack(mode), 'documents', T.notification, {
      props: { eventTypes: ['OBJECT_FINALIZE', 'OBJECT_DELETE'] },
    });
    const diagnostics = await check(stack);
    expect(summary(diagnostics)).toEqual(['notification-format @ documents']);
    expect(diagnostics[0]?.message).toMatch(/delivers OBJECT_DELETE.*Set eventTypes: \['OBJECT_FINALIZE'\]/);
  });

  it('reports a notification that sets no event types', async () => {
    const stack = mutate(validStack(mode), 'documents', T.notification, (n) => {
      const { eventTypes: _, ...props } = n.props;
      return { ...n, props };
    });
    const diagnostics = await check(stack);
    expect(summary(diagnostics)).toEqual(['notification-format @ documents']);
    expect(diagnostics[0]?.message).toMatch(/sets no eventTypes/);
  });

  it('reports a payload format other than JSON_API_V1', async () => {
    const stack = mutate(validStack(mode), 'documents', T.notification, { props: { payloadFormat: 'NONE' } });
    const diagnostics = await check(stack);
    expect(summary(diagnostics)).toEqual(['notification-format @ documents']);
    expect(diagnostics[0]?.message).toMatch(/payloadFormat NONE\. Set payloadFormat: 'JSON_API_V1'/);
  });
});

describe.each(MODES)('only the documents bucket feeds the pipeline (%s)', (mode) => {
  const memoUrn = urnOf({ type: T.bucket, name: 'memo' });
  const memo = {
    type: T.bucket,
    name: 'memo',
    props: { name: 'docline-dev-memo-p', labels: { 'docline-role': 'memo' } },
  };
  const onMemo = {
    ...secondNotification(mode),
    name: 'memo-events',
    props: { ...secondNotification(mode).props, bucket: mode === 'preview' ? UNKNOWN : 'docline-dev-memo-p' },
    propertyDependencies: { bucket: [memoUrn], topic: [topicUrn] },
  };

  it('passes the shipped stack with a memo bucket that has no notification', async () => {
    expect(await check(add(validStack(mode), memo))).toEqual([]);
  });

  it('reports a notification on the memo bucket, once, naming the fix', async () => {
    const diagnostics = await check(add(validStack(mode), memo, onMemo));

    expect(summary(diagnostics)).toEqual(['only-documents-bucket-notifies @ memo-events']);
    expect(diagnostics[0]?.message).toMatch(
      /on bucket resource 'memo', labelled docline-role: memo\. Only the documents bucket/,
    );
  });

  it('reports a notification on a bucket outside the stack, named literally', async () => {
    const outside = {
      ...onMemo,
      props: { ...onMemo.props, bucket: 'someone-elses-bucket' },
      propertyDependencies: { topic: [topicUrn] },
    };
    const diagnostics = await check(add(validStack(mode), outside));

    expect(summary(diagnostics)).toEqual(['only-documents-bucket-notifies @ memo-events']);
    expect(diagnostics[0]?.message).toMatch(/which is not a bucket of this stack/);
  });

  it('reports the documents bucket itself once its label is gone', async () => {
    const stack = mutate(validStack(mode), 'documents', T.bucket, { props: { labels: {} } });
    expect(summary(await check(stack))).toEqual(['only-documents-bucket-notifies @ documents']);
  });
});

describe('the notification rules (update)', () => {
  it('match a notification naming the bucket literally with the bucket resource of that name', async () => {
    const literal = { ...secondNotification('update'), propertyDependencies: {} };
    expect(summary(await check(add(validStack('update'), literal)))).toEqual([
      'one-notification-per-bucket @ documents-again',
    ]);
  });
});
