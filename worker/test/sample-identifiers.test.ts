import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { reviewReasons, sirenValid, siretValid, vatIdValid } from '../src/core/review';

/*
 * The samples are what people try docline on first: an identifier that fails its check digit there
 * puts a `check_digit` reason on every sample row and teaches them to ignore it. Every SIREN, SIRET
 * and French VAT id that a sample states (samples/expected.json, written by samples/generate.ts with
 * the invoices) must pass its check, and name the same company.
 */

const EXPECTED = join(__dirname, '..', '..', 'samples', 'expected.json');
type Ids = { supplier_siren: string | null; supplier_siret: string | null; supplier_vat_id: string | null };
const samples = Object.entries(JSON.parse(readFileSync(EXPECTED, 'utf8')) as Record<string, Ids>);
const french = samples.filter(([, a]) => a.supplier_siren !== null || a.supplier_siret !== null);

describe('the samples’ identifiers', () => {
  it('include French companies with a SIREN, a SIRET and a French VAT id (so the checks below check something)', () => {
    expect(french.length).toBeGreaterThanOrEqual(6);
    expect(french.filter(([, a]) => a.supplier_siret !== null).length).toBeGreaterThanOrEqual(4);
    expect(french.filter(([, a]) => a.supplier_vat_id?.startsWith('FR')).length).toBeGreaterThanOrEqual(4);
  });

  it.each(samples)('%s: every SIREN, SIRET and VAT id passes its check and names one company', (_file, a) => {
    if (a.supplier_siren !== null)
      expect([a.supplier_siren, sirenValid(a.supplier_siren)]).toEqual([a.supplier_siren, true]);
    if (a.supplier_siret !== null) {
      expect([a.supplier_siret, siretValid(a.supplier_siret)]).toEqual([a.supplier_siret, true]);
      expect(a.supplier_siret.slice(0, 9)).toBe(a.supplier_siren);
    }
    if (a.supplier_vat_id !== null) {
      expect([a.supplier_vat_id, vatIdValid(a.supplier_vat_id)]).toEqual([a.supplier_vat_id, true]);
      if (a.supplier_vat_id.startsWith('FR')) expect(a.supplier_vat_id.slice(4)).toBe(a.supplier_siren);
    }
    // The verdict a sample's row gets says nothing about its check digits.
    const reasons = reviewReasons(a as unknown as Parameters<typeof reviewReasons>[0], {});
    expect(reasons.filter((r) => r.startsWith('check_digit:'))).toEqual([]);
  });
});
