import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { OfflineAnalyzer } from '../src/adapters/analyzers/offline-analyzer';
import type { Analysis } from '../src/contract/analysis';
import { checkContent, declaredCharset, decodeText } from '../src/core/document-checks';
import { analyzedContentType } from '../src/core/handle';
import type { AnalyzerInput } from '../src/core/ports';
import { deliverer, handlerDeps } from './support/handler';

const SAMPLES = join(__dirname, '..', '..', 'samples');
const expected = JSON.parse(readFileSync(join(SAMPLES, 'expected.json'), 'utf8')) as Record<string, Analysis>;

// Windows-1252's bytes 0x80-0x9F that French and English invoices use (the euro, 0x80, is below); the
// rest of its printable range is Latin-1, byte for byte.
const CP1252_EXTRAS: Record<string, number> = {
  '’': 0x92,
  '“': 0x93,
  '”': 0x94,
  '–': 0x96,
  '—': 0x97,
};

/** Encodes text as a legacy accounting export would: one byte a character. */
function encodeLegacy(text: string, charset: 'windows-1252' | 'iso-8859-15'): Buffer {
  return Buffer.from(
    [...text].map((char) => {
      if (char === '€') return charset === 'windows-1252' ? 0x80 : 0xa4;
      const extra = CP1252_EXTRAS[char];
      if (extra !== undefined && charset === 'windows-1252') return extra;
      const code = char.codePointAt(0)!;
      if (code > 0xff || (code >= 0x80 && code < 0xa0)) throw new Error(`${char} has no byte in ${charset}`);
      return code;
    }),
  );
}

const limits = { maxObjectBytes: 1_000_000, allowedContentTypes: ['text/plain'] };
const file = 'invoices/fr-05-facture-transport.txt';
const utf8 = readFileSync(join(SAMPLES, file), 'utf8');
const analyzer = new OfflineAnalyzer();

describe('text/plain invoices in legacy charsets', () => {
  it.each([
    ['windows-1252', 'text/plain'],
    ['windows-1252', 'text/plain; charset=windows-1252'],
    ['iso-8859-15', 'text/plain'],
    ['iso-8859-15', 'text/plain; charset=ISO-8859-15'],
  ] as const)('reads every field of a %s invoice declared %s', async (charset, contentType) => {
    const bytes = encodeLegacy(utf8, charset);
    expect(() => new TextDecoder('utf-8', { fatal: true }).decode(bytes)).toThrow();
    expect(() => checkContent('text/plain', bytes, limits)).not.toThrow();
    const { analysis } = await analyzer.analyze({ bytes, contentType, name: file });
    expect(analysis).toEqual(expected[file]);
  });

  it('decodes by the declared charset before detecting one', () => {
    // 0xA4 beside a digit: detection says ISO-8859-15's euro, the declaration says Latin-1's ¤.
    const bytes = Buffer.from([0x31, 0x30, 0x20, 0xa4]);
    expect(decodeText(bytes)).toEqual({ text: '10 €', charset: 'iso-8859-15' });
    expect(decodeText(bytes, 'text/plain; charset=iso-8859-1')).toEqual({
      text: '10 ¤',
      charset: 'windows-1252',
    });
  });

  it('detects Windows-1252 by its bytes 0x80-0x9F, and keeps valid UTF-8 as UTF-8', () => {
    expect(decodeText(Buffer.from([0x80, 0x20, 0x31, 0x32]))?.text).toBe('€ 12');
    expect(decodeText(Buffer.from('12,00 € – réglé', 'utf8'))).toEqual({
      text: '12,00 € – réglé',
      charset: 'utf-8',
    });
  });

  it('falls back to detection when the declared charset does not decode the bytes', () => {
    expect(decodeText(Buffer.from([0x80, 0x31]), 'text/plain; charset=utf-8')?.charset).toBe('windows-1252');
  });

  it('reads the charset parameter in any case and quoting, and ignores those it does not know', () => {
    expect(declaredCharset('text/plain; Charset="Windows-1252"')).toBe('windows-1252');
    expect(declaredCharset('text/plain;charset=latin1')).toBe('windows-1252');
    expect(declaredCharset('text/plain; charset=koi8-r')).toBeUndefined();
    expect(declaredCharset('text/plain')).toBeUndefined();
  });

  it('still refuses binary bytes in every charset', () => {
    for (const bytes of [Buffer.from([0x46, 0x00, 0x41]), Buffer.from([0x46, 0x01, 0xe9, 0x41])]) {
      expect(decodeText(bytes)).toBeUndefined();
      expect(() => checkContent('text/plain', bytes, limits)).toThrow(
        expect.objectContaining({ code: 'content_mismatch' }),
      );
    }
  });
});

describe('a text/plain upload through the handler', () => {
  const windows1252 = encodeLegacy(utf8, 'windows-1252');

  /** Runs one upload of `bytes` declared `contentType` through handle with the offline analyzer. */
  async function deliver(bytes: Buffer, contentType: string) {
    const offline = new OfflineAnalyzer();
    const given: string[] = [];
    const analyzer = {
      analyze: (input: AnalyzerInput) => {
        given.push(input.contentType);
        return offline.analyze(input);
      },
    };
    const built = handlerDeps({ analyzer });
    built.deps.limits = { ...built.deps.limits, maxObjectBytes: 100_000 };
    const { row } = await deliverer(built)(bytes, { contentType });
    return { status: row?.status, analysis: row?.analysis as Analysis, given };
  }

  it('hands the analyzer the charset the upload declares, and reads every field of the invoice', async () => {
    const read = await deliver(windows1252, 'text/plain; charset=Windows-1252');
    expect(read.given).toEqual(['text/plain; charset=windows-1252']);
    expect(read).toMatchObject({ status: 'ok', analysis: expected[file] });
  });

  it.each([
    ['declared wrongly', 'text/plain; charset=utf-8'],
    ['declared in a charset docline does not know', 'text/plain; charset=koi8-r'],
    ['not declared', 'text/plain'],
  ])('reads every field of a Windows-1252 invoice %s, by detection', async (_, contentType) => {
    const read = await deliver(windows1252, contentType);
    expect(read.given).toEqual([contentType === 'text/plain; charset=utf-8' ? contentType : 'text/plain']);
    expect(read).toMatchObject({ status: 'ok', analysis: expected[file] });
  });

  it("decodes by the declaration before detection: 0xA4 is Windows-1252's ¤ when so declared", async () => {
    // Detection reads 0xA4 beside digits as ISO-8859-15's euro; a Windows-1252 declaration says ¤.
    const bytes = Buffer.from('Facture n° F-2026-0042\nTotal TTC : 1 234,56 \xa4\n', 'latin1');
    const detected = await deliver(bytes, 'text/plain');
    const declared = await deliver(bytes, 'text/plain; charset=windows-1252');
    expect(detected.analysis).toMatchObject({ currency: 'EUR', total_amount: 1234.56 });
    expect(declared.analysis.currency).not.toBe('EUR');
  });

  it('passes a charset to no other type than text', () => {
    expect(analyzedContentType('application/pdf', 'application/pdf; charset=windows-1252')).toBe(
      'application/pdf',
    );
    expect(analyzedContentType('text/plain', 'text/plain; charset="ISO-8859-15"')).toBe(
      'text/plain; charset=iso-8859-15',
    );
  });
});
