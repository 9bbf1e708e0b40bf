import { deliveryOrder } from '../documents';

describe('deliveryOrder', () => {
  it('delivers every document once without redeliveries', () => {
    expect(deliveryOrder(4, 0, 0)).toEqual([0, 1, 2, 3]);
  });

  it('makes half the deliveries redeliveries, each at least `lag` positions after the first', () => {
    const order = deliveryOrder(100, 0.5, 8);
    expect(order).toHaveLength(200);
    for (let doc = 0; doc < 100; doc++) {
      const first = order.indexOf(doc);
      const second = order.indexOf(doc, first + 1);
      expect(second - first).toBeGreaterThanOrEqual(8);
      expect(order.indexOf(doc, second + 1)).toBe(-1);
    }
  });

  it('puts both deliveries side by side with no lag (the concurrent case)', () => {
    expect(deliveryOrder(3, 0.5, 0)).toEqual([0, 0, 1, 1, 2, 2]);
  });
});
