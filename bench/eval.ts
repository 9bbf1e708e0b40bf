/**
 * `npm run eval [-- --folder DIR]`: scores analyzers on the visual layer of Factur-X PDFs against
 * the XML each one carries (bench/e-invoice-eval.ts). The offline analyzer always; Gemini too when
 * GEMINI_API_KEY is set (GEMINI_MODEL, GEMINI_BASE_URL as for the worker), so the production prompt
 * can be measured on one's own invoices. Default folder: the French FNFE-MPE examples,
 * ../shared/fixtures/e-invoices/factur-x-fr.
 *
 * Writes the `eval` section of bench/results.json (read, that one key replaced, written back: the
 * benchmark's sections stay as they are) and the figures of docs/e-invoices.md generated from it.
 * It lives in bench/ because it is a measurement whose figures land in bench/results.json, like the
 * benchmark's, not a command of the running local pipeline.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseCommandArgs, runCommand } from '../local/lib/args';
import { TesseractOcr } from '../worker/src/adapters/analyzers/offline/ocr/tesseract-ocr';
import { OfflineAnalyzer } from '../worker/src/adapters/analyzers/offline-analyzer';
import { DELIVERY_DEFAULTS } from '../worker/src/contract/settings';
import type { Analyzer } from '../worker/src/core/ports';
import {
  EVAL_GOAL,
  type EvalScores,
  type EvalSection,
  evaluate,
  pdfsIn,
  renderEvalFigures,
  replaceEvalFigures,
} from './e-invoice-eval';
import {
  evaluateBySource,
  forResults,
  renderSourceFigures,
  replaceSourceFigures,
  SOURCES,
  type Source,
} from './source-eval';

const REPO_ROOT = path.join(__dirname, '..');
export const DEFAULT_EVAL_FOLDER = path.resolve(
  REPO_ROOT,
  '..',
  'shared',
  'fixtures',
  'e-invoices',
  'factur-x-fr',
);
const USAGE = `usage: npm run eval -- [--folder DIR] [--sources ${SOURCES.join(',')}]`;

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
  progress?: (line: string) => void;
}

/** Runs the evaluation and writes its section and figures; returns the section. */
export async function runEval(run: EvalRun): Promise<EvalSection> {
  const pdfs = pdfsIn(run.folder);
  if (pdfs.length === 0) throw new Error(`no PDF in ${run.folder}`);
  const offline = await evaluate(new OfflineAnalyzer(), pdfs, 'offline');
  const gemini: EvalScores | undefined = run.gemini ? await evaluate(run.gemini, pdfs, 'gemini') : undefined;
  const bySource = run.sources?.length ? await scoreSources(run.sources, run.progress) : undefined;
  const section: EvalSection = {
    date: (run.now ?? new Date()).toISOString(),
    folder: path.relative(REPO_ROOT, run.folder) || '.',
    goal: EVAL_GOAL,
    met: offline.accuracy >= EVAL_GOAL,
    ...offline,
    ...(gemini ? { gemini } : {}),
    ...(bySource ? { bySource: forResults(bySource) } : {}),
  };
  const previous = existsSync(run.resultsFile)
    ? (JSON.parse(readFileSync(run.resultsFile, 'utf8')) as Record<string, unknown>)
    : {};
  writeFileSync(run.resultsFile, `${JSON.stringify({ ...previous, eval: section }, null, 2)}\n`);
  if (run.docFile) {
    const usd = (previous.costModel as { gemini?: { usd?: number } } | undefined)?.gemini?.usd;
    writeFileSync(
      run.docFile,
      replaceEvalFigures(readFileSync(run.docFile, 'utf8'), renderEvalFigures(section, usd)),
    );
  }
  if (bySource && run.analysisDocFile) {
    writeFileSync(
      run.analysisDocFile,
      replaceSourceFigures(
        readFileSync(run.analysisDocFile, 'utf8'),
        renderSourceFigures(bySource, section.date),
      ),
    );
  }
  return section;
}

/** The offline analyzer as `npm start` runs it (OCR included), on every source and corpus. */
async function scoreSources(sources: readonly Source[], progress?: (line: string) => void) {
  const analyzer = new OfflineAnalyzer({ ocr: new TesseractOcr() });
  try {
    return await evaluateBySource(analyzer, { sources, progress });
  } finally {
    await analyzer.close();
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
    { folder: { type: 'string' }, sources: { type: 'string' } },
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
    gemini: await geminiFromEnvironment(),
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
  console.log(
    `goal ${(section.goal * 100).toFixed(0)} % for the offline analyzer: ${section.met ? 'met' : 'MISSED'}`,
  );
}

if (require.main === module) runCommand('eval', main);
