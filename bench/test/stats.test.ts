import { median, percentile, ratio, summarize } from '../stats';

describe('percentile', () => {
  it('takes the nearest rank', () => {
    const values = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
    expect(percentile(values, 50)).toBe(5);
    expect(percentile(values, 99)).toBe(10);
    expect(percentile(values, 10)).toBe(1);
    expect(percentile([42], 99)).toBe(42);
  });

  it('answers NaN for no values, so an empty run never looks fast', () => {
    expect(percentile([], 50)).toBeNaN();
    expect(summarize([], 1000).p99Ms).toBeNaN();
  });
});

describe('summarize', () => {
  it('computes the rate over the elapsed wall time', () => {
    expect(summarize([1, 2, 3, 4], 2000)).toEqual({
      count: 4,
      elapsedMs: 2000,
      perSecond: 2,
      p50Ms: 2,
      p99Ms: 4,
    });
  });
});

describe('median and ratio', () => {
  it('averages the two middle values of an even count', () => {
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([3, 1, 2])).toBe(2);
  });

  it('refuses to divide by a rate that is not positive', () => {
    expect(ratio(5, 0)).toBeNaN();
    expect(ratio(3, 4)).toBe(0.75);
  });
});
