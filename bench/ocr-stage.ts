/**
 * The OCR stage: CPU spent per page by the offline analyzer's OCR (Tesseract in its worker thread),
 * on the sample scan (an image-only PDF, 200 dpi) and the sample phone photo (a JPEG, 150 dpi).
 * CPU is the process's own (user + system, every thread, the OCR worker's included), measured around
 * each page after one warm-up page (loading the trained data is paid once per worker, not per page).
 * Goal: at most 3 s of CPU per page on the machine that runs it. Merges the `ocr` section into the
 * results file, the other sections as they were.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { TesseractOcr } from '../worker/src/adapters/analyzers/offline/ocr/tesseract-ocr';
import { OfflineAnalyzer } from '../worker/src/adapters/analyzers/offline-analyzer';
import { mergeResults } from './results-file';

export const OCR_CPU_GOAL_MS = 3_000;

export interface OcrStageResult {
  pages: number;
  /** CPU per page, in ms, per page read. */
  cpuMsPerPage: number[];
  medianCpuMs: number;
  maxCpuMs: number;
  medianWallMs: number;
  goalCpuMs: number;
  met: boolean;
}

const SAMPLES = path.join(__dirname, '..', 'samples', 'other');
const PAGES = [
  { file: 'scan-invoice-design.pdf', contentType: 'application/pdf' },
  { file: 'photo-facture-conseil.jpg', contentType: 'image/jpeg' },
];

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

/** Reads each sample page `rounds` times; returns the figures. */
export async function measureOcr(rounds: number): Promise<OcrStageResult> {
  const analyzer = new OfflineAnalyzer({ ocr: new TesseractOcr() });
  try {
    const pages = PAGES.map((p) => ({ ...p, bytes: readFileSync(path.join(SAMPLES, p.file)) }));
    await analyzer.analyze({ ...pages[0]!, name: 'warm-up' });
    const cpu: number[] = [];
    const wall: number[] = [];
    for (let round = 0; round < rounds; round++) {
      for (const page of pages) {
        const cpuBefore = process.cpuUsage();
        const wallBefore = performance.now();
        await analyzer.analyze({ bytes: page.bytes, contentType: page.contentType, name: page.file });
        const spent = process.cpuUsage(cpuBefore);
        cpu.push((spent.user + spent.system) / 1000);
        wall.push(performance.now() - wallBefore);
      }
    }
    const medianCpuMs = median(cpu);
    return {
      pages: cpu.length,
      cpuMsPerPage: cpu.map((ms) => Math.round(ms)),
      medianCpuMs: Math.round(medianCpuMs),
      maxCpuMs: Math.round(Math.max(...cpu)),
      medianWallMs: Math.round(median(wall)),
      goalCpuMs: OCR_CPU_GOAL_MS,
      met: Math.max(...cpu) <= OCR_CPU_GOAL_MS,
    };
  } finally {
    await analyzer.close();
  }
}

/** The stage's one line in the benchmark's output. */
export function ocrLine(result: OcrStageResult): string {
  return (
    `ocr: ${(result.medianCpuMs / 1000).toFixed(2)} s CPU per page (median of ${result.pages}, ` +
    `max ${(result.maxCpuMs / 1000).toFixed(2)} s, ${(result.medianWallMs / 1000).toFixed(2)} s wall), ` +
    `goal ≤ ${result.goalCpuMs / 1000} s: ${result.met ? 'met' : 'MISSED'}`
  );
}

/** Measures, merges `ocr` into `file`, and returns the line to print. */
export async function runOcrStage(options: { file: string; quick: boolean }): Promise<string> {
  const result = await measureOcr(options.quick ? 1 : 3);
  mergeResults(options.file, { ocr: result });
  return ocrLine(result);
}
