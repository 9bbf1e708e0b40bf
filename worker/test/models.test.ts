import { GEMINI_PRICES, PRICED_GEMINI_MODEL, PRICES } from '../src/contract/cost-model';
import {
  DEFAULT_GEMINI_MODEL,
  daysUntil,
  KNOWN_MODELS,
  knownModel,
  MODEL_TABLE_READ_ON,
  modelLifecycle,
  RETIREMENT_WARNING_DAYS,
} from '../src/contract/models';
import { DELIVERY_DEFAULTS } from '../src/contract/settings';

const on = (date: string) => new Date(`${date}T12:00:00Z`);

describe('the table of known Gemini models (contract/models.ts)', () => {
  it('has well-formed, unique entries whose replacements are themselves in the table', () => {
    const ids = KNOWN_MODELS.map((m) => m.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const m of KNOWN_MODELS) {
      expect([m.id, m.releasedOn, m.retiresOn].join(' ')).toMatch(
        /^gemini-[\w.-]+ \d{4}-\d{2}-\d{2} \d{4}-\d{2}-\d{2}$/,
      );
      expect(Date.parse(m.retiresOn)).toBeGreaterThan(Date.parse(m.releasedOn));
      for (const r of m.replacements) expect(ids).toContain(r);
    }
  });

  it('serves the default model: in the table, neither retired nor retiring within 60 days of the day it was read', () => {
    expect(DELIVERY_DEFAULTS.geminiModel).toBe(DEFAULT_GEMINI_MODEL);
    expect(knownModel(DEFAULT_GEMINI_MODEL)).toBeDefined();
    expect(modelLifecycle(DEFAULT_GEMINI_MODEL, on(MODEL_TABLE_READ_ON))).toEqual({
      errors: [],
      warnings: [],
    });
  });

  it('serves the default model today, and for 60 days more (fails when the default must move)', () => {
    // Deliberately on the real date: when this fails, the default is about to retire; pick its replacement.
    expect(modelLifecycle(DEFAULT_GEMINI_MODEL, new Date())).toEqual({ errors: [], warnings: [] });
  });

  it('prices the default model, and the cost model uses that price', () => {
    expect(PRICED_GEMINI_MODEL).toBe(DELIVERY_DEFAULTS.geminiModel);
    const price = GEMINI_PRICES[DELIVERY_DEFAULTS.geminiModel];
    expect(price).toBeDefined();
    expect(PRICES.geminiInputUsdPerMillionTokens).toBe(price!.inputUsdPerMillionTokens);
    expect(PRICES.geminiOutputUsdPerMillionTokens).toBe(price!.outputUsdPerMillionTokens);
  });
});

describe('modelLifecycle', () => {
  it('refuses a model past its retirement date, naming the setting, the date and the replacement', () => {
    const { errors, warnings } = modelLifecycle('gemini-2.5-flash', on('2026-12-03'));
    expect(warnings).toEqual([]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^docline:geminiModel \(gemini-2\.5-flash\) was retired on 2026-06-17/);
    expect(errors[0]).toContain('Set docline:geminiModel to gemini-3.5-flash-lite or gemini-3.1-flash-lite');
    expect(errors[0]).toContain('model-versions');
  });

  it('refuses it on its retirement day, and not the day before', () => {
    expect(modelLifecycle('gemini-2.5-flash-lite', on('2026-10-16')).errors).toHaveLength(1);
    const before = modelLifecycle('gemini-2.5-flash-lite', on('2026-10-15'));
    expect(before.errors).toEqual([]);
    expect(before.warnings[0]).toMatch(/retires on 2026-10-16, in 1 days/);
  });

  it.each([
    ['2027-05-21', 61, false],
    ['2027-05-22', 60, true],
    ['2027-07-20', 1, true],
  ])('on %s (%i days before 2027-07-21), warns: %p', (today, days, warns) => {
    expect(daysUntil('2027-07-21', on(today))).toBe(days);
    const { errors, warnings } = modelLifecycle('gemini-3.5-flash-lite', on(today));
    expect(errors).toEqual([]);
    expect(warnings.length > 0).toBe(warns);
    if (warns) expect(warnings[0]).toMatch(`retires on 2027-07-21 or later, in ${days} days`);
    expect(days <= RETIREMENT_WARNING_DAYS).toBe(warns);
  });

  it('only warns once an "or later" date has come: Google may still serve the model', () => {
    const { errors, warnings } = modelLifecycle('gemini-3.5-flash', on('2027-06-01'));
    expect(errors).toEqual([]);
    expect(warnings[0]).toMatch(/may be retired at any time now: Google gave 2027-05-19 "or later"/);
  });

  it('warns that an id the table does not know cannot be checked, and names the setting it was given', () => {
    const { errors, warnings } = modelLifecycle('gemini-9-ultra', on('2026-12-03'), 'GEMINI_MODEL');
    expect(errors).toEqual([]);
    expect(warnings[0]).toMatch(/^GEMINI_MODEL \(gemini-9-ultra\) is not in docline's table of known models/);
  });
});
