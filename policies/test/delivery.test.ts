import { durationSeconds } from '../rules/delivery';
import { type Mode, mutate, remove, FIXTURE_TYPES as T, validStack } from './fixtures';
import { UNKNOWN } from './harness';
import { check, summary } from './run';

const MODES: Mode[] = ['update', 'preview'];

type Props = Record<string, unknown>;
function push(mode: Mode, change: (props: Props) => Props) {
  return mutate(validStack(mode), 'documents-push', T.subscription, (s) => ({
    ...s,
    props: change(s.props),
  }));
}
function without(props: Props, key: string): Props {
  const { [key]: _, ...rest } = props;
  return rest;
}

describe.each(MODES)('the delivery rules (%s)', (mode) => {
  it('report a push subscription without an OIDC token', async () => {
    const stack = push(mode, (p) => ({ ...p, pushConfig: without(p.pushConfig as Props, 'oidcToken') }));
    const diagnostics = await check(stack);
    expect(summary(diagnostics)).toEqual(['push-subscription-delivery @ documents-push']);
    expect(diagnostics[0]?.message).toMatch(
      /sends no OIDC token.*Set pushConfig\.oidcToken\.serviceAccountEmail/,
    );
  });

  it('report a push subscription without a dead-letter policy', async () => {
    const diagnostics = await check(push(mode, (p) => without(p, 'deadLetterPolicy')));
    expect(summary(diagnostics)).toEqual(['push-subscription-delivery @ documents-push']);
    expect(diagnostics[0]?.message).toMatch(/no dead-letter policy.*Set deadLetterPolicy/);
  });

  it('report a push subscription without a retry policy', async () => {
    const diagnostics = await check(push(mode, (p) => without(p, 'retryPolicy')));
    expect(summary(diagnostics)).toEqual(['push-subscription-delivery @ documents-push']);
    expect(diagnostics[0]?.message).toMatch(/no retry policy.*Set retryPolicy/);
  });

  it('leave pull subscriptions alone', async () => {
    const stack = mutate(validStack(mode), 'documents-dead-letters', T.subscription, (s) => s);
    expect(summary(await check(stack))).toEqual([]);
  });

  it('report an ack deadline below the worker timeout plus the margin, with the value to set', async () => {
    const diagnostics = await check(push(mode, (p) => ({ ...p, ackDeadlineSeconds: 95 })));
    expect(summary(diagnostics)).toEqual(['ack-deadline-covers-worker-timeout @ documents-push']);
    expect(diagnostics[0]?.message).toMatch(
      /ack deadline of 95s but service 'worker' may take 90s.*at least 100/,
    );
  });

  it('accept an ack deadline of exactly the timeout plus the margin', async () => {
    expect(await check(push(mode, (p) => ({ ...p, ackDeadlineSeconds: 100 })))).toEqual([]);
  });

  it("count Pub/Sub's 10 s default when no ack deadline is set", async () => {
    const diagnostics = await check(push(mode, (p) => without(p, 'ackDeadlineSeconds')));
    expect(summary(diagnostics)).toEqual(['ack-deadline-covers-worker-timeout @ documents-push']);
    expect(diagnostics[0]?.message).toMatch(/ack deadline of 10s/);
  });

  it('report a service timeout raised above the ack deadline', async () => {
    const stack = mutate(validStack(mode), 'worker', T.service, (s) => ({
      ...s,
      props: { ...s.props, template: { ...(s.props.template as Props), timeout: '300s' } },
    }));
    const diagnostics = await check(stack);
    expect(summary(diagnostics)).toEqual(['ack-deadline-covers-worker-timeout @ documents-push']);
  });

  it('read the margin from the policy configuration', async () => {
    const diagnostics = await check(validStack(mode), {
      'ack-deadline-covers-worker-timeout': { marginSeconds: 40 },
    });
    expect(summary(diagnostics)).toEqual(['ack-deadline-covers-worker-timeout @ documents-push']);
    expect(diagnostics[0]?.message).toMatch(/at least 130 \(timeout \+ 40s margin/);
  });

  it('report a push subscription whose target service cannot be told', async () => {
    const stack = mutate(validStack(mode), 'documents-push', T.subscription, (s) => ({
      ...s,
      props: { ...s.props, pushConfig: { ...(s.props.pushConfig as Props), pushEndpoint: UNKNOWN } },
      propertyDependencies: { ...s.propertyDependencies, pushConfig: [] },
    }));
    const diagnostics = await check(stack);
    expect(summary(diagnostics)).toEqual(['ack-deadline-covers-worker-timeout @ documents-push']);
    expect(diagnostics[0]?.message).toMatch(/Cannot tell which Cloud Run service/);
  });

  it('report a dead-letter topic that nobody subscribes to', async () => {
    const diagnostics = await check(remove(validStack(mode), 'documents-dead-letters', T.subscription));
    expect(summary(diagnostics)).toEqual(['dead-letter-topic-subscribed @ documents-push']);
    expect(diagnostics[0]?.message).toMatch(
      /'documents-dead-letters' .* has no subscription.*Add a pull subscription/,
    );
  });
});

describe('the delivery rules (update)', () => {
  it('find the target service by its URL when the endpoint carries no dependency', async () => {
    const stack = mutate(validStack('update'), 'documents-push', T.subscription, (s) => ({
      ...s,
      propertyDependencies: { ...s.propertyDependencies, pushConfig: [] },
    }));
    expect(await check(stack)).toEqual([]);
  });

  it('find the dead-letter subscription by topic name when it carries no dependency', async () => {
    const stack = mutate(validStack('update'), 'documents-dead-letters', T.subscription, {
      propertyDependencies: {},
    });
    expect(await check(stack)).toEqual([]);
  });
});

describe('durationSeconds', () => {
  it('reads Pub/Sub and Cloud Run duration strings', () => {
    expect([
      durationSeconds('90s'),
      durationSeconds('1.5s'),
      durationSeconds('90'),
      durationSeconds('1m'),
    ]).toEqual([90, 1.5, undefined, undefined]);
  });
});
