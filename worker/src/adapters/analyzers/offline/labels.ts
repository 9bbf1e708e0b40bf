/**
 * The words invoices put before their values: French and English first, then German, Dutch,
 * Spanish and Italian where the wording is cheap to add. Every label the offline analyzer
 * knows lives here, so adding a wording is a one-line change. (`\b` only knows ASCII letters: next to
 * an accented letter, `(?<!\p{L})` and `(?!\p{L})` mark the word's edge instead.)
 */

/** What a totals line holds. */
export type TotalKind = 'total' | 'net' | 'tax';

// Tried in this order: "Net à payer" is a total, "Total HT" a net, "TVA 20 %" a tax.
export const TOTAL_LABELS: ReadonlyArray<readonly [TotalKind, RegExp]> = [
  [
    'total',
    /\b(?:total\s+TTC|montant\s+TTC|TTC|gesamtbetrag(?!\s+der\s+(?:zu|ab)schl)|rechnungsbetrag|rechnungssumme(?!\s+(?:ohne|netto|exkl))|bruttosumme|bruttobetrag|zahlbetrag|endbetrag|gesamtsumme|summe\s+brutto|brutto(?:summe)?|zu\s+zahlen(?:der\s+betrag)?|totaal(?:\s+incl\.?(?:\s+BTW)?|\s+bedrag)?|te\s+betalen|factuur\s*totaal|totaalbedrag|importe\s+total|total\s+(?:factura|a\s+pagar|(?:de\s+(?:la\s+)?)?facture)|totale(?:\s+(?:documento|fattura|da\s+pagare|complessivo))?|net\s+[àa]\s+payer|(?:reste|total|montant)\s+[àa]\s+(?:payer|rembourser|d[ée]duire)|total\s+(?:due|payable)|(?:amount|balance)\s+(?:due|payable)|grand\s+total|invoice\s+total|total\s+amount|total\s+(?:incl\.?|including|inc\.?)(?:\s+(?:VAT|tax))?|total\s+(?:credit(?:ed)?|refund(?:ed)?)|amount\s+to\s+be\s+(?:credited|refunded))\b/iu,
  ],
  [
    'net',
    /(?:\b(?:\p{L}*summe\s+(?:ohne|exkl\.?|zzgl\.?)\s+(?:USt|MwSt)|nettobetrag|summe\s+netto|netto(?:summe|betrag)?|gesamt\s+netto|zwischensumme|warenwert|exclusief\s+BTW|excl\.?\s+BTW|subtotaal|totaal\s+excl\.?(?:\s+BTW)?|grondslag|base\s+imponible|imponibile|totale\s+imponibile)\b|\b(?:total|montant)\s+HT\b|\btotal\s+hors\s+taxes?\b|\bHT\b|\bsous[-\s]total\b|\bsub[-\s]?total\b|\bnet\s+(?:amount|total)\b|\btotal\s+net\b|\btotal\s+\(?(?:excl\.?|excluding|before|ex\.?)(?:\s+(?:VAT|tax))?)/iu,
  ],
  [
    'tax',
    /\b(?:TVA|T\.V\.A\.?|VAT|tax|taxes|sales\s+tax|GST|MwSt|USt|Umsatzsteuer|Mehrwertsteuer|Steuerbetrag|BTW|IVA)\b/iu,
  ],
];

/** A tax label that names a VAT id or an exemption, not an amount of tax. */
export const NOT_A_TAX_AMOUNT =
  /#|intra|-?id\b|-?idnr|nummer|\bnr\b|\bnum\b|\bnº|partita|\bn[°º]|\bno\b\.?|number|num[ée]ro|\breg|\bid\b|identif|non\s+applicable|not\s+applicable|exon|exempt|autoliquidation|reverse\s+charge|\bart\.?\s|\barticles?\b/iu;

/** The label of a sum of several tax lines ("Total TVA"), preferred over adding them up. */
export const TAX_TOTAL =
  /\btotal\s+(?:de\s+la\s+|des\s+)?(?:TVA|VAT|tax(?:es)?|IVA)\b|\b(?:TVA|VAT|tax)\s+total\b|\b(?:BTW|MwSt|USt)[-\s]?(?:bedrag|betrag|summe)\b|\b(?:summe|gesamt)\s+(?:MwSt|USt)|\btotaal\s+BTW\b|\btotale\s+IVA\b/iu;

/** A bare "Total" label: the total when nothing says more. */
export const BARE_TOTAL = /^\s*(?:total|totaal|totale|summe|gesamt)\s*:?\s*$/iu;

/** Labels at the start of a cell, then the supplier's name (or nothing, and the name on the next line). */
export const SUPPLIER_LABEL =
  /^(?:(?:angaben\s+zu[mr]?|daten\s+de[sr]|informations?\s+(?:du|sur\s+le)|(?:details|information)\s+(?:of|about)\s+the|gegevens\s+van\s+de|datos\s+del)\s+)?(?:fournisseur|[ée]metteur|vendeur|vendu\s+par|prestataire|from|seller|supplier|issued\s+by|sold\s+by|service\s+provider|vendor|verk[äa]ufer|lieferant|rechnungssteller|rechnungsaussteller|leistungserbringer|auftragnehmer|absender|leverancier|verkoper|verkocht\s+door|vendedor|proveedor|emisor|prestador|fornitore|venditore|cedente(?:\/prestatore)?)(?!\p{L})\s*:?\s*/iu;

/** Labels at the start of a cell, then the customer's name. */
export const CUSTOMER_LABEL =
  /^(?:(?:angaben\s+zu[mr]?|daten\s+de[sr]|informations?\s+(?:du|sur\s+le)|(?:details|information)\s+(?:of|about)\s+the|gegevens\s+van\s+de|datos\s+del)\s+)?(?:client|factur[ée]\s+[àa](?!\s+(?:r[ée]gler|payer|rembourser))|adress[ée]\s+[àa]|adresse\s+de\s+facturation|destinataire|acheteur|bill\s+to|billed\s+to|billing\s+address|invoice\s+address|invoice\s+to(?!\s+(?:pay|be\s+paid))|customer|sold\s+to|buyer|k[äa]ufer(?:\/leistungsempf[äa]nger)?|kunde|rechnungsempf[äa]nger|leistungsempf[äa]nger|rechnungsadresse|rechnungsanschrift|auftraggeber|factuuradres|afnemer|cliente|destinatario|comprador|direcci[óo]n\s+de\s+facturaci[óo]n|indirizzo\s+di\s+fatturazione|cessionario(?:\/committente)?)(?!\p{L})\s*:?\s*/iu;

/** What may follow "Client" without being a name ("Client n° C-12", "Customer ID", "Customer VAT Number"). */
export const NOT_A_NAME =
  /^(?:n[°º]|no\b|nr\.?\b|nummer|nummer\b|\d|number|num[ée]ro|#|r[ée]f|code|id\b|account|(?:VAT|TVA|tax|SIRE[NT])\b)/iu;

/**
 * A heading over a delivery address ("Adresse de livraison", "Delivery Address", "Lieferanschrift"):
 * a label whose name is on the lines below, never a party's name itself.
 */
export const DELIVERY_HEADING =
  /^(?:adresse\s+de\s+livraison|lieu\s+de\s+livraison|livr[ée]\s+[àa]|delivery\s+address|shipping\s+address|ship\s+to|deliver\s+to|liefer(?:adresse|anschrift)|versand(?:adresse|anschrift)|afleveradres|leveringsadres|direcci[óo]n\s+de\s+(?:entrega|env[íi]o)|indirizzo\s+di\s+(?:consegna|spedizione))\s*:?\s*$/iu;

/** Lines that mention the customer, whose identifiers are not the supplier's. */
export const MENTIONS_CUSTOMER =
  /(?<!\p{L})(?:client|customer|buyer|acheteur|bill(?:ed)?\s+to|billing\s+address|factur[ée]\s+[àa]|kunde|k[äa]ufer|rechnungsempf[äa]nger|leistungsempf[äa]nger|klant|uw\s+BTW|cliente|comprador)(?!\p{L})/iu;

const NUMBER_MARK = String.raw`(?:n[°º]\.?|no\.?|num[ée]ro|number|#|ref\.?|reference|id\b|nr\.?|nummer|n\.|núm(?:ero)?\.?|numero)`;
// The word for an invoice in the languages read: a German compound ends in it ("Mietrechnung").
const INVOICE_WORD = String.raw`(?:facture|invoice|tax\s+invoice|\p{L}*rechnung|factuur|factura|fattura)`;

/** Labels at the start of a cell, then a credit note's number. */
export const CREDIT_NOTE_NUMBER_LABELS: readonly RegExp[] = [
  new RegExp(
    String.raw`^(?:facture\s+d'avoir|avoir|credit\s+note|credit\s+memo)\s*${NUMBER_MARK}\s*:?\s*`,
    'iu',
  ),
  new RegExp(String.raw`^${NUMBER_MARK}\s*(?:de\s+l'|d')?(?:avoir)\s*:?\s*`, 'iu'),
  // A title followed by the reference itself ("Avoir AV-2017-0005"), tried last.
  /^(?:facture\s+d'avoir|avoir|credit\s+note|credit\s+memo)\s+(?=[^\s]*\d)/iu,
];

// Other documents an invoice refers to by their number ("Rechnung zu Bestellung Nr. 4711").
const OTHER_DOCUMENT = String.raw`order|bestell|auftrag|liefer|commande|\bbon\b|contra|vertrag|kund|customer|client|klant|pedido|ordine|albar|delivery|shipment`;

/** Labels at the start of a cell, then an invoice's number. */
export const INVOICE_NUMBER_LABELS: readonly RegExp[] = [
  new RegExp(String.raw`^${INVOICE_WORD}\s*${NUMBER_MARK}\s*:?\s*`, 'iu'),
  // One word or hyphenated: "Rechnungsnummer", "Rechnungs-Nr.", "Factuurnummer", "Belegnummer".
  /^(?:rechnungs|factuur|beleg|dokument|document)[-\s]?(?:nummer|nr\.?|no\.?|number)\s*:?\s*/iu,
  // Abbreviated: "Re.-Nr.", "RG-Nr.", "Inv. No.", "Bill No.".
  /^(?:re\.?-?|rg\.?-?|inv\.?\s*|bill\s+)(?:nr|no|n[°º]|#)\.?\s*:?\s*/iu,
  new RegExp(
    String.raw`^${NUMBER_MARK}\s*(?:de\s+(?:la\s+)?|der\s+|di\s+|della\s+)?${INVOICE_WORD}\s*:?\s*`,
    'iu',
  ),
  /^(?:invoice|facture|rechnung|factuur|factura|fattura)\s*:\s*/iu,
  // A title whose number comes a few words later ("Gutschrift (Selbst ausgestellte Rechnung) Nr. 471102"),
  // its type code in brackets maybe (UNTDID 1001: "Handelsrechnung (380) Nr. 471102").
  new RegExp(
    String.raw`^(?:${INVOICE_WORD}|gutschrift|creditnota|credit\s+note|avoir)(?!\p{L})(?:(?!${OTHER_DOCUMENT})(?:\(\d{3}\)|[^:\d\t])){0,48}?(?<!\p{L})(?:n[°º]\.?|no\.|nr\.?|number|nummer|num[ée]ro)\s*:?\s*`,
    'iu',
  ),
  // A title followed by the reference itself ("Facture FA-2017-0010").
  new RegExp(String.raw`^${INVOICE_WORD}\s+(?=[^\s]*\d)`, 'iu'),
  // Alone in its cell, last: a column header over its value ("Factuur" above "VF1005193039").
  /^(?:invoice|facture|rechnung|factuur|factura|fattura)\s*$/iu,
];

/** A currency named by a label ("Rechnungswährung : GBP", "Currency: USD"): the first one is the invoice's. */
export const CURRENCY_LABEL =
  /(?<!\p{L})(?:invoice\s+currency|currency|devise|monnaie|rechnungsw[äa]hrung|w[äa]hrung|valuta|munt|moneda|divisa)(?!\p{L})\s*:?\s*([A-Z]{3})(?!\p{L})/iu;

/** A party's name as a form gives it, under the party's heading ("Name: Lieferant GmbH"). */
export const NAME_FIELD =
  /^(?:name|firma|firmenname|company(?:\s+name)?|nom|raison\s+sociale|d[ée]nomination|bedrijfsnaam|handelsnaam|naam|raz[óo]n\s+social|nombre|ragione\s+sociale|denominazione|nome)\s*:\s*/iu;

/** A heading over the invoice's own data ("Rechnung", "Rechnungsdaten", "Invoice details"). */
export const INVOICE_HEADING =
  /^(?:(?:angaben\s+zur\s+)?rechnung(?:sdaten|sangaben)?|invoice(?:\s+(?:details|data|information))?|(?:d[ée]tails\s+de\s+la\s+|donn[ée]es\s+de\s+la\s+)?facture|factuur(?:gegevens)?|(?:datos\s+de\s+la\s+)?factura|(?:dati\s+della\s+)?fattura)\s*:?$/iu;

/** A bare number label, which names the invoice's number under an {@link INVOICE_HEADING}. */
export const BARE_NUMBER_LABEL = /^(?:nummer|number|nr\.?|no\.?|n[°º]|num[ée]ro|n[úu]mero|numero)\s*:?\s*/iu;

/** Labels at the start of a cell, then the issue date. */
export const ISSUE_DATE_LABELS: readonly RegExp[] = [
  /^(?:date\s+(?:de\s+(?:la\s+)?)?(?:facture|facturation|l'avoir|d'avoir)|date\s+d'[ée]mission|date\s+of\s+issue|issue\s+date|invoice\s+date|date\s+issued|credit\s+note\s+date|issued\s+on|[ée]mise?\s+le|rechnungsdatum|belegdatum|ausstellungsdatum|factuur\s*datum|fecha(?:\s+de)?(?:\s+(?:factura|emisi[óo]n|expedici[óo]n))?|data(?:\s+(?:della\s+)?(?:fattura|emissione|documento))?)\s*:?\s*/iu,
  // A bare "Date"/"Datum" only with a colon or alone in its cell: "Date de livraison" is another date.
  /^(?:date|datum)\s*(?::\s*|$)/iu,
];

/** A due-date label, anywhere in a line ("Conditions : 30 jours, échéance le 30/12/2026"). */
export const DUE_DATE_LABEL =
  /(?:f[äa]llig(?:\p{L}*|\s+(?:am|bis|zum))|zahlbar\s+(?:bis|am)(?:\s+zum)?|zahlbar\s+(?:innerhalb|ohne|netto|rein)[^.\n\t]{0,40}?\bbis(?:\s+zum)?|(?:remit|pay)\s+(?:until|by|before)|zahlungsziel|vervaldatum|uiterste\s+betaaldatum|te\s+betalen\s+voor|fecha\s+de\s+vencimiento|vencimiento|data\s+(?:di\s+)?scadenza|scadenza|date\s+d'[ée]ch[ée]ance|[ée]ch[ée]ance|date\s+limite(?:\s+de\s+(?:paiement|r[èe]glement))?|[àa]\s+(?:r[ée]gler|payer)\s+(?:avant|au\s+plus\s+tard)(?:\s+le)?|payable\s+(?:avant|before|by|on)(?:\s+le)?|due\s+date|payment\s+due(?:\s+date|\s+by|\s+on)?|date\s+due|due\s+(?:by|on))\s*:?\s*/iu;

/** Lines whose dates are not the issue date. */
export const OTHER_DATE_CONTEXT =
  /f[äa]llig|zahlbar|liefer|leistung|verval|lever|order|vencim|entrega|scadenza|consegna|[ée]ch[ée]ance|due|payable|limite|livraison|delivery|p[ée]riode|period|service\s+date|command|order|origin|d'origine|r[ée]f[ée]rence|du\s+\d|from\s+\d/iu;

/** Title lines, never the supplier's name. */
export const TITLE =
  /^(?:facture|invoice|tax\s+invoice|avoir|facture\s+d'avoir|credit\s+note|credit\s+memo|re[çc]u|receipt|devis|quote|\p{L}*rechnung|gutschrift|factuur|creditnota|kopie|copy|factura|fattura|original|seite|page|stylesheet)(?!\p{L})/iu;

/** Column headers of a line-items table, in the order they are tried on each header cell. */
export const COLUMN_HEADERS: ReadonlyArray<readonly [ColumnRole | null, RegExp]> = [
  [null, /montant\s+(?:de\s+(?:la\s+)?)?TVA|VAT\s+amount|tax\s+amount/iu],
  ['vat_rate', /^(?:TVA|VAT|tax)\b|taux\s+(?:de\s+)?TVA|VAT\s+rate|tax\s+rate|^%$/iu],
  [
    'unit_price',
    /prix|unitaire|\bp\.?\s?u\.?\b|unit\s+price|unit\s+cost|\brate\b|tarif|taux\s+horaire|price/iu,
  ],
  [
    'quantity',
    /(?<!\p{L})qt[ée]s?(?!\p{L})|quantit|\bqty\b|\bnb\b|nombre|\bhours?\b|heures|jours|\bdays\b/iu,
  ],
  ['amount', /montant|total|amount|sous-total/iu],
  [
    'description',
    /d[ée]signation|description|libell[ée]|article|prestation|\bitems?\b|produit|service|d[ée]tails?/iu,
  ],
];

/** What a column of the line-items table holds. */
export type ColumnRole = 'description' | 'quantity' | 'unit_price' | 'amount' | 'vat_rate';
