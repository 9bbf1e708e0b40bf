import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import { PdfWriter } from '../../../samples/pdf-writer';

/** Builders of e-invoices for tests: small XML invoices and PDFs that carry an attachment. */

const UBL_NS =
  'xmlns="urn:oasis:names:specification:ubl:schema:xsd:Invoice-2" ' +
  'xmlns:cac="urn:oasis:names:specification:ubl:schema:xsd:CommonAggregateComponents-2" ' +
  'xmlns:cbc="urn:oasis:names:specification:ubl:schema:xsd:CommonBasicComponents-2"';

/** A minimal UBL invoice; `id` is put in BT-1 as it is given (entities included). */
export function ublInvoice(options: { id?: string; prolog?: string; omitTotal?: boolean } = {}): string {
  return `<?xml version="1.0" encoding="UTF-8"?>${options.prolog ?? ''}
<Invoice ${UBL_NS}>
  <cbc:ID>${options.id ?? 'F-2026-0042'}</cbc:ID>
  <cbc:IssueDate>2026-11-30</cbc:IssueDate>
  <cbc:DueDate>2026-12-30</cbc:DueDate>
  <cbc:InvoiceTypeCode>380</cbc:InvoiceTypeCode>
  <cbc:DocumentCurrencyCode>EUR</cbc:DocumentCurrencyCode>
  <cac:AccountingSupplierParty><cac:Party>
    <cac:PartyTaxScheme><cbc:CompanyID>FR12345678901</cbc:CompanyID><cac:TaxScheme><cbc:ID>VAT</cbc:ID></cac:TaxScheme></cac:PartyTaxScheme>
    <cac:PartyLegalEntity><cbc:RegistrationName>Atelier Dupont &amp; Fils</cbc:RegistrationName></cac:PartyLegalEntity>
  </cac:Party></cac:AccountingSupplierParty>
  <cac:TaxTotal><cbc:TaxAmount currencyID="EUR">205.76</cbc:TaxAmount></cac:TaxTotal>
  <cac:LegalMonetaryTotal>
    <cbc:TaxExclusiveAmount currencyID="EUR">1028.80</cbc:TaxExclusiveAmount>
    ${options.omitTotal ? '' : '<cbc:TaxInclusiveAmount currencyID="EUR">1234.56</cbc:TaxInclusiveAmount>'}
  </cac:LegalMonetaryTotal>
</Invoice>`;
}

/**
 * What hostile XML would reach for, set up by the calling suite's beforeAll (and removed after it):
 * a secret file in a scratch folder, and a local server that answers every request with an entity
 * declaration and records its path.
 */
export function hostileTargets() {
  const targets = { dir: '', url: '', requests: [] as string[] };
  let server: Server;
  beforeAll(async () => {
    targets.dir = mkdtempSync(path.join(tmpdir(), 'docline-xxe-'));
    writeFileSync(path.join(targets.dir, 'secret.txt'), 'TOP-SECRET-PASSWORD');
    server = createServer((req, res) => {
      targets.requests.push(req.url ?? '');
      res.end('<!ENTITY leak "FETCHED">');
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    targets.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.close();
    rmSync(targets.dir, { recursive: true, force: true });
  });
  return targets;
}

export interface Attachment {
  /** The embedded file's name; `factur-x.xml` unless said. */
  filename?: string;
  /** The stream's stored bytes (already compressed when `filter` says so). */
  stored: Buffer;
  filter?: 'FlateDecode' | 'LZWDecode';
}

/** An attachment stored compressed, as Factur-X producers store it. */
export const deflated = (xml: string | Buffer): Attachment => ({
  stored: deflateSync(Buffer.from(xml)),
  filter: 'FlateDecode',
});

/**
 * A one-page PDF whose text layer reads `text`, carrying `attachment` (when given) in its
 * EmbeddedFiles name tree, as a Factur-X PDF does.
 */
export async function pdfWith(text: string, attachment?: Attachment): Promise<Buffer> {
  const pdf = new PdfWriter();
  const page = pdf.addPage(595, 842);
  text.split('\n').forEach((line, i) => {
    page.drawText(line, { x: 50, y: 780 - i * 16, size: 11 });
  });
  if (attachment) {
    pdf.attach({
      name: attachment.filename ?? 'factur-x.xml',
      stored: attachment.stored,
      mimeType: 'text/xml',
      relationship: 'Data',
      ...(attachment.filter ? { filter: attachment.filter } : {}),
    });
  }
  return pdf.save();
}
