import { readFileSync } from 'node:fs';
import { attachedXml } from '../../../sim/samples';
import { E_INVOICE_MODELS, En16931Reader } from '../../src/adapters/e-invoice/en16931-reader';
import { MemoryMemoStore } from '../../src/adapters/memo-stores/memory-memo-store';
import { DEFAULT_CONTENT_TYPES } from '../../src/contract/settings';
import type { HandlerDeps } from '../../src/core/handle';
import { AnalysisMemo } from '../../src/core/memo';
import type { Admission } from '../../src/core/ports';
import {
  E_INVOICE_FIXTURES,
  type Fixture,
  fixture,
  fixtures,
  isListedInvalid,
  statedFields,
} from '../support/e-invoices';
import { deliverer, handlerDeps } from '../support/handler';

/** Admission that counts who asks to enter: a structured document must never ask. */
class CountingAdmission implements Admission {
  runs = 0;
  run<T>(work: (waitedMs: number) => Promise<T>): Promise<T> {
    this.runs += 1;
    return work(0);
  }
}

function setup(overrides: Partial<HandlerDeps> = {}) {
  const admission = new CountingAdmission();
  const memoStore = new MemoryMemoStore();
  const built = handlerDeps({
    limits: { maxObjectBytes: 20 * 1024 * 1024, allowedContentTypes: DEFAULT_CONTENT_TYPES },
    eInvoices: new En16931Reader(),
    admission,
    memo: new AnalysisMemo(memoStore, { ttlMs: 86_400_000, leaseMs: 0 }),
    ...overrides,
  });
  const deliverBytes = deliverer(built);
  const deliver = (fixture: Fixture) =>
    deliverBytes(readFileSync(fixture.path), {
      name: `inbox/${fixture.file}`,
      contentType: fixture.contentType,
    });
  return { ...built, admission, memoStore, deliver };
}

const all = [
  ...fixtures('factur-x-fr'),
  ...fixtures('factur-x-fr-invalid'),
  ...fixtures('cii'),
  ...fixtures('ubl'),
];
const valid = all.filter((f) => !isListedInvalid(f));
const modelOf = (f: Fixture) =>
  f.folder === 'cii' || f.folder === 'ubl' ? E_INVOICE_MODELS[f.folder] : E_INVOICE_MODELS.facturX;

describe('the shared EN 16931 fixtures', () => {
  it(`are found beside the repository (${E_INVOICE_FIXTURES})`, () => {
    expect(fixtures('factur-x-fr').length).toBeGreaterThanOrEqual(7);
    expect(fixtures('factur-x-fr-invalid').length).toBeGreaterThanOrEqual(12);
    expect(fixtures('cii').length).toBeGreaterThanOrEqual(20);
    expect(fixtures('ubl').length).toBeGreaterThanOrEqual(20);
    expect(valid.some((f) => f.file.includes('creditnote') || f.file.startsWith('Avoir'))).toBe(true);
  });
});

describe('handle, on every valid e-invoice fixture', () => {
  const { deliver, analyzer, admission, memoStore } = setup();

  it.each(valid.map((f) => [`${f.folder}/${f.file}`, f] as const))(
    '%s gives one ok row whose fields are the XML’s, read from the structure for free',
    async (_, fixture) => {
      const xml =
        fixture.contentType === 'application/pdf'
          ? await attachedXml(fixture.path)
          : readFileSync(fixture.path, 'utf8');
      const stated = statedFields(xml);
      const { outcome, row } = await deliver(fixture);

      expect(outcome).toMatchObject({ status: 'ok', analysed: false });
      expect(row).toMatchObject({
        status: 'ok',
        reason: null,
        model: modelOf(fixture),
        prompt_tokens: 0,
        output_tokens: 0,
        total_tokens: 0,
      });
      // Every field the oracle reads (all of StatedFields), compared as the row holds it.
      const analysis = row!.analysis as Record<string, unknown>;
      expect(Object.fromEntries(Object.keys(stated).map((k) => [k, analysis[k]]))).toEqual(stated);
    },
  );

  it('never called the analyzer, never asked for admission and kept nothing in the memo', () => {
    expect(analyzer.calls).toHaveLength(0);
    expect(admission.runs).toBe(0);
    expect(memoStore.entries.size).toBe(0);
  });
});

describe('handle, on known values (the oracle checked by hand)', () => {
  it('reads the FNFE credit note as a credit note with positive amounts, as printed', async () => {
    const { deliver } = setup();
    const { row } = await deliver(fixture('factur-x-fr', 'Avoir_FR_type381_BASIC.pdf'));
    expect(row!.analysis).toMatchObject({
      document_type: 'credit_note',
      language: 'fr',
      invoice_number: 'AV-2017-0005',
      issue_date: '2017-11-16',
      currency: 'EUR',
      supplier_name: 'Au bon moulin',
      supplier_vat_id: 'FR11999999998',
      supplier_siren: null,
      supplier_siret: '99999999800010',
      customer_name: 'Ma jolie boutique',
      net_amount: 218.48,
      tax_amount: 14.99,
      total_amount: 233.47,
      line_items: [
        { description: "Nougat de l'Abbaye 250g", quantity: 5, unit_price: 4.1, amount: 20.48, vat_rate: 20 },
        {
          description: "Huile d'olive à l'ancienne",
          quantity: 10,
          unit_price: 19.8,
          amount: 198,
          vat_rate: 5.5,
        },
      ],
    });
  });

  it('reads a UBL CreditNote with a byte order mark', async () => {
    const { deliver } = setup();
    const { row } = await deliver(fixture('ubl', 'ubl-tc434-creditnote1.xml'));
    expect(row).toMatchObject({ model: 'e-invoice:ubl' });
    expect(row!.analysis).toMatchObject({
      document_type: 'credit_note',
      supplier_name: 'My Supplier Company',
    });
  });

  it('keeps a corrected invoice’s negative amounts as the XML states them (BT-3 384)', async () => {
    const { deliver } = setup();
    const { row } = await deliver(fixture('cii', 'EN16931_Rechnungskorrektur.cii.xml'));
    expect(row!.analysis).toMatchObject({ document_type: 'invoice', net_amount: -7.67, total_amount: -8.79 });
  });
});

describe('handle, on the files the corpus lists as failing validation', () => {
  const { deliver, analyzer } = setup();
  const invalid = all.filter(isListedInvalid);

  it.each(invalid.map((f) => [`${f.folder}/${f.file}`, f] as const))(
    '%s gets its one row, with no error left for Pub/Sub to retry or dead-letter',
    async (_, fixture) => {
      // handle() resolving is the ack: only a thrown error is answered 5xx (retried, then dead-lettered).
      const { outcome, row } = await deliver(fixture);
      expect(row).toBeDefined();
      if (row!.status === 'rejected') {
        expect(fixture.contentType).toBe('application/xml');
        expect(row!.reason).toBe('not_an_e_invoice');
        expect(outcome.detail).toMatch(/BT-\d+|XML/);
      } else if (row!.model?.startsWith('e-invoice:')) {
        expect(row).toMatchObject({ reason: null, total_tokens: 0 });
      } else {
        expect(row!.reason).toMatch(/^e_invoice_(unreadable|incomplete)$/);
        expect(analyzer.calls.map((c) => c.name)).toContain(`inbox/${fixture.file}`);
      }
    },
  );
});
