import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { OfflineAnalyzer } from '../../worker/src/adapters/analyzers/offline-analyzer';
import { localGenerationPath } from '../../worker/src/adapters/readers/local-bucket';
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import { assess, CONFIDENCE_FIELDS, THRESHOLDS, type Thresholds } from '../../worker/src/core/review';
import { testRow } from '../../worker/test/support/builders';
import { localReviewBackend } from '../lib/review-local';
import { createReviewServer, type ReviewItem } from '../lib/review-server';

/*
 * The review page in a real browser: Debian's Chromium (scripts/install-chromium.sh), headless,
 * driven by playwright-core. The page is served by the same server `npm run review` starts, over a
 * data folder holding two analysed sample invoices in its bucket: one whose verdict is not `none`
 * (its SIREN and SIRET misread, a digit off, so that they fail their check digit), one whose verdict
 * is `none`.
 */

const CHROMIUM = '/usr/bin/chromium';
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const SCREENSHOT = path.join(__dirname, '..', '..', 'docs', 'images', 'review-page.png');
const SAMPLES = path.join(__dirname, '..', '..', 'samples', 'invoices');
/**
 * Every read value confident: the page is tested on the reasons the tests give each row (a misread
 * identifier, a validation), not on where `npm run eval` last put the calibrated thresholds (they
 * move with the tuning corpus, and a sample's supplier name fell below one).
 */
const TRUSTING = Object.fromEntries(
  Object.keys(THRESHOLDS).map((source) => [source, Object.fromEntries(CONFIDENCE_FIELDS.map((f) => [f, 0]))]),
) as unknown as Thresholds;

let dir: string;
let backend: ReturnType<typeof localReviewBackend>;
let server: Server;
let base: string;
let context: BrowserContext;
let flaggedKey: string;

/**
 * Puts a sample in the local bucket and records its analysed row, as the worker would; `misread`:
 * fields the analysis got wrong (the samples' own identifiers pass their checks).
 */
async function analysed(
  file: string,
  generation: string,
  misread: Partial<Record<'supplier_siren' | 'supplier_siret', string>> = {},
  validation?: Parameters<typeof assess>[2],
): Promise<string> {
  const bytes = readFileSync(path.join(SAMPLES, file));
  const ref = { bucket: 'acme-invoices-dev', name: `2026/11/${file}`, generation };
  const target = localGenerationPath(dataDirLayout(dir).bucket, ref);
  mkdirSync(path.dirname(target), { recursive: true });
  writeFileSync(target, bytes);
  const read = await new OfflineAnalyzer().analyze({ bytes, contentType: 'application/pdf', name: file });
  const result = { ...read, analysis: { ...read.analysis, ...misread } };
  const row = testRow({
    dedup_key: `gs://${ref.bucket}/${ref.name}#${generation}`,
    object_uri: `gs://${ref.bucket}/${ref.name}#${generation}`,
    bucket: ref.bucket,
    object_name: ref.name,
    generation,
    content_type: 'application/pdf',
    analysis: result.analysis,
    model: result.model,
    ...assess(result, TRUSTING, validation),
  });
  await backend.store.record(row);
  return row.dedup_key;
}

async function open(key = flaggedKey): Promise<Page> {
  const page = await context.newPage();
  await page.setViewportSize({ width: 1400, height: 860 });
  await page.goto(`${base}/#${encodeURIComponent(key)}`);
  await page.waitForSelector('body[data-ready="true"]');
  return page;
}

const documentRow = () => backend.store.correctedDocuments({ dedupKey: flaggedKey })[0]!;
const correctionsOf = (field: string) =>
  backend.store.corrections(flaggedKey).filter((c) => c.field === field);

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'docline-review-'));
  backend = localReviewBackend(dir);
  // Its SIREN 812 345 676 read with the last digit wrong, so its SIRET too.
  flaggedKey = await analysed('fr-01-facture-conseil.pdf', '1764460800000001', {
    supplier_siren: '812345674',
    supplier_siret: '81234567400017',
  });
  await analysed('en-01-invoice-design.pdf', '1764460800000002');
  server = createReviewServer({ backend, who: 'claire' });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  context = await chromium.launchPersistentContext(path.join(dir, 'chromium-profile'), {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
  });
}, 120_000);

afterAll(async () => {
  await context?.close();
  await new Promise((resolve) => server?.close(resolve));
  await backend?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the review page, in Chromium', () => {
  it('lists only the rows whose verdict is not none, with the reasons highlighted and the picture', async () => {
    expect(documentRow().review).toContain('check_digit:supplier_siren');
    const page = await open();
    expect(await page.locator('#queue button').allTextContents()).toEqual([
      expect.stringContaining('fr-01-facture-conseil.pdf'),
    ]);
    const flagged = await page
      .locator('.field.flagged')
      .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-field')));
    expect(flagged).toEqual(expect.arrayContaining(['supplier_siren', 'supplier_siret']));
    expect(await page.locator('.field[data-field="supplier_siren"] .reason').textContent()).toBe(
      'check digit fails',
    );
    // Keyboard first: the cursor is on the first doubted field.
    expect(await page.evaluate('document.activeElement.name')).toBe(flagged[0]);
    // The picture is the PDF's first page, rendered.
    const picture = page.locator('#picture img');
    await page.waitForFunction("document.querySelector('#picture img')?.complete");
    expect(
      await picture.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth),
    ).toBeGreaterThan(500);
    await page.close();
  });

  it('corrects a field with the keyboard: the documents view changes, the row does not, a reload keeps it', async () => {
    const page = await open();
    const before = backend.store.rowsFor(flaggedKey);
    await page.locator('#field-supplier_siren').fill('732829320');
    await page.locator('#field-supplier_siren').press('Enter');
    await page.waitForSelector('#status:text("saved supplier_siren")');
    // The cursor moves on to the next doubted field.
    expect(await page.evaluate('document.activeElement.name')).toBe('supplier_siret');
    expect(documentRow().analysis).toMatchObject({ supplier_siren: '732829320' });
    expect(documentRow().original_analysis).toMatchObject({ supplier_siren: '812345674' });
    expect(documentRow().corrected_fields).toEqual(['supplier_siren']);
    expect(backend.store.rowsFor(flaggedKey)).toEqual(before);
    // The README's picture: one field corrected (green), one still doubted (amber).
    await page.waitForFunction("document.querySelector('#picture img')?.complete");
    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT });
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    expect(await page.locator('#field-supplier_siren').inputValue()).toBe('732829320');
    expect(await page.locator('.field[data-field="supplier_siren"]').getAttribute('class')).toContain(
      'closed',
    );
    await page.close();
  });

  it('two tabs correcting the same field end with one correction', async () => {
    const [a, b] = [await open(), await open()];
    // The same value from both tabs: one correction, the second told it is already there.
    for (const tab of [a, b]) await tab.locator('#field-supplier_siret').fill('73282932000074');
    await Promise.all([a, b].map((tab) => tab.locator('#field-supplier_siret').press('Enter')));
    await Promise.all([a, b].map((tab) => tab.waitForSelector('#status:text("supplier_siret")')));
    const said = await Promise.all([a, b].map((tab) => tab.locator('#status').textContent()));
    expect(said.sort()).toEqual(['saved supplier_siret', 'supplier_siret: already recorded']);
    expect(correctionsOf('supplier_siret')).toHaveLength(1);
    // Different values from two tabs that saw the same state: the later one is refused, and shown the first.
    await a.locator('#field-currency').fill('EUR');
    await a.locator('#field-currency').press('Enter');
    await a.waitForSelector('#status:text("saved currency")');
    await b.locator('#field-currency').fill('USD');
    await b.locator('#field-currency').press('Enter');
    await b.waitForSelector('#status.conflict');
    expect(await b.locator('#field-currency').inputValue()).toBe('EUR');
    expect(correctionsOf('currency')).toHaveLength(1);
    expect(documentRow().analysis).toMatchObject({ currency: 'EUR' });
    await a.close();
    await b.close();
  });

  it('confirms what is left with Ctrl+Enter and shows the document reviewed', async () => {
    const page = await open();
    await page.locator('#why').fill('checked against the Kbis');
    await page.keyboard.press('Control+Enter');
    await page.waitForSelector('#queue button.done');
    const item = ((await (await fetch(`${base}/api/queue`)).json()) as { items: Array<{ open: string[] }> })
      .items[0]!;
    expect(item.open).toEqual([]);
    expect(backend.store.rowsFor(flaggedKey)).toHaveLength(1);
    await page.close();
  });

  it('marks the reasons without a field dealt with, from the keyboard, a why required', async () => {
    // Recorded now, so that the tests above see one document to review.
    const key = await analysed(
      'en-01-invoice-design.pdf',
      '1764460800000003',
      {},
      {
        verdict: 'invalid',
        failed: ['BR-CO-15'],
        picture: { compared: ['seller'], unread: [], disagreements: [{ field: 'seller' }] },
      },
    );
    const row = () => backend.store.correctedDocuments({ dedupKey: key })[0]!;
    expect(row().review).toBe('picture_xml_disagree:seller e_invoice_invalid');
    const before = backend.store.rowsFor(key);
    const page = await open(key);
    const active = () =>
      page.evaluate(
        "[document.activeElement.tagName, document.activeElement.name ?? '', document.activeElement.dataset.reason ?? '']",
      );
    expect(await page.locator('.mark.flagged button').allTextContents()).toEqual([
      'Dealt with',
      'Dealt with',
    ]);
    // No field is doubted: the cursor starts on the first reason's why.
    expect(await active()).toEqual(['INPUT', 'mark-why', 'picture_xml_disagree:seller']);
    // Without a why: refused on the page, nothing written.
    await page.keyboard.press('Enter');
    await page.waitForSelector('#status.error');
    expect(await page.locator('#status').textContent()).toContain('say why');
    expect(backend.store.corrections(key)).toEqual([]);
    await page.keyboard.type('the same company under its trading name');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#status:text("dealt with picture_xml_disagree:seller")');
    // The next reason's why, then its button, reached with Tab.
    expect(await active()).toEqual(['INPUT', 'mark-why', 'e_invoice_invalid']);
    await page.keyboard.type('BR-CO-15: the supplier’s rounding, booked as sent');
    await page.keyboard.press('Tab');
    expect(await active()).toEqual(['BUTTON', '', 'e_invoice_invalid']);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#status:text("dealt with e_invoice_invalid")');
    expect(row().corrected_fields).toEqual(['e_invoice_invalid', 'picture_xml_disagree:seller']);
    expect(row().analysis).toEqual(row().original_analysis);
    expect(backend.store.corrections(key).map((c) => [c.field, c.value, c.why])).toEqual([
      ['picture_xml_disagree:seller', '"dealt_with"', 'the same company under its trading name'],
      ['e_invoice_invalid', '"dealt_with"', 'BR-CO-15: the supplier’s rounding, booked as sent'],
    ]);
    expect(backend.store.rowsFor(key)).toEqual(before);
    const items = ((await (await fetch(`${base}/api/queue`)).json()) as { items: ReviewItem[] }).items;
    expect(items.find((i) => i.dedup_key === key)!.open).toEqual([]);
    // Reloaded: both reasons shown dealt with, with who and why, and no button left.
    await page.goto(`${base}/#${encodeURIComponent(key)}`);
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    expect(await page.locator('.mark.closed .done').allTextContents()).toEqual([
      'dealt with by claire: the same company under its trading name',
      'dealt with by claire: BR-CO-15: the supplier’s rounding, booked as sent',
    ]);
    expect(await page.locator('.mark button').count()).toBe(0);
    await page.close();
  });
});
