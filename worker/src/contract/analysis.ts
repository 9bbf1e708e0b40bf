import { z } from 'zod';

/**
 * The invoice schema: one definition for every analyzer. The zod validator checks what an analyzer
 * returns; {@link analysisJsonSchema} is sent to Gemini as its structured-output schema.
 * Amounts are decimal numbers in the invoice currency (1 234,56 € → 1234.56); dates are ISO
 * `YYYY-MM-DD` (30/11/2026 → 2026-11-30).
 */

const text = (description: string) => z.string().nullable().describe(description);
const amount = (description: string) => z.number().nullable().describe(description);
const isoDate = (description: string) =>
  z
    .string()
    .regex(/^\d{4}-\d{2}-\d{2}$/)
    .nullable()
    .describe(`${description} (YYYY-MM-DD)`);

export const LineItemSchema = z
  .object({
    description: z.string().describe('Designation / description of the line'),
    quantity: amount('Quantity (quantité)'),
    unit_price: amount('Unit price without tax (prix unitaire HT)'),
    amount: amount('Line amount without tax (montant HT)'),
    vat_rate: amount('VAT rate in percent (taux de TVA), e.g. 20 for 20 %'),
  })
  .strict();

export const AnalysisSchema = z
  .object({
    document_type: z
      .enum(['invoice', 'credit_note', 'receipt', 'other'])
      .describe('invoice (facture), credit_note (avoir), receipt (reçu), or other'),
    language: z.enum(['fr', 'en', 'other']).describe('Main language of the document'),
    supplier_name: text('Seller / fournisseur legal name'),
    supplier_vat_id: text('Seller intra-EU VAT id (n° TVA intracommunautaire), e.g. FR12345678901'),
    supplier_siren: text('Seller SIREN (9 digits), French suppliers only'),
    supplier_siret: text('Seller SIRET (14 digits), French suppliers only'),
    customer_name: text('Buyer / client name'),
    invoice_number: text('Invoice number (n° de facture)'),
    issue_date: isoDate('Issue date (date de facture)'),
    due_date: isoDate("Payment due date (date d'échéance)"),
    currency: z
      .string()
      .regex(/^[A-Z]{3}$/)
      .nullable()
      .describe('ISO 4217 currency code, e.g. EUR'),
    net_amount: amount('Total without tax (total HT / net)'),
    tax_amount: amount('Total VAT (TVA / VAT)'),
    total_amount: amount('Total with tax (total TTC / total due)'),
    line_items: z.array(LineItemSchema).max(500).describe('Invoice lines, in order'),
  })
  .strict();

export type Analysis = z.infer<typeof AnalysisSchema>;
export type LineItem = z.infer<typeof LineItemSchema>;

/** Token usage of one analysis; zero for the offline analyzer. */
/**
 * How far a paid analysis got before it failed transiently (a first answer outside the schema, then
 * a 429 on the second call): the run of the same delivery that follows goes on from there, so the
 * paid attempts are not paid again. Their tokens are counted once, by the delivery.
 */
export interface AnalysisProgress {
  /** Paid calls made, each answered outside the schema. */
  attemptsDone: number;
  /** What the last of them got wrong. */
  problems: string;
}

export interface Usage {
  promptTokens: number;
  outputTokens: number;
  totalTokens: number;
}

/** The sum of two usages (either may be absent): the tokens of every paid call of a delivery. */
export function addUsage(a: Usage | undefined, b: Usage | undefined): Usage | undefined {
  if (!a || !b) return a ?? b;
  return {
    promptTokens: a.promptTokens + b.promptTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    totalTokens: a.totalTokens + b.totalTokens,
  };
}

/** Where a field's value came from: the document's own XML, its text layer, OCR of its picture, or Gemini. */
export type FieldSource = 'e_invoice_xml' | 'text_layer' | 'ocr' | 'gemini';

/**
 * How an analyzer found a field's value, strongest first: `stated` by the e-invoice's XML;
 * `cross_checked` (net, tax and total found apart that add up); `labelled` (after the field's own
 * label); `pattern` (an identifier found by its format in the seller's part of the page); `derived`
 * (computed from other fields: the third amount, a SIREN from a SIRET); `layout` (from where it
 * sits: a return address line, a letterhead, a section heading); `guess` (the first date of the
 * page, the first name of its header); `model` (Gemini, which does not say).
 */
export type ReadHow =
  | 'stated'
  | 'cross_checked'
  | 'labelled'
  | 'pattern'
  | 'derived'
  | 'layout'
  | 'guess'
  | 'model';

/**
 * What the rest of the document says of a value: `borne_out` (another place agrees: the name written
 * again, a date beside a related one), `alone` (nothing else supports it), `contradicted` (the page
 * gives it to something else: the seller's name in the customer's block).
 */
export type Agreement = 'borne_out' | 'alone' | 'contradicted';

/**
 * How one field was read: its source, how it was found, for OCR the read's mean word confidence
 * (0-100), and what the rest of the document says of the value (absent: nothing to compare with).
 */
export interface FieldReading {
  source: FieldSource;
  how: ReadHow;
  ocrConfidence?: number;
  agreement?: Agreement;
}

/** What every analyzer returns. */
export interface AnalysisResult {
  analysis: Analysis;
  model: string;
  usage: Usage;
  /**
   * How each field was read, when the analyzer can say (core/review.ts turns it into the row's
   * confidence); without it a field's source is told by the model and its confidence by checks alone.
   */
  readings?: Partial<Record<keyof Analysis, FieldReading>>;
}

/** The JSON Schema of {@link AnalysisSchema}, for Gemini's `responseJsonSchema`. */
export function analysisJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(AnalysisSchema, { target: 'draft-7' }) as Record<string, unknown>;
  delete schema.$schema;
  return schema;
}

/** Validates an analyzer's output; returns the problems in words, or the typed analysis. */
export function parseAnalysis(
  value: unknown,
): { ok: true; analysis: Analysis } | { ok: false; problems: string } {
  const result = AnalysisSchema.safeParse(value);
  if (result.success) return { ok: true, analysis: result.data };
  return {
    ok: false,
    problems: result.error.issues
      .slice(0, 5)
      .map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`)
      .join('; '),
  };
}
