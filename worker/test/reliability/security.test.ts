import path from 'node:path';
import { LocalBucket } from '../../../local/lib/local-bucket';
import { postPush, startWorkerProcess, type WorkerProcess } from '../../../local/lib/worker-process';
import type { SqliteStore } from '../../src/adapters/stores/sqlite-store';
import { pushBody } from '../support/builders';
import {
  analysesByName,
  FAULTY_WORKER,
  isAnswer,
  LogAudit,
  openRows,
  recordCase,
  sampleInvoices,
  tempDataDir,
} from './support/harness';
import { createSigner, PUSH_AUDIENCE, PUSH_SERVICE_ACCOUNT, pushClaims, refusedTokens } from './support/oidc';

/*
 * In-app verification of the push OIDC token, in a worker process: PUSH_AUTH_AUDIENCE and
 * PUSH_AUTH_SERVICE_ACCOUNT as the stack outputs set them, and the verifier's certificates
 * replaced by a local key (the test composition's FAULT_PUSH_CERTS). Every refused request names
 * an object that exists, so a request that slipped through would leave a row and an analysis.
 */

const SUITE = 'security';
const BUCKET = 'docline-local';
const trusted = createSigner('push-key-1');
const stranger = createSigner('push-key-2');
const impostor = createSigner('push-key-3');
const invoices = sampleInvoices();

describe('push token verification (worker process)', () => {
  const data = tempDataDir('security');
  const audit = new LogAudit();
  const bucket = new LocalBucket(path.join(data.dir, 'bucket'));
  const tokens: string[] = [];
  let worker: WorkerProcess;
  let rows: SqliteStore;

  beforeAll(async () => {
    worker = audit.watch(
      await startWorkerProcess({
        entry: FAULTY_WORKER,
        env: {
          DOCLINE_DATA_DIR: data.dir,
          PUSH_AUTH_AUDIENCE: PUSH_AUDIENCE,
          PUSH_AUTH_SERVICE_ACCOUNT: PUSH_SERVICE_ACCOUNT,
          FAULT_PUSH_CERTS: JSON.stringify({ [trusted.kid]: trusted.publicPem }),
        },
      }),
    );
    rows = openRows(data.dir);
  });

  afterAll(async () => {
    await rows?.close();
    await worker?.stop();
    data.cleanup();
  });

  async function push(id: string, name: string, authorization: string | undefined) {
    const invoice = invoices[Number(id.replace(/\D/g, '')) % invoices.length]!;
    const { resource } = await bucket.put(BUCKET, name, invoice.bytes, 'text/plain');
    const res = await postPush(
      worker.url,
      pushBody(id, { bucket: BUCKET, name, generation: resource.generation, size: invoice.bytes.length }),
      authorization ? { authorization } : {},
    );
    return { http: res.status, text: await res.text() };
  }

  const nowSeconds = () => Math.floor(Date.now() / 1000);
  const refused = refusedTokens(trusted, stranger, impostor, nowSeconds());

  it.each(refused)('refuses $case with $http and leaves no trace', async (c) => {
    const id = `sec${refused.indexOf(c) + 1}`;
    const name = `security/${id}.txt`;
    const token = c.authorization?.split(' ')[1];
    if (token) tokens.push(token);
    const answer = await push(id, name, c.authorization);
    const traces = {
      rows: rows.rowsWhere('message_id', id).length,
      analyses: analysesByName(data.dir).get(name) ?? 0,
      handled: worker.lines.filter((l) => l.messageId === id && isAnswer(l)).length,
    };
    const echoed = token ? answer.text.includes(token) : false;
    recordCase({
      suite: SUITE,
      case: `token: ${c.case}`,
      expected: `${c.http}, no row, no analysis, token not echoed`,
      observed: `${answer.http}, ${traces.rows ? 'ROW' : 'no row'}, ${traces.analyses ? 'ANALYSED' : 'no analysis'}, ${echoed ? 'TOKEN ECHOED' : 'token not echoed'}`,
      rows: traces.rows,
      analyses: traces.analyses,
    });
    expect(answer.http).toBe(c.http);
    expect(JSON.parse(answer.text).error).toBe(c.http === 401 ? 'unauthenticated' : 'forbidden');
    expect(traces).toEqual({ rows: 0, analyses: 0, handled: 0 });
    expect(echoed).toBe(false);
  });

  it('accepts a valid token from the push service account and processes the document once', async () => {
    const token = trusted.sign(pushClaims(nowSeconds()));
    tokens.push(token);
    const answer = await push('sec100', 'security/valid.txt', `Bearer ${token}`);
    await worker.waitForLine((l) => l.messageId === 'sec100' && isAnswer(l));
    const rowCount = rows.rowsWhere('message_id', 'sec100').length;
    const analyses = analysesByName(data.dir).get('security/valid.txt') ?? 0;
    recordCase({
      suite: SUITE,
      case: 'token: valid',
      expected: '200 ok, 1 row, 1 analysis',
      observed: `${answer.http} ${JSON.parse(answer.text).status}, ${rowCount} row, ${analyses} analysis`,
      rows: rowCount,
      analyses,
    });
    expect(answer.http).toBe(200);
    expect(JSON.parse(answer.text)).toEqual({ status: 'ok', messageId: 'sec100' });
    expect(rowCount).toBe(1);
    expect(analyses).toBe(1);
  });

  it('never logs a token, its signature, or document content', async () => {
    // Log lines travel through a pipe: wait for the line of the last request before auditing.
    await worker.waitForLine((l) => l.messageId === 'sec100' && isAnswer(l));
    const signatures = tokens.map((t) => t.split('.')[2]).filter((s): s is string => Boolean(s));
    const forbidden = [...tokens, ...signatures, ...invoices.flatMap((i) => i.secrets)];
    audit.expectNoLeaks(SUITE, forbidden, refused.length, 'log audit (tokens, document content)');
  });
});
