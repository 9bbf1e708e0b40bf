import { ledgerEntry } from '../lib/pipeline';

describe('the delivery ledger', () => {
  const at = new Date('2026-11-03T10:00:00.000Z');

  it('keeps an answer’s fields and leaves the rest of the log line out', () => {
    const answer = {
      messageId: '7',
      dedupKey: 'gs://b/a.pdf#1',
      status: 'duplicate',
      duplicateAt: 'seen',
      analysed: false,
      tokens: 0,
    };
    const line = {
      severity: 'INFO',
      message: 'duplicate',
      ...answer,
      latencyMs: 3,
      detail: 'a.pdf: something long',
    };
    expect(ledgerEntry(line, at)).toEqual({ at: '2026-11-03T10:00:00.000Z', ...answer });
  });

  it('keeps failed answers and nothing that is no answer', () => {
    expect(
      ledgerEntry(
        { severity: 'WARNING', message: 'x', status: 'error', error: 'transient', messageId: '8' },
        at,
      ),
    ).toMatchObject({
      status: 'error',
      error: 'transient',
    });
    expect(ledgerEntry({ severity: 'INFO', message: 'listening', port: 8080 }, at)).toBeUndefined();
  });
});
