import { booleanText, ConfigValues, jsonStringList, oneOf, wholeNumber } from '../src/contract/config-values';

describe('ConfigValues', () => {
  const values = (raw: Record<string, string>) => new ConfigValues((name) => raw[name]);

  it('returns the default for an unset value, without checking it', () => {
    const v = values({});
    expect(v.read('PORT', wholeNumber(0, 65535), 8080, () => 'never')).toBe(8080);
    expect(v.problems).toEqual([]);
  });

  it('collects every problem and falls back to the default for each', () => {
    const v = values({ PORT: 'eighty', MODE: 'both' });
    expect(v.read('PORT', wholeNumber(0, 65535), 8080, (raw) => `PORT is wrong (got "${raw}").`)).toBe(8080);
    expect(
      v.read('MODE', oneOf(['object', 'message']), 'object', (raw) => `MODE is wrong (got "${raw}").`),
    ).toBe('object');
    expect(v.problems).toEqual(['PORT is wrong (got "eighty").', 'MODE is wrong (got "both").']);
  });
});

describe('the value schemas', () => {
  it('reads whole numbers in decimal digits only, inside the range and below 2^53', () => {
    const port = wholeNumber(0, 65535);
    expect(port.parse('8080')).toBe(8080);
    for (const bad of ['-1', '65536', '1e3', '0x10', '8080.0', ' 8080', ''])
      expect(port.safeParse(bad).success).toBe(false);
    expect(wholeNumber(1).safeParse('9007199254740993').success).toBe(false);
  });

  it('reads booleans and JSON lists of strings', () => {
    expect(booleanText.parse('false')).toBe(false);
    expect(booleanText.safeParse('yes').success).toBe(false);
    expect(jsonStringList.parse('["application/pdf"]')).toEqual(['application/pdf']);
    for (const bad of ['application/pdf', '[1]', '{}'])
      expect(jsonStringList.safeParse(bad).success).toBe(false);
  });
});
