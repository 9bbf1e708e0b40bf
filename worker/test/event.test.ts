import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BadEnvelopeError } from '../src/core/errors';
import { dedupKey, isValidGeneration, objectNameProblem, parsePush } from '../src/core/event';
import { pushBody } from './support/builders';

const fixture = (name: string) => JSON.parse(readFileSync(path.join(__dirname, 'fixtures', name), 'utf8'));

describe('parsePush', () => {
  it('reads the service push body (with deliveryAttempt) into a document event', () => {
    const event = parsePush(fixture('push-finalize-service.json'));
    expect(event).toMatchObject({
      kind: 'document',
      messageId: '22201064101151603',
      deliveryAttempt: 1,
      publishTime: '2026-11-30T00:00:00.456Z',
      subscription: 'projects/acme-dev/subscriptions/docline-push',
      objectUri: 'gs://acme-invoices-dev/2026/11/facture-0042.pdf#1764460800123456',
      object: {
        eventType: 'OBJECT_FINALIZE',
        bucket: 'acme-invoices-dev',
        name: '2026/11/facture-0042.pdf',
        generation: '1764460800123456',
        contentType: 'application/pdf',
        sizeBytes: 48213,
        notificationConfig: 'projects/_/buckets/acme-invoices-dev/notificationConfigs/7',
        eventTime: '2026-11-30T00:00:00.123456Z',
      },
    });
  });

  it('reads the emulator push body (no deliveryAttempt) the same way', () => {
    const event = parsePush(fixture('push-finalize-emulator.json'));
    expect(event).toMatchObject({ kind: 'document', messageId: '1', deliveryAttempt: null });
  });

  it('reads a dead-lettered copy as a document with its new messageId', () => {
    const received = fixture('dead-letter-pull-emulator.json').receivedMessages[0];
    const event = parsePush({
      message: received.message,
      subscription: 'projects/proj/subscriptions/dlq-pull',
    });
    expect(event).toMatchObject({ kind: 'document', messageId: '3' });
    // Same object, so object mode recognises a replay of a processed document as a duplicate.
    expect(dedupKey(event, 'object')).toBe(
      'gs://acme-invoices-dev/2026/11/facture-0042.pdf#1764460800123456',
    );
    expect(dedupKey(event, 'message')).toBe('3');
  });

  it('keeps generations beyond 2^53 exact, as strings', () => {
    const event = parsePush(pushBody('1', { generation: '9223372036854775807' }));
    expect(event.kind === 'document' && event.object.generation).toBe('9223372036854775807');
  });

  it.each([
    ['no message', {}],
    ['message not an object', { message: 'x' }],
    ['messageId missing', { message: { data: '' } }],
    ['messageId with a slash (could collide with a gs:// key)', { message: { messageId: 'gs://b/o#1' } }],
    ['attributes not strings', { message: { messageId: '1', attributes: { a: 1 } } }],
  ])('throws BadEnvelopeError for %s', (_title, body) => {
    expect(() => parsePush(body)).toThrow(BadEnvelopeError);
  });

  it.each([
    ['missing attributes', (b: Msg) => delete b.attributes.objectId, 'invalid_notification'],
    ['wrong payload format', (b: Msg) => (b.attributes.payloadFormat = 'NONE'), 'invalid_notification'],
    ['non-numeric generation', (b: Msg) => (b.attributes.objectGeneration = '12a'), 'invalid_notification'],
    ['negative generation', (b: Msg) => (b.attributes.objectGeneration = '-5'), 'invalid_notification'],
    [
      'generation beyond int64',
      (b: Msg) => (b.attributes.objectGeneration = '9223372036854775808'),
      'invalid_notification',
    ],
    ['data not base64', (b: Msg) => (b.data = 'not base64!'), 'invalid_notification'],
    ['data not JSON', (b: Msg) => (b.data = Buffer.from('nope').toString('base64')), 'invalid_notification'],
    [
      'attributes contradicting the data',
      (b: Msg) =>
        (b.data = Buffer.from(
          JSON.stringify({ name: 'other', bucket: 'acme-invoices-dev', generation: '1764460800123456' }),
        ).toString('base64')),
      'invalid_notification',
    ],
    ['an object name with ..', (b: Msg) => (b.attributes.objectId = 'a/../b'), 'invalid_name'],
    [
      'an OBJECT_DELETE event',
      (b: Msg) => (b.attributes.eventType = 'OBJECT_DELETE'),
      'unsupported_event_type',
    ],
  ])('gives a not-work event for %s', (_title, mutate, reason) => {
    const body = pushBody('77') as { message: Msg };
    mutate(body.message);
    const event = parsePush(body);
    expect(event).toMatchObject({ kind: 'not_work', reason, messageId: '77' });
    expect(dedupKey(event, 'object')).toBe('77');
  });
});

type Msg = { attributes: Record<string, string>; data: string };

describe('objectNameProblem', () => {
  it.each([
    ['2026/11/facture-0042.pdf', null],
    ['factures/été/reçu n°1.pdf', null],
    ['請求書.pdf', null],
    ['', 'empty'],
    ['../secret', "'..'"],
    ['a/./b', "'.'"],
    ['/etc/passwd', 'absolute'],
    ['a\u0000b', 'control'],
    ['x'.repeat(1025), '1024'],
    ['é'.repeat(513), '1024'],
  ])('%j → %s', (name, problem) => {
    const result = objectNameProblem(name);
    if (problem === null) expect(result).toBeNull();
    else expect(result).toContain(problem);
  });
});

describe('isValidGeneration', () => {
  it('accepts positive int64 decimals only', () => {
    // Each list names the values the check gets wrong: none.
    expect(['1', '1764460800123456', '9223372036854775807'].filter((g) => !isValidGeneration(g))).toEqual([]);
    expect(['0', '-1', '01', '1.5', '9223372036854775808', ''].filter(isValidGeneration)).toEqual([]);
  });
});
