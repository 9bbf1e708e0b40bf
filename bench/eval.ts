/**
 * `npm run eval [-- --folder DIR]`: scores analyzers on the visual layer of Factur-X PDFs against
 * the XML each one carries (bench/e-invoice-eval.ts). The offline analyzer always; Gemini too when
 * GEMINI_API_KEY is set (GEMINI_MODEL, GEMINI_BASE_URL as for the worker), so the production prompt
 * can be measured on one's own invoices. Default folder: the French FNFE-MPE examples,
 * ../shared/fixtures/e-invoices/factur-x-fr.
 *
 * Writes the `eval` section of bench/results.json (read, that one key replaced, written back: the
 * benchmark's sections stay as they are) and the figures of docs/e-invoices.md generated from it.
 * With the per-source scores, it also calibrates the fields' confidence (bench/calibration.ts):
 * thresholds chosen on the tuning corpora, written for the worker to
 * worker/src/contract/confidence-thresholds.json, and reported on the held-out corpus in
 * `eval.calibration` and docs/analysis.md.
 * It lives in bench/ because it is a measurement whose figures land in bench/results.json, like the
 * benchmark's, not a command of the running local pipeline.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseCommandArgs, runCommand } from '../local/lib/args';
import { TesseractOcr } from '../worker/src/adapters/analyzers/offline/ocr/tesseract-ocr';
import { OfflineAnalyzer } from '../worker/src/adapters/analyzers/offline-analyzer';
import { DELIVERY_DEFAULTS } from '../worker/src/contract/settings';
import type { Analyzer } from '../worker/src/core/ports';
import {
  CALIBRATION_FIGURES,
  type CalibrationSection,
  CONFIDENT_ACCURACY_GOAL,
  CONFIDENT_SHARE_GOAL,
  type ConfidencePoint,
  calibrationReport,
  chooseThresholds,
  renderCalibrationFigures,
  thresholdsFile,
} from './calibration';
import {
  EVAL_FIGURES,
  EVAL_GOAL,
  type EvalScores,
  type EvalSection,
  evaluate,
  percent as pct,
  pdfsIn,
  renderEvalFigures,
} from './e-invoice-eval';
import { mergeResults, readResults, rewrite } from './results-file';
import {
  evalCorpora,
  evaluateBySource,
  forResults,
  renderSourceFigures,
  SOURCE_FIGURES,
  SOURCES,
  type Source,
  scoreSource,
} from './source-eval';

const REPO_ROOT = path.join(__dirname, '..');
export const DEFAULT_EVAL_FOLDER = path.resolve(REPO_ROOT, '../shared/fixtures/e-invoices/factur-x-fr');
const USAGE = `usage: npm run eval -- [--folder DIR] [--sources ${SOURCES.join(',')}] [--points FILE]`;

export interface EvalRun {
  folder: string;
  /** bench/results.json, or another file (tests). */
  resultsFile: string;
  /** docs/e-invoices.md, or another file (tests); undefined: not written. */
  docFile?: string;
  /** Gemini, when configured; measured beside the offline analyzer. */
  gemini?: Analyzer;
  now?: Date;
  /** The sources scored per corpus (bench/source-eval.ts); none: that part is not run. */
  sources?: readonly Source[];
  /** docs/analysis.md, or another file (tests); undefined: not written. */
  analysisDocFile?: string;
  /** worker/src/contract/confidence-thresholds.json, or another file (tests); undefined: not written. */
  thresholdsFile?: string;
  /** Where to write every scored field's confidence point (`--points FILE`), for a look at the calibration. */
  pointsFile?: string;
  progress?: (line: string) => void;
}

/** The `eval` section, with the confidence calibration when the sources were scored. */
export type EvalRunSection = EvalSection & { calibration?: CalibrationSection };

/** Runs the evaluation and writes its section and figures; returns the section. */
export async function runEval(run: EvalRun): Promise<EvalRunSection> {
  const pdfs = pdfsIn(run.folder);
  if (pdfs.length === 0) throw new Error(`no PDF in ${run.folder}`);
  const offline = await evaluate(new OfflineAnalyzer(), pdfs, 'offline');
  const gemini: EvalScores | undefined = run.gemini ? await evaluate(run.gemini, pdfs, 'gemini') : undefined;
  const points: ConfidencePoint[] = [];
  const bySource = run.sources?.length ? await scoreSources(run.sources, points, run.progress) : undefined;
  if (run.gemini && run.sources?.includes('text-pdf')) await scoreGemini(run.gemini, points, run.progress);
  if (run.pointsFile) writeFileSync(run.pointsFile, `${JSON.stringify(points)}\n`);
  const chosen = chooseThresholds(points);
  const calibration = points.length > 0 ? calibrationReport(points, chosen) : undefined;
  const date = (run.now ?? new Date()).toISOString();
  const section: EvalRunSection = {
    date,
    folder: path.relative(REPO_ROOT, run.folder) || '.',
    goal: EVAL_GOAL,
    met: offline.accuracy >= EVAL_GOAL,
    ...offline,
    ...(gemini ? { gemini } : {}),
    ...(bySource ? { bySource: forResults(bySource) } : {}),
    ...(calibration ? { calibration } : {}),
  };
  const previous = readResults(run.resultsFile);
  mergeResults(run.resultsFile, { eval: section });
  if (run.docFile) {
    const usd = (previous.costModel as { gemini?: { usd?: number } } | undefined)?.gemini?.usd;
    rewrite(run.docFile, (text) => EVAL_FIGURES.replace(text, `${renderEvalFigures(section, usd)}\n`));
  }
  if (bySource && run.analysisDocFile) {
    let doc = SOURCE_FIGURES.replace(
      readFileSync(run.analysisDocFile, 'utf8'),
      `${renderSourceFigures(bySource, section.date)}\n`,
    );
    if (calibration)
      doc = CALIBRATION_FIGURES.replace(doc, `${renderCalibrationFigures(calibration, date)}\n`);
    writeFileSync(run.analysisDocFile, doc);
  }
  if (calibration && run.thresholdsFile) {
    const previous = JSON.parse(readFileSync(run.thresholdsFile, 'utf8'));
    writeFileSync(run.thresholdsFile, thresholdsFile(previous, chosen, date));
  }
  return section;
}

/** The offline analyzer as `npm start` runs it (OCR included), on every source and corpus. */
async function scoreSources(
  sources: readonly Source[],
  points: ConfidencePoint[],
  progress?: (line: string) => void,
) {
  // A page's time limit is the worker's guard, not what is measured here: on a busy machine OCR
  // of one page can pass 30 s, and the eval would stop on it.
  const analyzer = new OfflineAnalyzer({ ocr: new TesseractOcr({ pageTimeoutMs: 600_000 }) });
  try {
    return await evaluateBySource(analyzer, { sources, progress, points });
  } finally {
    await analyzer.close();
  }
}

/** Gemini on the text PDFs of the tuning and held-out corpora, for its confidence's calibration. */
async function scoreGemini(gemini: Analyzer, points: ConfidencePoint[], progress?: (line: string) => void) {
  const corpora = await evalCorpora();
  for (const corpus of ['tuning', 'heldOut'] as const) {
    const truths = corpora[corpus].filter((t) => t.pdf);
    const scores = await scoreSource(gemini, truths, 'text-pdf', { corpus, points });
    progress?.(
      `gemini    ${corpus.padEnd(8)} ${scores.correct}/${scores.fields} fields of ${scores.documents} documents`,
    );
  }
}

/**
 * Gemini as the worker would call it, when GEMINI_API_KEY is set; undefined otherwise. `fetch` is
 * the SDK's documented `httpOptions.fetch` (tests under jest hand it Node's own).
 */
export async function geminiFromEnvironment(
  env: NodeJS.ProcessEnv = process.env,
  fetch?: typeof globalThis.fetch,
): Promise<Analyzer | undefined> {
  const apiKey = env.GEMINI_API_KEY;
  if (!apiKey) return undefined;
  const { GeminiAnalyzer, createGeminiClient } = await import(
    '../worker/src/adapters/analyzers/gemini-analyzer.js'
  );
  const client = createGeminiClient({
    apiKey,
    baseUrl: env.GEMINI_BASE_URL,
    ...(fetch ? { httpOptions: { fetch } } : {}),
  });
  return new GeminiAnalyzer({ client, model: env.GEMINI_MODEL ?? DELIVERY_DEFAULTS.geminiModel });
}

async function main(): Promise<void> {
  const { values } = parseCommandArgs(
    process.argv.slice(2),
    { folder: { type: 'string' }, sources: { type: 'string' }, points: { type: 'string' } },
    USAGE,
  );
  const folder = path.resolve(values.folder ?? DEFAULT_EVAL_FOLDER);
  const sources = (values.sources?.split(',') ?? [...SOURCES]) as Source[];
  const unknown = sources.filter((s) => !SOURCES.includes(s));
  if (unknown.length > 0) throw new Error(`unknown source ${unknown.join(', ')}. ${USAGE}`);
  const section = await runEval({
    folder,
    resultsFile: path.join(__dirname, 'results.json'),
    docFile: path.join(REPO_ROOT, 'docs', 'e-invoices.md'),
    analysisDocFile: path.join(REPO_ROOT, 'docs', 'analysis.md'),
    thresholdsFile: path.join(REPO_ROOT, 'worker', 'src', 'contract', 'confidence-thresholds.json'),
    gemini: await geminiFromEnvironment(),
    ...(values.points ? { pointsFile: path.resolve(values.points) } : {}),
    sources,
    progress: (line) => console.log(line),
  });
  for (const scores of [section as EvalScores, ...(section.gemini ? [section.gemini] : [])]) {
    console.log(
      `${scores.analyzer.padEnd(8)} ${scores.correct}/${scores.fields} fields of ${scores.documents} documents ` +
        `(${(scores.accuracy * 100).toFixed(1)} %)`,
    );
    for (const miss of scores.misses) {
      console.log(
        `  miss  ${miss.document}  ${miss.field}: XML ${JSON.stringify(miss.stated)}, read ${JSON.stringify(miss.read)}`,
      );
    }
    for (const skip of scores.skipped) console.log(`  skip  ${skip.document}: ${skip.why}`);
  }
  if (!section.gemini) console.log('gemini   not measured (set GEMINI_API_KEY to measure it)');
  if (section.calibration) printCalibration(section.calibration);
  console.log(
    `goal ${(section.goal * 100).toFixed(0)} % for the offline analyzer: ${section.met ? 'met' : 'MISSED'}`,
  );
}

/** Per source: the share of fields marked confident and how often those are right, tuning and held-out. */
function printCalibration(calibration: CalibrationSection): void {
  console.log(
    `confidence (thresholds chosen on tuning; goal on held-out: ≥ ${pct(CONFIDENT_ACCURACY_GOAL)} right among ≥ ${pct(CONFIDENT_SHARE_GOAL)} marked confident)`,
  );
  for (const [source, roles] of Object.entries(calibration.bySource)) {
    for (const [role, s] of Object.entries(roles ?? {})) {
      console.log(
        `  ${source.padEnd(10)} ${role.padEnd(8)} ${s.confident}/${s.fields} fields confident (${pct(s.confidentShare)}), ` +
          `${s.confidentRight}/${s.confident} of them right (${pct(s.confidentAccuracy)}); ${s.documentsAllConfident}/${s.documents} documents with nothing doubted`,
      );
    }
    const met = calibration.met[source as keyof typeof calibration.met];
    if (met !== undefined) console.log(`  ${source.padEnd(10)} goal on held-out: ${met ? 'met' : 'MISSED'}`);
  }
}

if (require.main === module) runCommand('eval', main);
