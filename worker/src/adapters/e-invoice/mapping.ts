/**
 * EN 16931's business terms, as docline's analysis reads them from each syntax. This table is the
 * reader: {@link ./invoice} evaluates these paths, and docs/e-invoices.md shows the same table
 * (a test keeps the two equal).
 *
 * A path is a list of steps `prefix:Name` separated by `/`, relative to the root element (header
 * terms) or to one line (line terms). A step may carry one condition: `[@attr='value']` (an
 * attribute equals the value), `[@attr=$currency]` (it equals the invoice currency, BT-5, or is
 * absent), or `[prefix:Child/prefix:Child='value']` (a descendant's text equals the value).
 * Alternatives are separated by ` | `; the first that finds something wins.
 */

/** The syntaxes docline reads, with the namespace of each prefix their paths use. */
export const SYNTAXES = {
  cii: {
    root: ['urn:un:unece:uncefact:data:standard:CrossIndustryInvoice:100', 'CrossIndustryInvoice'],
    namespaces: {
      rsm: 'urn:un:unece:uncefact:data:standard:CrossIndustryInvoice:100',
      ram: 'urn:un:unece:uncefact:data:standard:ReusableAggregateBusinessInformationEntity:100',
      udt: 'urn:un:unece:uncefact:data:standard:UnqualifiedDataType:100',
    },
  },
  ubl: {
    root: [
      ['urn:oasis:names:specification:ubl:schema:xsd:Invoice-2', 'Invoice'],
      ['urn:oasis:names:specification:ubl:schema:xsd:CreditNote-2', 'CreditNote'],
    ],
    namespaces: {
      cac: 'urn:oasis:names:specification:ubl:schema:xsd:CommonAggregateComponents-2',
      cbc: 'urn:oasis:names:specification:ubl:schema:xsd:CommonBasicComponents-2',
    },
  },
} as const;

export type Syntax = keyof typeof SYNTAXES;

/** How a term's text becomes a field's value. */
export type TermKind = 'text' | 'date' | 'code' | 'amount' | 'number' | 'type' | 'legal_id' | 'lines';

export interface Term {
  /** EN 16931 business term (BT) or group (BG). */
  readonly term: string;
  /** The field of the analysis it fills (contract/analysis.ts); `line_items[].x` for line terms. */
  readonly field: string;
  readonly kind: TermKind;
  /** Without it the structure is not used: the document falls back to the analyzer. */
  readonly required: boolean;
  readonly cii: string;
  readonly ubl: string;
}

const CII_SETTLEMENT = 'rsm:SupplyChainTradeTransaction/ram:ApplicableHeaderTradeSettlement';
const CII_TOTALS = `${CII_SETTLEMENT}/ram:SpecifiedTradeSettlementHeaderMonetarySummation`;
const CII_SELLER = 'rsm:SupplyChainTradeTransaction/ram:ApplicableHeaderTradeAgreement/ram:SellerTradeParty';
const CII_BUYER = 'rsm:SupplyChainTradeTransaction/ram:ApplicableHeaderTradeAgreement/ram:BuyerTradeParty';
const UBL_SELLER = 'cac:AccountingSupplierParty/cac:Party';
const UBL_BUYER = 'cac:AccountingCustomerParty/cac:Party';

const term = (t: string, field: string, kind: TermKind, required: boolean, cii: string, ubl: string): Term =>
  Object.freeze({ term: t, field, kind, required, cii, ubl });

/** The header terms, in the order docs/e-invoices.md lists them. */
export const HEADER_TERMS: readonly Term[] = Object.freeze([
  term('BT-1', 'invoice_number', 'text', true, 'rsm:ExchangedDocument/ram:ID', 'cbc:ID'),
  term(
    'BT-2',
    'issue_date',
    'date',
    true,
    'rsm:ExchangedDocument/ram:IssueDateTime/udt:DateTimeString',
    'cbc:IssueDate',
  ),
  term(
    'BT-3',
    'document_type',
    'type',
    true,
    'rsm:ExchangedDocument/ram:TypeCode',
    'cbc:InvoiceTypeCode | cbc:CreditNoteTypeCode',
  ),
  term(
    'BT-5',
    'currency',
    'code',
    true,
    `${CII_SETTLEMENT}/ram:InvoiceCurrencyCode`,
    'cbc:DocumentCurrencyCode',
  ),
  term(
    'BT-9',
    'due_date',
    'date',
    false,
    `${CII_SETTLEMENT}/ram:SpecifiedTradePaymentTerms/ram:DueDateDateTime/udt:DateTimeString`,
    'cbc:DueDate | cac:PaymentMeans/cbc:PaymentDueDate',
  ),
  term(
    'BT-27',
    'supplier_name',
    'text',
    true,
    `${CII_SELLER}/ram:Name`,
    `${UBL_SELLER}/cac:PartyLegalEntity/cbc:RegistrationName`,
  ),
  term(
    'BT-30',
    'supplier_siren, supplier_siret',
    'legal_id',
    false,
    `${CII_SELLER}/ram:SpecifiedLegalOrganization/ram:ID[@schemeID='0002']`,
    `${UBL_SELLER}/cac:PartyLegalEntity/cbc:CompanyID[@schemeID='0002']`,
  ),
  term(
    'BT-31',
    'supplier_vat_id',
    'text',
    false,
    `${CII_SELLER}/ram:SpecifiedTaxRegistration/ram:ID[@schemeID='VA']`,
    `${UBL_SELLER}/cac:PartyTaxScheme[cac:TaxScheme/cbc:ID='VAT']/cbc:CompanyID`,
  ),
  term(
    'BT-40',
    'language',
    'code',
    false,
    `${CII_SELLER}/ram:PostalTradeAddress/ram:CountryID`,
    `${UBL_SELLER}/cac:PostalAddress/cac:Country/cbc:IdentificationCode`,
  ),
  term(
    'BT-44',
    'customer_name',
    'text',
    false,
    `${CII_BUYER}/ram:Name`,
    `${UBL_BUYER}/cac:PartyLegalEntity/cbc:RegistrationName`,
  ),
  term(
    'BT-109',
    'net_amount',
    'amount',
    true,
    `${CII_TOTALS}/ram:TaxBasisTotalAmount`,
    'cac:LegalMonetaryTotal/cbc:TaxExclusiveAmount',
  ),
  term(
    'BT-110',
    'tax_amount',
    'amount',
    false,
    `${CII_TOTALS}/ram:TaxTotalAmount[@currencyID=$currency]`,
    'cac:TaxTotal/cbc:TaxAmount[@currencyID=$currency]',
  ),
  term(
    'BT-112',
    'total_amount',
    'amount',
    true,
    `${CII_TOTALS}/ram:GrandTotalAmount`,
    'cac:LegalMonetaryTotal/cbc:TaxInclusiveAmount',
  ),
  term(
    'BG-25',
    'line_items',
    'lines',
    false,
    'rsm:SupplyChainTradeTransaction/ram:IncludedSupplyChainTradeLineItem',
    'cac:InvoiceLine | cac:CreditNoteLine',
  ),
]);

/** The terms of one line (BG-25), relative to the line. */
export const LINE_TERMS: readonly Term[] = Object.freeze([
  term(
    'BT-153',
    'line_items[].description',
    'text',
    false,
    'ram:SpecifiedTradeProduct/ram:Name',
    'cac:Item/cbc:Name',
  ),
  term(
    'BT-129',
    'line_items[].quantity',
    'number',
    false,
    'ram:SpecifiedLineTradeDelivery/ram:BilledQuantity',
    'cbc:InvoicedQuantity | cbc:CreditedQuantity',
  ),
  term(
    'BT-146',
    'line_items[].unit_price',
    'amount',
    false,
    'ram:SpecifiedLineTradeAgreement/ram:NetPriceProductTradePrice/ram:ChargeAmount',
    'cac:Price/cbc:PriceAmount',
  ),
  term(
    'BT-131',
    'line_items[].amount',
    'amount',
    false,
    'ram:SpecifiedLineTradeSettlement/ram:SpecifiedTradeSettlementLineMonetarySummation/ram:LineTotalAmount',
    'cbc:LineExtensionAmount',
  ),
  term(
    'BT-152',
    'line_items[].vat_rate',
    'number',
    false,
    'ram:SpecifiedLineTradeSettlement/ram:ApplicableTradeTax/ram:RateApplicablePercent',
    'cac:Item/cac:ClassifiedTaxCategory/cbc:Percent',
  ),
]);

/**
 * UNTDID 1001 document types that EN 16931 treats as credit notes (BT-3); every other code is an
 * invoice of some kind (380 commercial, 384 corrected, 386 prepayment, 389 self-billed, …).
 */
export const CREDIT_NOTE_TYPE_CODES: ReadonlySet<string> = new Set([
  '81',
  '83',
  '261',
  '262',
  '296',
  '308',
  '381',
  '396',
  '420',
  '458',
  '532',
]);

/**
 * The document's language is no EN 16931 term: it is taken from the seller's country (BT-40),
 * for the countries whose invoices are written in one of the analysis' languages.
 */
export const LANGUAGE_BY_COUNTRY: Readonly<Record<string, 'fr' | 'en'>> = Object.freeze({
  FR: 'fr',
  MC: 'fr',
  GB: 'en',
  IE: 'en',
  US: 'en',
});
