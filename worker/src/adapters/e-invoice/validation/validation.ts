import type { Analysis } from '../../../contract/analysis';
import type { Analyzer } from '../../../core/ports';
import { select } from '../invoice';
import { HEADER_TERMS, type Syntax } from '../mapping';
import type { XmlElement } from '../xml';
import { type ArtefactResult, type SaxonRunner, ValidatorUnavailable } from './saxon-runner';

/**
 * What the row's `e_invoice_validation` column records about an e-invoice: the verdict of the
 * official validation artefacts run on its XML (EN 16931 by CEN/TC 434, Factur-X by FNFE-MPE by
 * profile, the French rules BR-FR of XP Z12-012 for a French seller's CII), the ids of the rules
 * that fired, and on a hybrid PDF how its picture, read by the offline analyzer, compares with the
 * XML. No token is spent: the artefacts run in Saxon-HE, the picture in the offline analyzer.
 * docs/e-invoices.md, "Validation on receipt".
 */

/** One set of rules run on the document. */
export interface RulesetVerdict {
  /** The artefact's key in the runner's manifest (`en16931-cii`, `factur-x-basic`, `br-fr-cii`). */
  artefact: string;
  /** Where it comes from, with its release. */
  source: string;
  sha256: string;
  verdict: 'valid' | 'invalid';
  /** Ids of the rules that failed with flag fatal or error (or no flag): they make the document invalid. */
  failed: string[];
  /** Ids of the rules that failed as warnings or information. */
  warnings: string[];
}

/** A field the picture reads differently from the XML. */
export interface Disagreement {
  field: 'total_amount' | 'invoice_number' | 'seller';
  xml: string;
  picture: string;
}

/** How a hybrid PDF's picture compares with its XML, on the fields an altered PDF changes. */
export interface PictureComparison {
  analyzer: string;
  /** The fields both state and that were compared. */
  compared: Array<Disagreement['field']>;
  /** The fields the picture does not state (not compared). */
  unread: Array<Disagreement['field']>;
  disagreements: Disagreement[];
}

/** The column's value. */
export interface EInvoiceValidation {
  /** `valid`: no decisive rule failed; `invalid`: one did; `unchecked`: the validator could not run. */
  verdict: 'valid' | 'invalid' | 'unchecked';
  syntax: Syntax;
  /** The specification identifier the document declares (BT-24), when it does. */
  profile: string | null;
  rulesets: RulesetVerdict[];
  /** Every decisive rule id that fired, over all rulesets, in order, once each. */
  failed: string[];
  warnings: string[];
  /** Why the verdict is `unchecked`, or what was not run. */
  detail?: string;
  picture?: PictureComparison;
}

/** The Factur-X profile a guideline id (BT-24) names, as the runner's artefact key. */
export function facturXProfile(profile: string | null): string | undefined {
  if (!profile) return undefined;
  const p = profile.toLowerCase();
  if (p.includes('factur-x.eu:1p0:minimum') || p.includes('zugferd.de:2p0:minimum'))
    return 'factur-x-minimum';
  if (p.includes('factur-x.eu:1p0:basicwl') || p.includes('zugferd.de:2p0:basicwl'))
    return 'factur-x-basic-wl';
  if (p.includes('factur-x.eu:1p0:basic') || p.includes('zugferd.de:2p0:basic')) return 'factur-x-basic';
  if (p.includes('factur-x.eu:1p0:extended') || p.includes('zugferd.de:2p0:extended'))
    return 'factur-x-extended';
  if (p.startsWith('urn:cen.eu:en16931:2017')) return 'factur-x-en16931';
  return undefined;
}

/** The profiles that are no complete EN 16931 invoice: EN 16931's own rules do not apply to them. */
const BELOW_EN16931 = new Set(['factur-x-minimum', 'factur-x-basic-wl']);

/** What a document is checked against: its syntax's EN 16931 rules, its Factur-X profile, BR-FR. */
export function rulesetsFor(doc: {
  syntax: Syntax;
  profile: string | null;
  sellerCountry: string | null;
  facturX: boolean;
}): {
  keys: string[];
  notRun: string[];
} {
  const keys: string[] = [];
  const notRun: string[] = [];
  const profile = doc.syntax === 'cii' ? facturXProfile(doc.profile) : undefined;
  if (!profile || !BELOW_EN16931.has(profile))
    keys.push(doc.syntax === 'cii' ? 'en16931-cii' : 'en16931-ubl');
  // A Factur-X profile's own schematron: for a Factur-X PDF, and for a CII that declares one.
  if (profile && (doc.facturX || profile !== 'factur-x-en16931')) keys.push(profile);
  if (doc.sellerCountry === 'FR') {
    if (doc.syntax === 'cii') keys.push('br-fr-cii');
    else notRun.push('BR-FR: the French rules are published for CII only (XP Z12-012)');
  }
  return { keys, notRun };
}

const DECISIVE_FLAGS = new Set(['', 'fatal', 'error']);

/** A ruleset's verdict from what its artefact reported. */
function rulesetVerdict(key: string, result: ArtefactResult, runner: SaxonRunner): RulesetVerdict {
  const unique = (ids: string[]) => [...new Set(ids)];
  const failed = unique(
    result.failed.filter((a) => DECISIVE_FLAGS.has(a.flag.toLowerCase())).map((a) => a.id || a.text),
  );
  const warnings = unique([
    ...result.failed.filter((a) => !DECISIVE_FLAGS.has(a.flag.toLowerCase())).map((a) => a.id || a.text),
    ...result.reports.map((a) => a.id || a.text),
  ]);
  const artefact = runner.artefacts[key]!;
  return {
    artefact: key,
    source: artefact.source,
    sha256: artefact.sha256,
    verdict: failed.length === 0 ? 'valid' : 'invalid',
    failed,
    warnings,
  };
}

const first = (root: XmlElement, path: string, syntax: Syntax) =>
  select(root, path, { syntax, currency: null })[0]?.text || null;
const GUIDELINE = {
  cii: 'rsm:ExchangedDocumentContext/ram:GuidelineSpecifiedDocumentContextParameter/ram:ID',
  ubl: 'cbc:CustomizationID',
} as const;
const SELLER_COUNTRY = HEADER_TERMS.find((t) => t.term === 'BT-40')!;

/** The options of {@link EInvoiceValidator}. */
export interface EInvoiceValidatorOptions {
  /** The runner; absent, every verdict is `unchecked` (with `unavailable` as the detail). */
  runner?: SaxonRunner;
  /** Why there is no runner (the detail of an `unchecked` verdict). */
  unavailable?: string;
  /** How long one validation may take (the first compiles the artefacts). */
  timeoutMs?: number;
  /** Reads a hybrid PDF's picture to compare it with the XML; a free analyzer only (the offline one). */
  picture?: Analyzer;
}

/** Validates e-invoices on receipt and compares a hybrid PDF's picture with its XML. */
export class EInvoiceValidator {
  private readonly timeoutMs: number;

  constructor(private readonly options: EInvoiceValidatorOptions) {
    this.timeoutMs = options.timeoutMs ?? 60_000;
  }

  /** Compiles every artefact now, so that the first document does not wait for it. */
  async warm(): Promise<void> {
    const runner = this.options.runner;
    if (runner) await runner.run(new Uint8Array(), Object.keys(runner.artefacts), 5 * this.timeoutMs);
  }

  /** The verdict on one invoice XML, already parsed by docline (`root`) and known to be of `syntax`. */
  async validate(
    xml: Uint8Array,
    root: XmlElement,
    syntax: Syntax,
    facturX: boolean,
  ): Promise<EInvoiceValidation> {
    const profile = first(root, GUIDELINE[syntax], syntax);
    const sellerCountry = first(root, syntax === 'cii' ? SELLER_COUNTRY.cii : SELLER_COUNTRY.ubl, syntax);
    const { keys, notRun } = rulesetsFor({ syntax, profile, sellerCountry, facturX });
    const base = {
      syntax,
      profile,
      rulesets: [] as RulesetVerdict[],
      failed: [] as string[],
      warnings: [] as string[],
    };
    const runner = this.options.runner;
    if (!runner) {
      return { verdict: 'unchecked', ...base, detail: this.options.unavailable ?? 'no validator installed' };
    }
    let results: ArtefactResult[];
    try {
      results = await runner.run(xml, keys, this.timeoutMs);
    } catch (error) {
      if (!(error instanceof ValidatorUnavailable)) throw error;
      return { verdict: 'unchecked', ...base, detail: error.message };
    }
    const rulesets = keys.map((key, i) => rulesetVerdict(key, results[i]!, runner));
    const all = (pick: (r: RulesetVerdict) => string[]) => [...new Set(rulesets.flatMap(pick))];
    return {
      verdict: rulesets.some((r) => r.verdict === 'invalid') ? 'invalid' : 'valid',
      syntax,
      profile,
      rulesets,
      failed: all((r) => r.failed),
      warnings: all((r) => r.warnings),
      ...(notRun.length > 0 ? { detail: notRun.join('; ') } : {}),
    };
  }

  /** Reads a hybrid PDF's picture and compares it with what its XML states; undefined without an analyzer. */
  async comparePicture(
    input: { bytes: Buffer; name: string },
    xml: Analysis,
  ): Promise<PictureComparison | undefined> {
    const analyzer = this.options.picture;
    if (!analyzer) return undefined;
    let picture: Analysis;
    let model: string;
    try {
      const read = await analyzer.analyze({
        bytes: input.bytes,
        contentType: 'application/pdf',
        name: input.name,
      });
      picture = read.analysis;
      model = read.model;
    } catch {
      // A picture the analyzer cannot read is no disagreement: nothing was compared.
      return {
        analyzer: 'offline',
        compared: [],
        unread: ['total_amount', 'invoice_number', 'seller'],
        disagreements: [],
      };
    }
    return { analyzer: model, ...comparePictureWithXml(picture, xml) };
  }
}

/** Identifiers compared without spaces, dots and dashes, in capitals. */
const id = (v: string | null | undefined) => v?.replace(/[\s.\-/_]/g, '').toUpperCase() || null;
/** A name compared whatever its case, spacing and punctuation, a trailing legal form left out. */
export function sameName(a: string, b: string): boolean {
  const norm = (s: string) =>
    s
      .normalize('NFD')
      .replace(/[\u0300-\u036f]/g, '')
      .toLowerCase()
      .replace(/\b(sas|sasu|sarl|sa|eurl|sci|snc|gmbh|ag|ltd|limited|inc|llc|plc|bv|nv|srl|spa)\b\.?/g, '')
      .replace(/[^a-z0-9]/g, '');
  return norm(a) === norm(b);
}

/**
 * The picture against the XML on the three fields an altered PDF changes: the total (within half
 * a cent, a credit note's without its sign), the invoice number (without separators, any case)
 * and the seller (by an identifier both state, SIREN read from a SIRET or a French VAT id too, else
 * by name). A field the picture does not state is not compared.
 */
export function comparePictureWithXml(picture: Analysis, xml: Analysis): Omit<PictureComparison, 'analyzer'> {
  const compared: PictureComparison['compared'] = [];
  const unread: PictureComparison['unread'] = [];
  const disagreements: Disagreement[] = [];
  if (picture.total_amount === null || xml.total_amount === null) unread.push('total_amount');
  else {
    compared.push('total_amount');
    if (Math.abs(Math.abs(picture.total_amount) - Math.abs(xml.total_amount)) > 0.005 + 1e-9)
      disagreements.push({
        field: 'total_amount',
        xml: String(xml.total_amount),
        picture: String(picture.total_amount),
      });
  }
  if (!picture.invoice_number || !xml.invoice_number) unread.push('invoice_number');
  else {
    compared.push('invoice_number');
    if (id(picture.invoice_number) !== id(xml.invoice_number))
      disagreements.push({
        field: 'invoice_number',
        xml: xml.invoice_number,
        picture: picture.invoice_number,
      });
  }
  const ids = (a: Analysis) => {
    const out = new Set<string>();
    const vat = id(a.supplier_vat_id);
    const siret = id(a.supplier_siret);
    const siren = id(a.supplier_siren) ?? siret?.slice(0, 9) ?? /^FR[0-9A-Z]{2}(\d{9})$/.exec(vat ?? '')?.[1];
    if (vat) out.add(`vat:${vat}`);
    if (siren) out.add(`siren:${siren}`);
    return out;
  };
  const [pIds, xIds] = [ids(picture), ids(xml)];
  const kinds = (s: Set<string>) => new Set([...s].map((k) => k.split(':')[0]));
  const shared = [...kinds(pIds)].filter((k) => kinds(xIds).has(k));
  if (shared.length > 0) {
    compared.push('seller');
    // Every kind of identifier both state must agree.
    const differs = shared.filter(
      (k) => [...pIds].find((x) => x.startsWith(`${k}:`)) !== [...xIds].find((x) => x.startsWith(`${k}:`)),
    );
    if (differs.length > 0)
      disagreements.push({
        field: 'seller',
        xml: [...xIds].filter((x) => differs.some((k) => x.startsWith(`${k}:`))).join(', '),
        picture: [...pIds].filter((x) => differs.some((k) => x.startsWith(`${k}:`))).join(', '),
      });
  } else if (picture.supplier_name && xml.supplier_name) {
    compared.push('seller');
    if (!sameName(picture.supplier_name, xml.supplier_name))
      disagreements.push({ field: 'seller', xml: xml.supplier_name, picture: picture.supplier_name });
  } else unread.push('seller');
  return { compared, unread, disagreements };
}
