import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { OfflineAnalyzer } from '../../src/adapters/analyzers/offline-analyzer';
import { En16931Reader } from '../../src/adapters/e-invoice/en16931-reader';
import {
  findValidator,
  SaxonRunner,
  ValidatorUnavailable,
} from '../../src/adapters/e-invoice/validation/saxon-runner';
import {
  type EInvoiceValidation,
  EInvoiceValidator,
} from '../../src/adapters/e-invoice/validation/validation';
import { parseXml } from '../../src/adapters/e-invoice/xml';
import { PdfJsParser } from '../../src/adapters/pdf/pdfjs-parser';
import { DEFAULT_CONTENT_TYPES } from '../../src/contract/settings';
import { RejectionError } from '../../src/core/errors';
import type { EInvoiceReading } from '../../src/core/ports';
import { validationReasons } from '../../src/core/review';
import { deflated, hostileTargets, pdfWith, ublInvoice } from '../support/e-invoice-builders';
import { type Fixture, fixture, fixtures, validated } from '../support/e-invoices';
import { deliverer, handlerDeps } from '../support/handler';

/**
 * E-invoices validated on receipt by the real thing: Saxon-HE running the official artefacts
 * (CEN/TC 434's EN 16931, FNFE-MPE's Factur-X, XP Z12-012's BR-FR), installed by
 * scripts/install-en16931.sh, which `npm run test:validation` runs first. Nothing is stubbed.
 */

const installed = findValidator();
if (!installed) throw new Error('the validator is not installed: run `bash scripts/install-en16931.sh`');

const runner = new SaxonRunner(installed);
const pdf = new PdfJsParser();
const validator = new EInvoiceValidator({ runner, picture: new OfflineAnalyzer({ pdf }) });
const reader = new En16931Reader(pdf, validator);

afterAll(() => runner.close());

const validationOf = (reading: EInvoiceReading) =>
  (reading as { validation?: EInvoiceValidation }).validation;

const validate = (f: Fixture) => validated(reader, f);
const failedOf = (v: EInvoiceValidation) => Object.fromEntries(v.rulesets.map((r) => [r.artefact, r.failed]));

describe('the installed artefacts', () => {
  it('are the files the manifest names, with the SHA-256 every verdict repeats', () => {
    const artefacts = Object.entries(installed.manifest.artefacts);
    expect(artefacts.map(([key]) => key).sort()).toEqual([
      'br-fr-cii',
      'en16931-cii',
      'en16931-ubl',
      'factur-x-basic',
      'factur-x-basic-wl',
      'factur-x-en16931',
      'factur-x-extended',
      'factur-x-minimum',
    ]);
    for (const [, a] of artefacts) {
      const bytes = readFileSync(path.join(installed.dir, 'artefacts', a.path));
      expect(createHash('sha256').update(bytes).digest('hex')).toBe(a.sha256);
    }
  });
});

describe('the official artefacts on the shared e-invoice fixtures', () => {
  beforeAll(() => validator.warm(), 600_000);

  it.each(
    [
      ...fixtures('cii'),
      ...fixtures('ubl'),
      ...fixtures('factur-x-fr'),
      ...fixtures('factur-x-fr-invalid'),
    ].filter(
      // Rejected before any validation: its totals do not add up (docline's own BR-CO-15 check).
      (f) => f.file !== 'not_validating_full_invoice_based_onTest_EeISI_300_CENfullmodel.ubl.xml',
    ),
  )('$folder/$file gets a verdict of the artefacts, never unchecked', async (f) => {
    const { v } = await validate(f);
    expect(['valid', 'invalid']).toContain(v.verdict);
    expect(v.rulesets.length).toBeGreaterThan(0);
    for (const r of v.rulesets) expect(r.sha256).toBe(installed.manifest.artefacts[r.artefact]!.sha256);
    expect(v.verdict === 'invalid').toBe(v.failed.length > 0);
  });

  it('an EN 16931 CII and UBL invoice: valid under the EN 16931 rules of their syntax', async () => {
    const cii = await validate(fixture('cii', 'EN16931_Einfach.cii.xml'));
    expect(cii.v).toMatchObject({
      verdict: 'valid',
      syntax: 'cii',
      profile: 'urn:cen.eu:en16931:2017',
      failed: [],
    });
    expect(cii.v.rulesets.map((r) => r.artefact)).toEqual(['en16931-cii']);
    expect(cii.v.rulesets[0]!.source).toContain('CEN/TC 434 EN 16931 validation artefacts 1.3.16 (CII)');
    const ubl = await validate(fixture('ubl', 'EN16931_Einfach.ubl.xml'));
    expect(ubl.v).toMatchObject({ verdict: 'valid', syntax: 'ubl' });
    expect(ubl.v.rulesets.map((r) => r.artefact)).toEqual(['en16931-ubl']);
  });

  it('records the rule ids that fired: BR-CL-25 (an electronic address scheme) in CII and UBL', async () => {
    for (const f of [
      fixture('cii', 'EN16931_ElektronischeAdresse.cii.xml'),
      fixture('ubl', 'EN16931_ElektronischeAdresse.ubl.xml'),
    ]) {
      const { reading, v } = await validate(f);
      // Invalid is a verdict on the row, not a refusal: the data is still read from the XML.
      expect(reading.kind).toBe('read');
      expect(v.verdict).toBe('invalid');
      expect(v.failed).toEqual(['BR-CL-25']);
    }
  });

  it('a French Factur-X MINIMUM: its profile’s rules and BR-FR, not the EN 16931 rules it does not claim', async () => {
    const { v } = await validate(fixture('factur-x-fr', 'Facture_FR_MINIMUM.pdf'));
    expect(v.profile).toBe('urn:factur-x.eu:1p0:minimum');
    expect(v.rulesets.map((r) => [r.artefact, r.verdict])).toEqual([
      ['factur-x-minimum', 'valid'],
      ['br-fr-cii', 'valid'],
    ]);
  });

  it('the corpus’s failing Factur-X: the EN 16931 and Factur-X rules that fire', async () => {
    const ue = await validate(fixture('factur-x-fr', 'Facture_UE_BASICWL.pdf'));
    expect(failedOf(ue.v)['factur-x-basic-wl']).toEqual(['BR-IC-11', 'BR-IC-12']);
    const en = await validate(fixture('factur-x-fr-invalid', 'Facture_FR_EN16931.pdf'));
    expect(en.v.verdict).toBe('invalid');
    expect(failedOf(en.v)['en16931-cii']).toEqual(['CII-DT-031']);
    expect(en.v.rulesets.map((r) => r.artefact)).toEqual(['en16931-cii', 'factur-x-en16931', 'br-fr-cii']);
  });

  it('reads the picture of every French Factur-X too, and finds it agrees with the XML', async () => {
    for (const f of fixtures('factur-x-fr')) {
      const { v } = await validate(f);
      expect({ file: f.file, picture: v.picture }).toMatchObject({
        file: f.file,
        picture: { analyzer: 'offline', disagreements: [] },
      });
      expect(v.picture!.compared).toContain('total_amount');
    }
  });
});

describe('a hybrid PDF whose picture and XML disagree (the altered-PDF fraud)', () => {
  const picture = (o: { total?: string; number?: string; vat?: string } = {}) => `Atelier Dupont & Fils
N° TVA : ${o.vat ?? 'FR12345678901'}
FACTURE
Facture n° ${o.number ?? 'F-2026-0042'}
Date : 30/11/2026
Échéance : 30/12/2026
Total HT : 1 028,80 €
TVA 20 % : 205,76 €
Total TTC : ${o.total ?? '1 234,56'} €`;
  const read = async (text: string) => {
    const reading = await reader.read({
      bytes: await pdfWith(text, deflated(ublInvoice())),
      contentType: 'application/pdf',
      name: 'hybrid.pdf',
    });
    expect(reading.kind).toBe('read');
    return validationOf(reading)!;
  };

  it('finds nothing to say when they agree', async () => {
    const v = await read(picture());
    expect(v.picture).toEqual({
      analyzer: 'offline',
      compared: ['total_amount', 'invoice_number', 'seller'],
      unread: [],
      disagreements: [],
    });
    expect(validationReasons(v)).toEqual(v.verdict === 'invalid' ? ['e_invoice_invalid'] : []);
  });

  it('names the total, the number and the seller when the picture shows others', async () => {
    const total = await read(picture({ total: '1 534,56' }));
    expect(total.picture!.disagreements).toEqual([
      { field: 'total_amount', xml: '1234.56', picture: '1534.56' },
    ]);
    expect(validationReasons(total)).toContain('picture_xml_disagree:total_amount');
    const number = await read(picture({ number: 'F-2026-0043' }));
    expect(number.picture!.disagreements.map((d) => d.field)).toEqual(['invoice_number']);
    const seller = await read(picture({ vat: 'FR98765432109' }));
    expect(seller.picture!.disagreements.map((d) => d.field)).toEqual(['seller']);
    expect(validationReasons(seller)).toContain('picture_xml_disagree:seller');
  });
});

describe('hostile XML stays rejected', () => {
  const targets = hostileTargets();
  const hostile = () => [
    ublInvoice({
      prolog: `<!DOCTYPE Invoice [<!ENTITY xxe SYSTEM "file://${targets.dir}/secret.txt">]>`,
      id: '&xxe;',
    }),
    ublInvoice({ prolog: `<!DOCTYPE Invoice [<!ENTITY xxe SYSTEM "${targets.url}/entity">]>`, id: '&xxe;' }),
    ublInvoice({ prolog: `<!DOCTYPE Invoice SYSTEM "${targets.url}/invoice.dtd">` }),
    ublInvoice({ prolog: `<!DOCTYPE Invoice [<!ENTITY % remote SYSTEM "${targets.url}/p.dtd"> %remote;]>` }),
  ];

  it('refuses them before any validation, as before: not_an_e_invoice', async () => {
    for (const xml of hostile()) {
      await expect(
        reader.read({ bytes: Buffer.from(xml), contentType: 'application/xml', name: 'h.xml' }),
      ).rejects.toThrow(RejectionError);
    }
    expect(targets.requests).toEqual([]);
  });

  it('and the runner, handed them directly, refuses every DOCTYPE and resolves no entity', async () => {
    for (const xml of hostile()) {
      const refused = runner.run(Buffer.from(xml), ['en16931-ubl'], 60_000);
      await expect(refused).rejects.toThrow(ValidatorUnavailable);
      await expect(refused).rejects.toThrow(/DOCTYPE is disallowed/);
    }
    expect(targets.requests).toEqual([]);
  });
});

describe('the runner process', () => {
  it('answers unchecked past its timeout, and the next document is validated by a new process', async () => {
    const slow = new SaxonRunner(installed);
    const v = new EInvoiceValidator({ runner: slow, timeoutMs: 1 });
    const f = fixture('cii', 'EN16931_Einfach.cii.xml');
    const bytes = readFileSync(f.path);
    const first = await v.validate(bytes, parseXml(bytes), 'cii', false);
    expect(first).toMatchObject({ verdict: 'unchecked', detail: expect.stringContaining('timeout') });
    const patient = new EInvoiceValidator({ runner: slow, timeoutMs: 300_000 });
    expect((await patient.validate(bytes, parseXml(bytes), 'cii', false)).verdict).toBe('valid');
    await slow.close();
  });
});

describe('the row', () => {
  it('records the verdict in e_invoice_validation, at no token cost', async () => {
    const built = handlerDeps({
      limits: { maxObjectBytes: 20 * 1024 * 1024, allowedContentTypes: DEFAULT_CONTENT_TYPES },
      eInvoices: reader,
    });
    const bytes = readFileSync(fixture('cii', 'EN16931_ElektronischeAdresse.cii.xml').path);
    const row = (await deliverer(built)(bytes, { name: 'e.xml', contentType: 'application/xml' })).row!;
    expect(row).toMatchObject({ status: 'ok', model: 'e-invoice:cii', total_tokens: 0 });
    expect(row.e_invoice_validation).toMatchObject({ verdict: 'invalid', failed: ['BR-CL-25'] });
  });
});
