/**
 * The Gemini models docline knows, with their release and retirement dates: the one table the
 * worker (its default model, the thinking setting it sends) and the stack (its preview refuses a
 * retired `docline:geminiModel` and warns before one retires) both read.
 *
 * Read on {@link MODEL_TABLE_READ_ON} from Google's model lifecycle page, {@link MODEL_TABLE_SOURCE}
 * (its `.md.txt` copy). Other pages disagree: older copies of the same page, the Gemini API's
 * deprecations page and third-party notices give other dates for the 2.5 models. Where they
 * disagree, the table keeps the earliest date (a model may stop answering on the earliest one any
 * page announced), and {@link KnownModel.otherDates} says what the others said. Google's page says
 * retirement timelines "may be extended, [but] won't be moved to an earlier date than what is
 * listed"; a date it gives as "or later" is the earliest the model may go ({@link KnownModel.orLater}).
 * API requests naming a retired model "typically return a 404" (same page): the worker's readiness
 * asks for the model once at start-up so that such a revision never becomes ready.
 */

/** Google's model lifecycle page (Vertex AI, now "Gemini Enterprise Agent Platform"). */
export const MODEL_TABLE_SOURCE =
  'https://docs.cloud.google.com/gemini-enterprise-agent-platform/models/model-versions';

/** When {@link KNOWN_MODELS} was read from {@link MODEL_TABLE_SOURCE}. */
export const MODEL_TABLE_READ_ON = '2026-12-03';

/** The Gemini API's deprecations page, the other Google page the table was checked against. */
export const GEMINI_API_DEPRECATIONS = 'https://ai.google.dev/gemini-api/docs/deprecations';

/**
 * How a model takes its thinking setting: `level` (`thinkingConfig.thinkingLevel`, Gemini 3.x) or
 * `budget` (`thinkingConfig.thinkingBudget`, Gemini 2.5). The worker sends the setting only for a
 * model it knows: an unknown one gets the model's own default.
 */
export type ThinkingControl = 'level' | 'budget';

export interface KnownModel {
  /** The model id, as `GEMINI_MODEL` / `docline:geminiModel` take it. */
  readonly id: string;
  /** Release date (YYYY-MM-DD). */
  readonly releasedOn: string;
  /** Retirement date (YYYY-MM-DD): the earliest any source gives. */
  readonly retiresOn: string;
  /** True when Google gives the date as "or later": the earliest the model may be retired. */
  readonly orLater: boolean;
  /** Google's replacement model ids, best first; empty when it names none. */
  readonly replacements: readonly string[];
  readonly thinking: ThinkingControl;
  /** Where the dates come from when not only {@link MODEL_TABLE_SOURCE}, and what others said. */
  readonly otherDates?: string;
}

const model = (m: KnownModel): KnownModel =>
  Object.freeze({ ...m, replacements: Object.freeze([...m.replacements]) });

/** The Gemini text models of Google's lifecycle table, newest first (read {@link MODEL_TABLE_READ_ON}). */
export const KNOWN_MODELS: readonly KnownModel[] = Object.freeze([
  model({
    id: 'gemini-3.8-flash',
    releasedOn: '2026-09-02',
    retiresOn: '2027-09-02',
    orLater: true,
    replacements: [],
    thinking: 'level',
    otherDates:
      'listed on the localised copies of the lifecycle page (?hl=hu, ?hl=it), not on its .md.txt copy; the Gemini API deprecations page: released September 2, 2026, no shutdown date announced',
  }),
  model({
    id: 'gemini-3.5-flash-lite',
    releasedOn: '2026-07-21',
    retiresOn: '2027-07-21',
    orLater: true,
    replacements: [],
    thinking: 'level',
  }),
  model({
    id: 'gemini-3.5-flash',
    releasedOn: '2026-05-19',
    retiresOn: '2027-05-19',
    orLater: true,
    replacements: [],
    thinking: 'level',
  }),
  model({
    id: 'gemini-3.1-flash-lite',
    releasedOn: '2026-05-07',
    retiresOn: '2027-05-07',
    orLater: true,
    replacements: [],
    thinking: 'level',
    otherDates: 'the Gemini API deprecations page: shutdown May 7, 2027',
  }),
  model({
    id: 'gemini-2.5-pro',
    releasedOn: '2025-06-17',
    retiresOn: '2026-06-17',
    orLater: false,
    replacements: ['gemini-3.5-flash'],
    thinking: 'budget',
    otherDates:
      'the lifecycle page: October 16, 2026 (older copies: October 20, 2026); the Gemini API deprecations page (an older copy): June 17, 2026',
  }),
  model({
    id: 'gemini-2.5-flash',
    releasedOn: '2025-06-17',
    retiresOn: '2026-06-17',
    orLater: false,
    replacements: ['gemini-3.5-flash-lite', 'gemini-3.1-flash-lite'],
    thinking: 'budget',
    otherDates:
      'the lifecycle page: October 16, 2026 (older copies: June 17, 2026 and October 20, 2026); the Gemini API: around December 1, 2026',
  }),
  model({
    id: 'gemini-2.5-flash-lite',
    releasedOn: '2025-07-22',
    retiresOn: '2026-10-16',
    orLater: false,
    replacements: ['gemini-3.1-flash-lite'],
    thinking: 'budget',
    otherDates: 'older copies of the lifecycle page: October 20, 2026',
  }),
]);

/** The model a stack and a worker use when none is set: served until at least July 21, 2027. */
export const DEFAULT_GEMINI_MODEL = 'gemini-3.5-flash-lite';

/** Days before a retirement date from which the stack's preview warns. */
export const RETIREMENT_WARNING_DAYS = 60;

/** The table's entry for `id`, or undefined for an id it does not know. */
export function knownModel(id: string): KnownModel | undefined {
  return KNOWN_MODELS.find((m) => m.id === id.trim());
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** Whole days from `today` (its UTC date) to a YYYY-MM-DD date; negative once the date is past. */
export function daysUntil(date: string, today: Date): number {
  const todayUtc = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate());
  return Math.round((Date.parse(`${date}T00:00:00Z`) - todayUtc) / DAY_MS);
}

/** What a configured model's lifecycle means for a run on `today`: errors refuse it, warnings do not. */
export interface ModelLifecycle {
  readonly errors: readonly string[];
  readonly warnings: readonly string[];
}

/**
 * Checks `id` against {@link KNOWN_MODELS} on `today`. A model past a firm retirement date is an
 * error (every document would be answered 503 until it dead-letters); one that retires within
 * {@link RETIREMENT_WARNING_DAYS}, or whose "or later" date has come, is a warning; an id the table
 * does not know is a warning saying so. `setting` names the knob in the messages.
 */
export function modelLifecycle(id: string, today: Date, setting = 'docline:geminiModel'): ModelLifecycle {
  const known = knownModel(id);
  const source = `Google's model lifecycle page (${MODEL_TABLE_SOURCE}, read ${MODEL_TABLE_READ_ON})`;
  if (!known) {
    return {
      errors: [],
      warnings: [
        `${setting} (${id}) is not in docline's table of known models (worker/src/contract/models.ts, from ${source}): ` +
          `its retirement date cannot be checked. Check it there, or use ${DEFAULT_GEMINI_MODEL}.`,
      ],
    };
  }
  const days = daysUntil(known.retiresOn, today);
  const instead =
    known.replacements.length > 0
      ? `Set ${setting} to ${known.replacements.join(' or ')} (Google's replacement)`
      : known.id === DEFAULT_GEMINI_MODEL
        ? `Google names no replacement yet: pick the newest model on its page, set ${setting} to it and move docline's default (worker/src/contract/models.ts)`
        : `Set ${setting} to ${DEFAULT_GEMINI_MODEL}`;
  const dates = known.otherDates ? ` (earliest of the dates Google's pages give: ${known.otherDates})` : '';
  if (days <= 0 && !known.orLater) {
    return {
      errors: [
        `${setting} (${known.id}) was retired on ${known.retiresOn}${dates}, per ${source}: Gemini answers a retired model 404, ` +
          `so every document would be answered 503 until it dead-letters. ${instead}.`,
      ],
      warnings: [],
    };
  }
  if (days <= 0) {
    return {
      errors: [],
      warnings: [
        `${setting} (${known.id}) may be retired at any time now: Google gave ${known.retiresOn} "or later", per ${source}. ` +
          `Check the page and plan the move (docs/deploy.md, "Moving to a new model").`,
      ],
    };
  }
  if (days <= RETIREMENT_WARNING_DAYS) {
    return {
      errors: [],
      warnings: [
        `${setting} (${known.id}) retires on ${known.retiresOn}${known.orLater ? ' or later' : ''}, in ${days} days${dates}, per ${source}. ` +
          `${instead} before then (docs/deploy.md, "Moving to a new model").`,
      ],
    };
  }
  return { errors: [], warnings: [] };
}
