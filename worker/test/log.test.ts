import { TransientError } from '../src/core/errors';
import { JsonLogger, outcomeFields, stackTrace, traceFields } from '../src/log';

describe('JsonLogger', () => {
  it('writes one JSON line per entry in Cloud Logging’s dialect, with child bindings', () => {
    const lines: string[] = [];
    const logger = new JsonLogger({ write: (l) => lines.push(l) }).child({ messageId: '7' });
    logger.warn('rejected: too_large', { status: 'rejected' });
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      { severity: 'WARNING', message: 'rejected: too_large', messageId: '7', status: 'rejected' },
    ]);
  });

  it('drops entries below its level, also in children', () => {
    const lines: string[] = [];
    const logger = new JsonLogger({ level: 'WARNING', write: (l) => lines.push(l) });
    logger.info('hidden');
    logger.child({ a: 1 }).debug('hidden too');
    logger.child({ a: 1 }).error('shown');
    expect(lines).toHaveLength(1);
  });

  it('writes outcome lines whatever its level, without any marker in the line, and still drops chatter', () => {
    const lines: string[] = [];
    const logger = new JsonLogger({ level: 'ERROR', write: (l) => lines.push(l) }).child({ messageId: '9' });
    logger.info('ok', outcomeFields({ status: 'ok' }));
    logger.warn('transient failure', outcomeFields({ status: 'error', httpStatus: 503 }));
    logger.info('chatter', { status: 'ok' });
    logger.debug('more chatter');
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      { severity: 'INFO', message: 'ok', messageId: '9', status: 'ok' },
      { severity: 'WARNING', message: 'transient failure', messageId: '9', status: 'error', httpStatus: 503 },
    ]);
  });

  it('logs errors by name, message and code only', () => {
    const lines: string[] = [];
    const error = Object.assign(new Error('boom'), { code: 'store_busy', secret: 'token-abc' });
    new JsonLogger({ write: (l) => lines.push(l) }).error('failed', { error });
    expect(JSON.parse(lines[0]!).error).toEqual({ name: 'Error', message: 'boom', code: 'store_busy' });
    expect(lines[0]).not.toContain('token-abc');
  });

  it('gives ERROR lines the stack trace of their error and its causes, for Error Reporting', () => {
    const lines: string[] = [];
    const root = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const error = new TransientError('store_busy', 'the store is busy', { cause: root });
    new JsonLogger({ write: (l) => lines.push(l) }).error('unexpected failure', { cause: error });
    const line = JSON.parse(lines[0]!);
    expect(line.cause).toEqual({
      name: 'TransientError',
      message: 'the store is busy',
      code: 'store_busy',
      cause: { name: 'Error', message: 'socket hang up', code: 'ECONNRESET' },
    });
    expect(line.stack_trace).toMatch(/^TransientError: the store is busy\n\s+at /);
    expect(line.stack_trace).toMatch(/\nCaused by: Error: socket hang up\n\s+at /);
  });

  it('keeps stack traces and causes off lines below ERROR', () => {
    const lines: string[] = [];
    const error = new TransientError('store_busy', 'the store is busy', {
      cause: new Error('socket hang up'),
    });
    new JsonLogger({ write: (l) => lines.push(l) }).warn('transient failure', { cause: error });
    const line = JSON.parse(lines[0]!);
    expect(line.stack_trace).toBeUndefined();
    expect(line.cause).toEqual({ name: 'TransientError', message: 'the store is busy', code: 'store_busy' });
  });

  it('names a cause that is no Error by its text', () => {
    const error = new Error('outer', { cause: 'a string reason' });
    expect(stackTrace(error)).toMatch(/\nCaused by: a string reason$/);
  });
});

describe('traceFields', () => {
  it('reads W3C traceparent and the legacy Cloud header', () => {
    expect(
      traceFields({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }, 'p'),
    ).toEqual({
      'logging.googleapis.com/trace': 'projects/p/traces/0af7651916cd43dd8448eb211c80319c',
      'logging.googleapis.com/spanId': 'b7ad6b7169203331',
    });
    expect(traceFields({ 'x-cloud-trace-context': '105445aa7843bc8bf206b12000100000/1;o=1' }, 'p')).toEqual({
      'logging.googleapis.com/trace': 'projects/p/traces/105445aa7843bc8bf206b12000100000',
      'logging.googleapis.com/spanId': '1',
    });
    expect(traceFields({}, 'p')).toEqual({});
    expect(
      traceFields({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }, undefined),
    ).toEqual({});
  });
});
