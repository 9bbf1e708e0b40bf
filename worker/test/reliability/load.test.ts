import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Announcer } from '../../../local/lib/announcer';
import { LOCAL_BUCKET, LOCAL_NAMES, type Pipeline, startPipeline } from '../../../local/lib/pipeline';
import type { OutgoingMessage } from '../../../local/lib/pubsub';
import { postPush, type WorkerLogLine } from '../../../local/lib/worker-process';
import { seededRandom } from '../../../sim/random';
import { objectUri } from '../../src/core/event';
import { isAnswer, LogAudit, peakRssBytes, quantile, recordCase, tempDataDir } from './support/harness';

/*
 * Load: 10,000 messages through the Pub/Sub emulator into the real worker (its own composition
 * root, SQLite, offline analyzer), object dedup mode:
 *   6,500 documents announced once, 1,000 announced twice (doubled notifications: 2,000 messages),
 *   1,000 identical redeliveries (the exact push of an announced message, sent again to the worker
 *   while the emulator delivers it), and 500 bad notifications (5%).
 * Expected: one row per valid document and per bad message, none lost, none twice; analyses equal
 * to the valid documents plus the overlaps (a second delivery that passed the lookup before the
 * first one's write), which are reported.
 */

const SUITE = 'load';
const SINGLES = 6_500;
const DOUBLED = 1_000;
const REDELIVERIES = 1_000;
const BAD = 500;
const TOTAL_MESSAGES = SINGLES + 2 * DOUBLED + REDELIVERIES + BAD;
const VALID = SINGLES + DOUBLED;
const PUBLISH_BATCH = 1_000;
const REDELIVERY_CONCURRENCY = 16;
const MAX_PEAK_RSS_BYTES = 1024 * 1024 * 1024;

/** A deterministic shuffle, so that a failing run can be reproduced. */
function shuffled<T>(items: T[], seed = 20261130): T[] {
  const random = seededRandom(seed);
  const out = [...items];
  for (let i = out.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** A text invoice the offline analyzer reads; number and supplier differ per document. */
function invoiceText(i: number): Buffer {
  const number = `LD-${String(i).padStart(6, '0')}`;
  return Buffer.from(
    [
      'FACTURE',
      '',
      `Fournisseur Charge ${i} SARL`,
      `N° de facture : ${number}`,
      'Date : 30 novembre 2026',
      '',
      `Désignation          Quantité   Prix unitaire HT   Total HT`,
      `Prestation ${i % 97}          1           ${100 + (i % 900)},00   ${100 + (i % 900)},00`,
      '',
      `Montant HT   ${100 + (i % 900)},00 €`,
      `TVA (20 %)   ${((100 + (i % 900)) * 0.2).toFixed(2).replace('.', ',')} €`,
      `Net à payer  ${((100 + (i % 900)) * 1.2).toFixed(2).replace('.', ',')} €`,
      '',
    ].join('\n'),
  );
}

interface Planned {
  message: OutgoingMessage;
  kind: 'single' | 'doubled' | 'bad';
  uri?: string;
}

describe('load: 10,000 messages with duplicates and bad input (worker process, SQLite, Pub/Sub emulator)', () => {
  const data = tempDataDir('load');
  const audit = new LogAudit();
  let pipeline: Pipeline;

  beforeAll(async () => {
    pipeline = await startPipeline({
      dataDir: data.dir,
      settings: {
        ackDeadlineSeconds: 60,
        minRetryBackoffSeconds: 1,
        maxRetryBackoffSeconds: 2,
        maxDeliveryAttempts: 5,
      },
    });
    audit.watch(pipeline.worker);
  });

  afterAll(async () => {
    await pipeline?.stop();
    data.cleanup();
  });

  it('records each valid document once, each bad message once, loses none, and reports latency and memory', async () => {
    const worker = pipeline.worker;
    const answers = new Map<string, WorkerLogLine[]>();
    let answerLines = 0;
    let notifyProgress = () => {};
    worker.events.on('line', (line: WorkerLogLine) => {
      if (!isAnswer(line)) return;
      const id = String(line.messageId);
      answers.set(id, [...(answers.get(id) ?? []), line]);
      answerLines += 1;
      notifyProgress();
    });

    // The documents, written straight into the local bucket (what an upload does before announcing).
    const plan: Planned[] = [];
    const resources: Array<{ resource: Awaited<ReturnType<typeof pipeline.bucket.put>>['resource'] }> = [];
    for (let start = 0; start < VALID; start += 250) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(250, VALID - start) }, (_, k) =>
          pipeline.bucket.put(LOCAL_BUCKET, `load/${start + k}.txt`, invoiceText(start + k), 'text/plain'),
        ),
      );
      resources.push(...batch);
    }
    resources.forEach(({ resource }, i) => {
      const uri = objectUri(resource.bucket, resource.name, resource.generation);
      const data = JSON.stringify(resource);
      const kind = i < SINGLES ? 'single' : 'doubled';
      plan.push({ message: { data, attributes: Announcer.attributes(resource, null, 1) }, kind, uri });
      if (kind === 'doubled')
        plan.push({ message: { data, attributes: Announcer.attributes(resource, null, 2) }, kind, uri });
    });
    // Bad input: notifications that can never be work, each keyed by its own messageId.
    for (let b = 0; b < BAD; b += 1) {
      const { resource } = resources[b]!;
      const attributes = Announcer.attributes(resource, null, 9);
      const spoilers: Array<() => OutgoingMessage> = [
        () => ({ data: JSON.stringify(resource), attributes: { ...attributes, eventType: 'OBJECT_DELETE' } }),
        () => ({ data: JSON.stringify(resource), attributes: { ...attributes, objectGeneration: 'abc' } }),
        () => ({
          data: JSON.stringify(resource),
          attributes: { ...attributes, objectId: `../load/${b}.txt` },
        }),
        () => ({ data: JSON.stringify(resource), attributes: { ...attributes, payloadFormat: 'NONE' } }),
        () => ({ data: `not json ${b}`, attributes }),
      ];
      plan.push({ message: spoilers[b % spoilers.length]!(), kind: 'bad' });
    }
    const order = shuffled(plan);
    expect(order.length + REDELIVERIES).toBe(TOTAL_MESSAGES);

    const started = performance.now();
    const published: Array<{ id: string; planned: Planned }> = [];
    for (let start = 0; start < order.length; start += PUBLISH_BATCH) {
      const batch = order.slice(start, start + PUBLISH_BATCH);
      const ids = await pipeline.pubsub.publish(
        LOCAL_NAMES.topic,
        batch.map((p) => p.message),
      );
      published.push(...ids.map((id, k) => ({ id, planned: batch[k]! })));
    }

    // Identical redeliveries: the exact push of a published single, sent again to the worker.
    const redelivered = published.filter((p) => p.planned.kind === 'single').slice(0, REDELIVERIES);
    const redeliveryStatuses: number[] = [];
    const queue = [...redelivered];
    await Promise.all(
      Array.from({ length: REDELIVERY_CONCURRENCY }, async () => {
        for (let next = queue.shift(); next; next = queue.shift()) {
          const body = {
            message: {
              data: Buffer.from(next.planned.message.data).toString('base64'),
              attributes: next.planned.message.attributes,
              messageId: next.id,
              message_id: next.id,
              publishTime: new Date().toISOString(),
            },
            subscription: `projects/${pipeline.projectId}/subscriptions/${LOCAL_NAMES.pushSubscription}`,
          };
          const res = await postPush(worker.url, body);
          await res.arrayBuffer();
          redeliveryStatuses.push(res.status);
        }
      }),
    );

    // Done when every published message and every redelivery has its answer line.
    const redeliveredIds = new Set(redelivered.map((r) => r.id));
    const complete = () =>
      published.every((p) => (answers.get(p.id)?.length ?? 0) >= (redeliveredIds.has(p.id) ? 2 : 1));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`only ${answerLines} of ${TOTAL_MESSAGES} answers within 5 minutes`)),
        300_000,
      );
      notifyProgress = () => {
        if (answerLines >= TOTAL_MESSAGES && complete()) {
          clearTimeout(timer);
          resolve();
        }
      };
      notifyProgress();
    });
    const elapsedMs = performance.now() - started;
    const peak = peakRssBytes(worker.child.pid);

    const db = new DatabaseSync(path.join(data.dir, 'docline.sqlite'), { readOnly: true });
    const scalar = (sql: string) => Number((db.prepare(sql).get() as { n: number }).n);
    const totalRows = scalar('SELECT COUNT(*) AS n FROM rows');
    const okRows = scalar("SELECT COUNT(*) AS n FROM rows WHERE status = 'ok'");
    const rejectedRows = scalar("SELECT COUNT(*) AS n FROM rows WHERE status = 'rejected'");
    const duplicateRows = scalar(
      'SELECT COUNT(*) AS n FROM (SELECT object_uri FROM rows WHERE object_uri IS NOT NULL AND status = ' +
        "'ok' GROUP BY object_uri HAVING COUNT(*) > 1)",
    );
    const column = (sql: string) => new Set((db.prepare(sql).all() as Array<{ v: string }>).map((r) => r.v));
    const recordedUris = column("SELECT object_uri AS v FROM rows WHERE status = 'ok'");
    const rejectedIds = column("SELECT message_id AS v FROM rows WHERE status = 'rejected'");
    db.close();
    const validUris = new Set(plan.filter((p) => p.uri).map((p) => p.uri!));
    const lost = [...validUris].filter((u) => !recordedUris.has(u)).length;
    const badLost = published.filter((p) => p.planned.kind === 'bad' && !rejectedIds.has(p.id)).length;

    const lines = [...answers.values()].flat();
    const analyses = lines.filter((l) => l.analysed === true).length;
    const overlaps = lines.filter((l) => l.status === 'duplicate' && l.analysed === true).length;
    const analysedPerUri = new Map<string, number>();
    for (const l of lines)
      if (l.analysed === true)
        analysedPerUri.set(String(l.objectUri), (analysedPerUri.get(String(l.objectUri)) ?? 0) + 1);
    const latencies = lines.map((l) => Number(l.latencyMs)).filter((n) => Number.isFinite(n));
    const p50 = quantile(latencies, 0.5);
    const p99 = quantile(latencies, 0.99);
    const duplicatesAnswered = lines.filter((l) => l.status === 'duplicate').length;

    const healthy =
      totalRows === VALID + BAD &&
      okRows === VALID &&
      rejectedRows === BAD &&
      duplicateRows === 0 &&
      lost + badLost === 0 &&
      analyses - overlaps === VALID;
    recordCase({
      suite: SUITE,
      case: `${TOTAL_MESSAGES} messages (${SINGLES} single, ${DOUBLED}×2 doubled, ${REDELIVERIES} redeliveries, ${BAD} bad)`,
      expected: `rows ${VALID} ok + ${BAD} rejected; 0 duplicate rows; 0 lost; analyses − overlaps = ${VALID}`,
      observed: `rows ${okRows} ok + ${rejectedRows} rejected; ${duplicateRows} duplicate rows; ${lost + badLost} lost; analyses − overlaps = ${analyses - overlaps} (${overlaps} overlaps)`,
      rows: totalRows,
      analyses,
      pass: healthy,
    });
    const redeliveriesOk = redeliveryStatuses.filter((s) => s === 200).length === REDELIVERIES;
    recordCase({
      suite: SUITE,
      case: 'load latency and memory',
      expected: `redeliveries 200; ≥${TOTAL_MESSAGES} answers; peak RSS < ${MAX_PEAK_RSS_BYTES / 2 ** 20} MiB`,
      observed: `${redeliveriesOk ? 'redeliveries 200' : 'REDELIVERIES FAILED'}; ${answerLines} answers (${duplicatesAnswered} duplicate) in ${(elapsedMs / 1000).toFixed(1)} s; p50 ${p50} ms, p99 ${p99} ms; peak RSS ${Math.round((peak ?? 0) / 2 ** 20)} MiB`,
      rows: '-',
      analyses: '-',
      pass: redeliveriesOk && answerLines >= TOTAL_MESSAGES && peak !== null && peak < MAX_PEAK_RSS_BYTES,
    });
    process.stdout.write(
      `load: ${TOTAL_MESSAGES} messages in ${(elapsedMs / 1000).toFixed(1)} s; worker latency p50 ${p50} ms, p99 ${p99} ms; peak RSS ${Math.round((peak ?? 0) / 2 ** 20)} MiB; overlaps ${overlaps}\n`,
    );

    expect(redeliveryStatuses).toHaveLength(REDELIVERIES);
    expect(redeliveryStatuses.every((s) => s === 200)).toBe(true);
    expect(totalRows).toBe(VALID + BAD);
    expect(okRows).toBe(VALID);
    expect(rejectedRows).toBe(BAD);
    expect(duplicateRows).toBe(0);
    expect(lost).toBe(0);
    expect(badLost).toBe(0);
    expect(analyses - overlaps).toBe(VALID);
    expect([...validUris].every((u) => (analysedPerUri.get(u) ?? 0) >= 1)).toBe(true);
    expect(answerLines).toBeGreaterThanOrEqual(TOTAL_MESSAGES);
    expect(peak).not.toBeNull();
    expect(peak!).toBeLessThan(MAX_PEAK_RSS_BYTES);
  });

  it('never logs document content', () => {
    const contents = [/LD-\d{6}/, /Fournisseur Charge \d+ SARL/];
    audit.expectNoLeaks(SUITE, contents, TOTAL_MESSAGES, 'log audit (invoice numbers, suppliers)');
  });
});
