import { XMLParser, XMLValidator } from 'fast-xml-parser';

/**
 * Safe XML for e-invoices: fast-xml-parser with every dangerous feature off, then a small
 * namespace-aware tree. EN 16931's syntaxes (CII, UBL) are defined by XML Schemas and never use a
 * DTD, so a document that declares one is refused outright, before parsing: no external entity is
 * ever fetched (XXE) and no entity is ever expanded (billion laughs). Only XML's five predefined
 * entities and character references are decoded, by this module. Size and nesting are capped.
 */

/** The caps applied to every XML document before and while it is parsed. */
export interface XmlLimits {
  /** Larger documents are refused unread. An EN 16931 invoice with 500 lines is well under 2 MiB. */
  maxBytes: number;
  /** Deeper nesting is refused; CII and UBL invoices nest about 10 elements deep. */
  maxDepth: number;
}

export const XML_LIMITS: Readonly<XmlLimits> = Object.freeze({ maxBytes: 5 * 1024 * 1024, maxDepth: 32 });

/** Why an XML document was refused: it is malformed, hostile or over a cap. */
export class XmlRefusal extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'XmlRefusal';
  }
}

/** One element, its name resolved against the namespaces in scope. */
export interface XmlElement {
  /** Namespace URI ('' when none). */
  readonly uri: string;
  readonly local: string;
  /** Attributes by their name as written (`schemeID`, `xmlns:ram`), values decoded. */
  readonly attributes: Readonly<Record<string, string>>;
  readonly children: readonly XmlElement[];
  /** The element's own text, decoded and trimmed (its children's text excluded). */
  readonly text: string;
}

const TEXT = '#text';
const CDATA = '#cdata';
const ATTRIBUTES = ':@';
const XMLNS = 'http://www.w3.org/XML/1998/namespace';

/** Parses `bytes` (UTF-8) into its root element. Throws {@link XmlRefusal}. */
export function parseXml(bytes: Uint8Array, limits: XmlLimits = XML_LIMITS): XmlElement {
  if (bytes.length > limits.maxBytes) {
    throw new XmlRefusal(`the XML has ${bytes.length} bytes, over the cap of ${limits.maxBytes}`);
  }
  // UTF-16 without a byte order mark decodes as "UTF-8" full of NULs, which XML never contains.
  if (bytes.includes(0))
    throw new XmlRefusal('the XML is not UTF-8 (it has NUL bytes; EN 16931 requires UTF-8)');
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch (error) {
    throw new XmlRefusal('the XML is not UTF-8 (EN 16931 requires it)', { cause: error });
  }
  // A DTD has no place in an EN 16931 document; refusing it is what keeps entities out.
  if (declaresDtd(text)) {
    throw new XmlRefusal('the XML declares a DTD (DOCTYPE or ENTITY), which e-invoices never do');
  }
  // The parser is lenient about structure; its validator is not (mismatched or unclosed tags).
  const valid = XMLValidator.validate(text);
  if (valid !== true) {
    throw new XmlRefusal(`the XML is malformed: ${valid.err.msg} (line ${valid.err.line})`);
  }
  const parser = new XMLParser({
    preserveOrder: true,
    ignoreAttributes: false,
    attributeNamePrefix: '',
    parseTagValue: false,
    parseAttributeValue: false,
    trimValues: true,
    ignoreDeclaration: true,
    ignorePiTags: true,
    cdataPropName: CDATA,
    // Entities stay as written; decodeText below decodes the predefined ones and refuses the rest.
    processEntities: false,
    htmlEntities: false,
    maxNestedTags: limits.maxDepth,
  });
  let nodes: unknown;
  try {
    nodes = parser.parse(text);
  } catch (error) {
    throw new XmlRefusal(`the XML cannot be parsed: ${error instanceof Error ? error.message : error}`, {
      cause: error,
    });
  }
  const roots = elementsOf(nodes);
  if (roots.length !== 1) throw new XmlRefusal(`the XML has ${roots.length} root elements, not one`);
  return toElement(roots[0]!, new Map([['xml', XMLNS]]), 1, limits.maxDepth);
}

/**
 * Whether `<!DOCTYPE` or `<!ENTITY` appears anywhere, in any case. Deliberately blunt: even inside a
 * comment or CDATA it refuses, since no e-invoice needs either word there.
 */
function declaresDtd(text: string): boolean {
  for (let at = text.indexOf('<!'); at >= 0; at = text.indexOf('<!', at + 2)) {
    const word = text.slice(at + 2, at + 9).toUpperCase();
    if (word === 'DOCTYPE' || word.startsWith('ENTITY')) return true;
  }
  return false;
}

type RawNode = Record<string, unknown>;

/** The element nodes among fast-xml-parser's ordered nodes (text, CDATA and attributes aside). */
function elementsOf(nodes: unknown): RawNode[] {
  if (!Array.isArray(nodes)) return [];
  return nodes.filter((node): node is RawNode => {
    if (typeof node !== 'object' || node === null) return false;
    const name = elementName(node as RawNode);
    return name !== undefined;
  });
}

function elementName(node: RawNode): string | undefined {
  return Object.keys(node).find((key) => key !== ATTRIBUTES && key !== TEXT && key !== CDATA);
}

function toElement(node: RawNode, scope: Map<string, string>, depth: number, maxDepth: number): XmlElement {
  if (depth > maxDepth) throw new XmlRefusal(`the XML nests deeper than ${maxDepth} elements`);
  const qname = elementName(node)!;
  const rawAttributes = (node[ATTRIBUTES] ?? {}) as Record<string, unknown>;
  // No prototype: an attribute named `__proto__` or `constructor` is only a name here.
  const attributes: Record<string, string> = Object.create(null);
  let inScope = scope;
  for (const [name, value] of Object.entries(rawAttributes)) {
    const decoded = decodeText(String(value));
    attributes[name] = decoded;
    if (name === 'xmlns' || name.startsWith('xmlns:')) {
      if (inScope === scope) inScope = new Map(scope);
      inScope.set(name === 'xmlns' ? '' : name.slice(6), decoded);
    }
  }
  const colon = qname.indexOf(':');
  const prefix = colon < 0 ? '' : qname.slice(0, colon);
  const local = colon < 0 ? qname : qname.slice(colon + 1);
  const uri = inScope.get(prefix);
  if (uri === undefined && prefix !== '')
    throw new XmlRefusal(`the XML uses an undeclared prefix "${prefix}"`);
  const content = Array.isArray(node[qname]) ? (node[qname] as unknown[]) : [];
  let text = '';
  const children: XmlElement[] = [];
  for (const part of content) {
    if (typeof part !== 'object' || part === null) continue;
    const piece = part as RawNode;
    if (TEXT in piece) text += decodeText(String(piece[TEXT]));
    else if (CDATA in piece) text += cdataText(piece[CDATA]);
    else if (elementName(piece) !== undefined) children.push(toElement(piece, inScope, depth + 1, maxDepth));
  }
  return { uri: uri ?? '', local, attributes, children, text: text.trim() };
}

function cdataText(value: unknown): string {
  if (!Array.isArray(value)) return '';
  return value.map((part) => String((part as RawNode)[TEXT] ?? '')).join('');
}

const PREDEFINED: Record<string, string> = { lt: '<', gt: '>', amp: '&', apos: "'", quot: '"' };

/**
 * Decodes XML's predefined entities and character references in a text or attribute value. Any
 * other entity reference would need a DTD, which is refused, so it is malformed here.
 */
export function decodeText(value: string): string {
  let out = '';
  let from = 0;
  for (let at = value.indexOf('&'); at >= 0; at = value.indexOf('&', from)) {
    const end = value.indexOf(';', at);
    if (end < 0) throw new XmlRefusal('the XML has an unterminated entity reference');
    const name = value.slice(at + 1, end);
    out += value.slice(from, at) + decodeReference(name);
    from = end + 1;
  }
  return out + value.slice(from);
}

function decodeReference(name: string): string {
  const predefined = PREDEFINED[name];
  if (predefined !== undefined) return predefined;
  if (name.startsWith('#')) {
    const hex = name[1] === 'x';
    const digits = name.slice(hex ? 2 : 1);
    const valid = digits !== '' && [...digits].every((c) => (hex ? /[0-9a-fA-F]/ : /[0-9]/).test(c));
    const code = valid ? Number.parseInt(digits, hex ? 16 : 10) : Number.NaN;
    if (Number.isInteger(code) && code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff)) {
      return String.fromCodePoint(code);
    }
    throw new XmlRefusal(`the XML has an invalid character reference "&${name};"`);
  }
  throw new XmlRefusal(`the XML refers to the undeclared entity "&${name};"`);
}
