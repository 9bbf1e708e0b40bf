/**
 * A small PDF writer for the samples, the tests and the benchmark's scans: pages with text in the
 * standard Helvetica fonts (WinAnsi encoding: English, French and the other Western European
 * accents, the euro sign), images (JPEG as DCTDecode, grey pixels deflated, or any raw image stream
 * a test needs, a hostile one included), rectangles, document information, and embedded files as
 * a Factur-X PDF carries them (the catalog's `/Names /EmbeddedFiles` tree and `/AF`, a file
 * specification with `/AFRelationship` and `/EF`). One classic cross-reference table, no object
 * streams, no compression but the content streams': every byte a reader needs is where a test
 * can find it. Deterministic: the same calls give the same bytes.
 *
 * It is not part of the worker (which only reads PDFs, with pdf.js); worker/test/pdf-writer.test.ts
 * reads its output back with pdf.js.
 */
import { deflateSync } from 'node:zlib';

export type StandardFont = 'Helvetica' | 'Helvetica-Bold';
/** A colour as red, green and blue between 0 and 1. */
export type Rgb = readonly [number, number, number];

// Windows-1252's characters in 0x80-0x9F, as its decoder reads them (the rest of 0x20-0xFF is
// Latin-1, code for code; the five codes Windows-1252 leaves undefined read as C1 controls: left out).
const WIN_ANSI_HIGH: Record<number, number> = {};
const windows1252 = new TextDecoder('windows-1252');
for (let byte = 0x80; byte < 0xa0; byte += 1) {
  const code = windows1252.decode(Uint8Array.of(byte)).codePointAt(0)!;
  if (code > 0xff) WIN_ANSI_HIGH[code] = byte;
}

// Advance widths (thousandths of the font size) of WinAnsi codes 32-255, from Adobe's AFM files of
// the standard 14 fonts; 0 where the code has no character.
// biome-ignore format: a table
const WIDTHS: Record<StandardFont, readonly number[]> = {
  Helvetica: [
    278,278,355,556,556,889,667,191,333,333,389,584,278,333,278,278,556,556,556,556,556,556,556,556,
    556,556,278,278,584,584,584,556,1015,667,667,722,722,667,611,778,722,278,500,667,556,833,722,778,
    667,778,722,667,611,722,667,944,667,667,611,278,278,278,469,556,333,556,556,500,556,556,278,556,
    556,222,222,500,222,833,556,556,556,556,333,500,278,556,500,722,500,500,500,334,260,334,584,0,
    556,0,222,556,333,1000,556,556,333,1000,667,333,1000,0,611,0,0,222,222,333,333,350,556,1000,333,
    1000,500,333,944,0,500,500,278,333,556,556,556,556,260,556,333,737,370,556,584,333,737,333,400,
    584,333,333,333,556,537,278,333,333,365,556,834,834,834,611,667,667,667,667,667,667,1000,722,667,
    667,667,667,278,278,278,278,722,722,778,778,778,778,778,584,778,722,722,722,722,667,667,611,556,
    556,556,556,556,556,889,500,556,556,556,556,278,278,278,278,556,556,556,556,556,556,556,584,611,
    556,556,556,556,500,556,500,
  ],
  'Helvetica-Bold': [
    278,333,474,556,556,889,722,238,333,333,389,584,278,333,278,278,556,556,556,556,556,556,556,556,
    556,556,333,333,584,584,584,611,975,722,722,722,722,667,611,778,722,278,556,722,611,833,722,778,
    667,778,722,667,611,722,667,944,667,667,611,333,278,333,584,556,333,556,611,556,611,556,333,611,
    611,278,278,556,278,889,611,611,611,611,389,556,333,611,556,778,556,556,500,389,280,389,584,0,
    556,0,278,556,500,1000,556,556,333,1000,667,333,1000,0,611,0,0,278,278,500,500,350,556,1000,333,
    1000,556,333,944,0,500,556,278,333,556,556,556,556,280,556,333,737,370,556,584,333,737,333,400,
    584,333,333,333,611,556,278,333,333,365,556,834,834,834,611,722,722,722,722,722,722,1000,722,667,
    667,667,667,278,278,278,278,722,722,778,778,778,778,778,584,778,722,722,722,722,667,667,611,556,
    556,556,556,556,556,889,556,556,556,556,556,278,278,278,278,611,611,611,611,611,611,611,584,611,
    611,611,611,611,556,611,556,
  ],
};

/** `text` in WinAnsi bytes; throws on a character the encoding has not (U+202F, CJK, emoji...). */
export function winAnsi(text: string): Buffer {
  return Buffer.from(
    [...text].map((char) => {
      const code = char.codePointAt(0)!;
      const byte =
        (code >= 0x20 && code <= 0x7e) || (code >= 0xa0 && code <= 0xff) ? code : WIN_ANSI_HIGH[code];
      if (byte === undefined) {
        throw new Error(`WinAnsi cannot encode U+${code.toString(16).toUpperCase().padStart(4, '0')}`);
      }
      return byte;
    }),
  );
}

/** The width of `text` in points, set in `font` at `size`. */
export function textWidth(text: string, font: StandardFont, size: number): number {
  let width = 0;
  for (const byte of winAnsi(text)) width += WIDTHS[font][byte - 32] ?? 0;
  return (width * size) / 1000;
}

/** A number as a content stream writes it: at most 4 decimals, no exponent. */
function num(n: number): string {
  if (!Number.isFinite(n)) throw new Error(`not a finite number: ${n}`);
  return String(Math.round(n * 10_000) / 10_000);
}

const hex = (bytes: Uint8Array) => `<${Buffer.from(bytes).toString('hex').toUpperCase()}>`;

/** A text string as PDF metadata writes it: UTF-16BE with its byte order mark. */
function textString(text: string): string {
  const utf16 = Buffer.from(text, 'utf16le').swap16();
  return hex(Buffer.concat([Buffer.from([0xfe, 0xff]), utf16]));
}

/** A literal byte string of printable ASCII (file names for readers that only read `/F`). */
function literal(text: string): string {
  const ascii = [...text].map((c) => (c.charCodeAt(0) >= 0x20 && c.charCodeAt(0) < 0x7f ? c : '_')).join('');
  return `(${ascii.replace(/[\\()]/gu, (c) => `\\${c}`)})`;
}

/** A PDF date, in UTC. */
function pdfDate(date: Date): string {
  const iso = date.toISOString();
  return `(D:${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z)`;
}

/** A name, with the characters names cannot hold escaped (`text/xml` is `/text#2Fxml`). */
function name(value: string): string {
  return `/${value.replace(/[^A-Za-z0-9._-]/gu, (c) => `#${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`)}`;
}

/** An image the writer holds, to draw on pages by {@link PdfPage.drawImage}. */
export interface PdfImage {
  readonly ref: number;
  readonly width: number;
  readonly height: number;
}

/** A file embedded in the PDF, as Factur-X/ZUGFeRD carry their XML. */
export interface EmbeddedFile {
  /** The file's name (`factur-x.xml`). */
  name: string;
  /** The stream's bytes as stored: already compressed when `filter` says so. */
  stored: Uint8Array;
  /** The stream's filter, as stored (`FlateDecode`); none: stored as they are. */
  filter?: string;
  /** Its media type (`text/xml`). */
  mimeType?: string;
  /** `/AFRelationship` (Factur-X: `Data`, `Alternative`, `Source`). */
  relationship?: string;
  description?: string;
}

/** The document information dictionary. */
export interface DocumentInfo {
  title?: string;
  author?: string;
  producer?: string;
  creator?: string;
  created?: Date;
  modified?: Date;
}

/** Object numbers of the two objects every PDF of the writer has first. */
const CATALOG = 1;
const PAGES = 2;

/** One page: its drawing operators and the resources they name. */
export class PdfPage {
  readonly ops: string[] = [];
  readonly fonts = new Set<StandardFont>();
  readonly images = new Map<string, number>();

  constructor(
    readonly width: number,
    readonly height: number,
  ) {}

  /** Draws one line of `text` with its baseline starting at (x, y). */
  drawText(
    text: string,
    options: { x: number; y: number; size: number; font?: StandardFont; color?: Rgb },
  ): void {
    const font = options.font ?? 'Helvetica';
    this.fonts.add(font);
    const [r, g, b] = options.color ?? [0, 0, 0];
    this.ops.push(
      'q',
      'BT',
      `${num(r)} ${num(g)} ${num(b)} rg`,
      `${fontResource(font)} ${num(options.size)} Tf`,
      `1 0 0 1 ${num(options.x)} ${num(options.y)} Tm`,
      `${hex(winAnsi(text))} Tj`,
      'ET',
      'Q',
    );
  }

  /** Paints `image` into the rectangle of lower left corner (x, y). */
  drawImage(image: PdfImage, box: { x: number; y: number; width: number; height: number }): void {
    const resource = `Im${image.ref}`;
    this.images.set(resource, image.ref);
    this.ops.push(
      'q',
      `${num(box.width)} 0 0 ${num(box.height)} ${num(box.x)} ${num(box.y)} cm`,
      `/${resource} Do`,
      'Q',
    );
  }

  /** A rectangle, filled and/or stroked. */
  drawRectangle(box: {
    x: number;
    y: number;
    width: number;
    height: number;
    fill?: Rgb;
    stroke?: Rgb;
    lineWidth?: number;
  }): void {
    const ops = ['q'];
    if (box.fill) ops.push(`${box.fill.map(num).join(' ')} rg`);
    if (box.stroke) ops.push(`${box.stroke.map(num).join(' ')} RG`, `${num(box.lineWidth ?? 1)} w`);
    ops.push(`${num(box.x)} ${num(box.y)} ${num(box.width)} ${num(box.height)} re`);
    ops.push(box.fill && box.stroke ? 'B' : box.fill ? 'f' : 'S', 'Q');
    if (box.fill || box.stroke) this.ops.push(...ops);
  }
}

const fontResource = (font: StandardFont) => (font === 'Helvetica' ? '/F1' : '/F2');

/** Writes one PDF: add pages, images and files, then {@link save}. */
export class PdfWriter {
  private readonly objects = new Map<number, Buffer>();
  private readonly pages: PdfPage[] = [];
  private readonly files: Array<{ name: string; ref: number }> = [];
  private readonly fontRefs = new Map<StandardFont, number>();
  private next = PAGES + 1;

  constructor(private readonly info: DocumentInfo = {}) {}

  /** A new page of `width` x `height` points, after the others. */
  addPage(width: number, height: number): PdfPage {
    const page = new PdfPage(width, height);
    this.pages.push(page);
    return page;
  }

  /** A baseline or progressive JPEG, embedded as it is (DCTDecode). */
  jpeg(bytes: Uint8Array): PdfImage {
    const { width, height, components } = jpegSize(bytes);
    const colorSpace = components === 1 ? 'DeviceGray' : components === 4 ? 'DeviceCMYK' : 'DeviceRGB';
    return this.eightBitImage(width, height, colorSpace, 'DCTDecode', bytes);
  }

  /** 8-bit grey pixels, row by row from the top, deflated. */
  greyPixels(width: number, height: number, pixels: Uint8Array): PdfImage {
    if (pixels.length !== width * height) throw new Error('greyPixels: one byte a pixel');
    return this.eightBitImage(width, height, 'DeviceGray', 'FlateDecode', deflateSync(pixels));
  }

  /** An 8-bit image of one colour space, its samples stored through one filter. */
  private eightBitImage(
    width: number,
    height: number,
    colorSpace: string,
    filter: string,
    stored: Uint8Array,
  ): PdfImage {
    return this.image(
      {
        Width: width,
        Height: height,
        ColorSpace: `/${colorSpace}`,
        BitsPerComponent: 8,
        Filter: `/${filter}`,
      },
      stored,
    );
  }

  /**
   * An image XObject of the dictionary entries given (values written as they are: `'/DeviceGray'`,
   * `8`) and the stored bytes: what a test uses to declare what it likes (a decompression bomb).
   */
  image(entries: Record<string, string | number>, stored: Uint8Array): PdfImage {
    const width = Number(entries.Width);
    const height = Number(entries.Height);
    const ref = this.addStream({ Type: '/XObject', Subtype: '/Image', ...entries }, stored);
    return { ref, width, height };
  }

  /** Embeds a file, named in the catalog's EmbeddedFiles tree and listed in its `/AF`. */
  attach(file: EmbeddedFile): void {
    const stream = this.addStream(
      {
        Type: '/EmbeddedFile',
        ...(file.mimeType ? { Subtype: name(file.mimeType) } : {}),
        ...(file.filter ? { Filter: name(file.filter) } : {}),
        ...(this.info.modified ? { Params: `<< /ModDate ${pdfDate(this.info.modified)} >>` } : {}),
      },
      file.stored,
    );
    const spec = this.add(
      dictionary({
        Type: '/Filespec',
        F: literal(file.name),
        UF: textString(file.name),
        ...(file.description ? { Desc: textString(file.description) } : {}),
        AFRelationship: name(file.relationship ?? 'Data'),
        EF: `<< /F ${stream} 0 R /UF ${stream} 0 R >>`,
      }),
    );
    this.files.push({ name: file.name, ref: spec });
  }

  /** The PDF's bytes. */
  save(): Buffer {
    const pageRefs = this.pages.map((page) => this.writePage(page));
    const infoEntries: Record<string, string> = {};
    if (this.info.title) infoEntries.Title = textString(this.info.title);
    if (this.info.author) infoEntries.Author = textString(this.info.author);
    if (this.info.producer) infoEntries.Producer = textString(this.info.producer);
    if (this.info.creator) infoEntries.Creator = textString(this.info.creator);
    if (this.info.created) infoEntries.CreationDate = pdfDate(this.info.created);
    if (this.info.modified) infoEntries.ModDate = pdfDate(this.info.modified);
    const info = Object.keys(infoEntries).length > 0 ? this.add(dictionary(infoEntries)) : undefined;
    this.objects.set(
      PAGES,
      Buffer.from(
        dictionary({
          Type: '/Pages',
          Kids: `[${pageRefs.map((r) => ` ${r} 0 R`).join('')} ]`,
          Count: pageRefs.length,
        }),
        'latin1',
      ),
    );
    const files = [...this.files].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    this.objects.set(
      CATALOG,
      Buffer.from(
        dictionary({
          Type: '/Catalog',
          Pages: `${PAGES} 0 R`,
          ...(files.length > 0
            ? {
                Names: `<< /EmbeddedFiles << /Names [${files.map((f) => ` ${textString(f.name)} ${f.ref} 0 R`).join('')} ] >> >>`,
                AF: `[${files.map((f) => ` ${f.ref} 0 R`).join('')} ]`,
              }
            : {}),
        }),
        'latin1',
      ),
    );

    // Header, with a comment of high bytes so that transfers treat the file as binary.
    const chunks: Buffer[] = [Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n', 'latin1')];
    let offset = chunks[0]!.length;
    const offsets: number[] = [];
    const count = this.next;
    for (let ref = 1; ref < count; ref++) {
      const body = this.objects.get(ref);
      if (!body) throw new Error(`object ${ref} was never written`);
      const object = Buffer.concat([
        Buffer.from(`${ref} 0 obj\n`, 'latin1'),
        body,
        Buffer.from('\nendobj\n', 'latin1'),
      ]);
      offsets[ref] = offset;
      chunks.push(object);
      offset += object.length;
    }
    // Each cross-reference entry is exactly 20 bytes, its end of line included.
    const xref = [`xref\n0 ${count}\n`, '0000000000 65535 f\r\n'];
    for (let ref = 1; ref < count; ref++) xref.push(`${String(offsets[ref]).padStart(10, '0')} 00000 n\r\n`);
    const trailer = dictionary({
      Size: count,
      Root: `${CATALOG} 0 R`,
      ...(info ? { Info: `${info} 0 R` } : {}),
    });
    chunks.push(Buffer.from(`${xref.join('')}trailer\n${trailer}\nstartxref\n${offset}\n%%EOF\n`, 'latin1'));
    return Buffer.concat(chunks);
  }

  private writePage(page: PdfPage): number {
    const content = this.addStream(
      { Filter: '/FlateDecode' },
      deflateSync(Buffer.from(page.ops.join('\n'), 'latin1')),
    );
    const fonts = [...page.fonts]
      .sort()
      .map((font) => `${fontResource(font)} ${this.fontRef(font)} 0 R`)
      .join(' ');
    const images = [...page.images].map(([resource, ref]) => `/${resource} ${ref} 0 R`).join(' ');
    const resources = [fonts ? `/Font << ${fonts} >>` : '', images ? `/XObject << ${images} >>` : ''].filter(
      Boolean,
    );
    return this.add(
      dictionary({
        Type: '/Page',
        Parent: `${PAGES} 0 R`,
        MediaBox: `[0 0 ${num(page.width)} ${num(page.height)}]`,
        Resources: `<< ${resources.join(' ')} >>`,
        Contents: `${content} 0 R`,
      }),
    );
  }

  private fontRef(font: StandardFont): number {
    let ref = this.fontRefs.get(font);
    if (ref === undefined) {
      ref = this.add(
        dictionary({ Type: '/Font', Subtype: '/Type1', BaseFont: `/${font}`, Encoding: '/WinAnsiEncoding' }),
      );
      this.fontRefs.set(font, ref);
    }
    return ref;
  }

  private add(body: string | Buffer): number {
    const ref = this.next++;
    this.objects.set(ref, typeof body === 'string' ? Buffer.from(body, 'latin1') : body);
    return ref;
  }

  private addStream(entries: Record<string, string | number>, stored: Uint8Array): number {
    return this.add(
      Buffer.concat([
        Buffer.from(`${dictionary({ ...entries, Length: stored.length })}\nstream\n`, 'latin1'),
        stored,
        Buffer.from('\nendstream', 'latin1'),
      ]),
    );
  }
}

function dictionary(entries: Record<string, string | number>): string {
  return `<<${Object.entries(entries)
    .map(([key, value]) => ` /${key} ${value}`)
    .join('')} >>`;
}

/** A JPEG's size and components, from its first start-of-frame marker. */
export function jpegSize(bytes: Uint8Array): { width: number; height: number; components: number } {
  if (bytes[0] !== 0xff || bytes[1] !== 0xd8) throw new Error('not a JPEG');
  let at = 2;
  while (at + 9 < bytes.length) {
    if (bytes[at] !== 0xff) throw new Error('damaged JPEG: no marker where one is due');
    const marker = bytes[at + 1]!;
    if (marker === 0xff) {
      at++;
      continue;
    }
    const length = (bytes[at + 2]! << 8) | bytes[at + 3]!;
    // SOF0-SOF15, except DHT (C4), JPG (C8) and DAC (CC).
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return {
        height: (bytes[at + 5]! << 8) | bytes[at + 6]!,
        width: (bytes[at + 7]! << 8) | bytes[at + 8]!,
        components: bytes[at + 9]!,
      };
    }
    at += 2 + length;
  }
  throw new Error('JPEG without a frame header');
}
