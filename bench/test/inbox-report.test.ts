import { readFileSync } from 'node:fs';
import path from 'node:path';
import { combine, type InboxStageResult } from '../inbox-stage';
import {
  type BenchResults,
  GOALS,
  INBOX_FIGURES,
  inboxGoals,
  renderInboxSummary,
  renderReport,
  replaceInboxFigures,
} from '../report';

const operations = readFileSync(path.join(__dirname, '../../docs/operations.md'), 'utf8');
const results = JSON.parse(readFileSync(path.join(__dirname, '../results.json'), 'utf8')) as BenchResults;

/** An inbox section; override what the test is about. */
function inbox(overrides: Partial<InboxStageResult> = {}, copies: Partial<InboxStageResult['copies']> = {}) {
  const drop = {
    documents: 2000,
    seconds: 10,
    perSecond: 200,
    dropSeconds: [9, 11],
    complete: true,
    commandCpuMsPerDocument: 1,
    workerCpuMsPerDocument: 1,
    machineBusyShare: 1,
  };
  return {
    ...drop,
    overPublishPath: 0.5,
    publishPathPerSecond: 400,
    concurrency: 32,
    date: '2026-11-30T23:00:00.000Z',
    loadAverageStart: [1, 1, 1],
    ...overrides,
    copies: { ...drop, overDistinct: 0.9, warnings: 1999, ...copies },
  } satisfies InboxStageResult;
}

describe('the inbox section of bench/results.json', () => {
  it('has the four figures of the issue at `inbox`, and the copied variant beside them', () => {
    expect(results.inbox).toBeDefined();
    const section = results.inbox as InboxStageResult;
    for (const key of ['documents', 'seconds', 'perSecond', 'overPublishPath'] as const)
      expect(typeof section[key]).toBe('number');
    for (const key of ['documents', 'seconds', 'perSecond', 'overDistinct'] as const)
      expect(typeof section.copies[key]).toBe('number');
    expect(section.documents).toBeGreaterThanOrEqual(2000);
    expect(section.copies.documents).toBe(section.documents);
  });

  it('is set against the publish path and the distinct drop it names', () => {
    const section = results.inbox as InboxStageResult;
    expect(section.overPublishPath).toBeCloseTo(section.perSecond / section.publishPathPerSecond, 10);
    expect(section.copies.overDistinct).toBeCloseTo(section.copies.perSecond / section.perSecond, 10);
  });
});

describe('the inbox goals', () => {
  it(`are met at ${GOALS.inboxOverPublishPath} × the publish path and copies at ${GOALS.inboxCopiesOverDistinct} × distinct`, () => {
    const goals = inboxGoals(inbox());
    expect([goals.inboxOverPublishPath?.met, goals.inboxCopiesOverDistinct?.met]).toEqual([true, true]);
  });

  it('are missed just below, or when a drop stopped at its bound', () => {
    expect(inboxGoals(inbox({ overPublishPath: 0.49 })).inboxOverPublishPath?.met).toBe(false);
    expect(inboxGoals(inbox({}, { overDistinct: 0.89 })).inboxCopiesOverDistinct?.met).toBe(false);
    expect(inboxGoals(inbox({ complete: false })).inboxOverPublishPath?.met).toBe(false);
    expect(inboxGoals(inbox({}, { complete: false })).inboxCopiesOverDistinct?.met).toBe(false);
  });

  it('are absent when the stage did not run, and the table says why', () => {
    expect(inboxGoals({ error: 'no emulator' })).toEqual({});
    expect(inboxGoals(undefined)).toEqual({});
    const table = renderReport({ ...results, inbox: { error: 'no emulator' } });
    expect(table).toMatch(/\| 3i \| Inbox: .* \| not run: no emulator \|/);
  });
});

describe('"How fast a drop goes" in docs/operations.md', () => {
  it('is exactly the sentence generated from bench/results.json', () => {
    expect(replaceInboxFigures(operations, results)).toBe(operations);
    expect(renderInboxSummary(results)).toContain(
      `${(results.inbox as InboxStageResult).concurrency} files at once`,
    );
  });

  it('replaces what is between its markers and nothing else, and refuses a document without them', () => {
    const text = (body: string) => `# Ops\n\n${INBOX_FIGURES.start}\n${body}${INBOX_FIGURES.end}\n\nrest\n`;
    expect(replaceInboxFigures(text('typed by hand\n'), results)).toBe(text(renderInboxSummary(results)));
    expect(() => replaceInboxFigures('# Ops\n', results)).toThrow(/markers are missing/);
  });
});

describe('combine: two drops of one variant as one figure', () => {
  it('divides the rows of both drops by their seconds, and keeps each drop’s time', () => {
    const base = inbox();
    const fast = { ...base, seconds: 5, perSecond: 400, dropSeconds: [5] };
    const slow = { ...base, seconds: 20, perSecond: 100, dropSeconds: [20], complete: false };
    const both = combine(fast, slow);
    expect(both.perSecond).toBeCloseTo(4000 / 25, 10);
    expect(both.seconds).toBe(12.5);
    expect(both.dropSeconds).toEqual([5, 20]);
    expect(both.complete).toBe(false);
    expect(both.documents).toBe(2000);
  });
});
