import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { RejectionError } from '../../../../core/errors';
import { type GreyImage, toPgm } from '../../../pdf/grey-image';
import type { PlacedText } from '../../../pdf/pdf-text';
import { declaredImageSize } from './image-size';

/**
 * OCR for the offline analyzer: Tesseract (tesseract.js, WebAssembly) in a worker thread of its own,
 * so a page being read never blocks the event loop. The English and French trained data come from
 * npm packages (`@tesseract.js-data/eng`, `/fra`, LSTM "best_int" models) and are handed to it as
 * bytes: nothing is fetched and nothing is cached to disk at run time.
 */

/** What OCR read on one page: words placed as a PDF's text layer is, and Tesseract's mean confidence. */
export interface OcrPage {
  words: PlacedText[];
  /** 0-100, the mean of the words' confidences; 0 when no word was read. */
  confidence: number;
}

/** Reads the words of an image. */
export interface Ocr {
  /** The OCR path, as rows name it in `model`. */
  readonly name: string;
  /** An encoded image (PNG, JPEG, WebP) or decoded grey pixels (a PDF's scan). Throws RejectionError. */
  read(image: Uint8Array | GreyImage): Promise<OcrPage>;
  close(): Promise<void>;
}

export interface TesseractOcrOptions {
  /** One page may take this long; past it the worker is stopped and the document refused. */
  pageTimeoutMs?: number;
  /** Images larger than this (width x height) are refused before decoding. */
  maxImagePixels?: number;
  /** Neither side may exceed this (Tesseract's own image library refuses beyond 32,767). */
  maxImageSide?: number;
}

export const OCR_LIMITS: Readonly<Required<TesseractOcrOptions>> = Object.freeze({
  pageTimeoutMs: 30_000,
  // A 12 MP phone photo fits three times over; an A4 page at 600 dpi (35 MP) fits.
  maxImagePixels: 40_000_000,
  maxImageSide: 20_000,
});

const LANGUAGES = ['eng', 'fra'] as const;
type TesseractModule = typeof import('tesseract.js');
type TesseractWorker = Awaited<ReturnType<TesseractModule['createWorker']>>;

/**
 * One folder that holds every language's trained data, as tesseract.js's `langPath` must: links to
 * the files of the npm packages (gzip; tesseract.js inflates them). tesseract.js 7 cannot take the
 * bytes themselves for more than one language (it names the languages by their data when it
 * initialises them).
 */
function trainedDataFolder(): string {
  const folder = mkdtempSync(path.join(tmpdir(), 'docline-tessdata-'));
  for (const code of LANGUAGES) {
    const file = require.resolve(`@tesseract.js-data/${code}/4.0.0_best_int/${code}.traineddata.gz`);
    symlinkSync(file, path.join(folder, `${code}.traineddata.gz`));
  }
  return folder;
}

/** Tesseract through tesseract.js; one page at a time (one worker thread). */
export class TesseractOcr implements Ocr {
  readonly name = `tesseract:${LANGUAGES.join('+')}`;
  private readonly limits: Required<TesseractOcrOptions>;
  private worker: Promise<TesseractWorker> | undefined;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(options: TesseractOcrOptions = {}) {
    this.limits = { ...OCR_LIMITS, ...options };
  }

  async read(image: Uint8Array | GreyImage): Promise<OcrPage> {
    const size = 'grey' in image ? image : declaredImageSize(image);
    if (!size) throw new RejectionError('analysis_failed', 'the image header cannot be read: no size');
    this.checkSize(size.width, size.height);
    const input = 'grey' in image ? toPgm(image) : Buffer.from(image);
    const turn = this.queue.then(() => this.recognize(input));
    this.queue = turn.catch(() => undefined);
    return turn;
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    if (worker) await (await worker.catch(() => undefined))?.terminate();
  }

  private checkSize(width: number, height: number): void {
    const { maxImagePixels, maxImageSide } = this.limits;
    if (
      width < 1 ||
      height < 1 ||
      width > maxImageSide ||
      height > maxImageSide ||
      width * height > maxImagePixels
    ) {
      throw new RejectionError(
        'analysis_failed',
        `the image is ${width} x ${height} pixels, over the OCR limit of ${maxImagePixels} pixels (${maxImageSide} a side)`,
      );
    }
  }

  private start(): Promise<TesseractWorker> {
    this.worker ??= (async () => {
      const { createWorker, OEM } = await import('tesseract.js');
      const langPath = trainedDataFolder();
      try {
        const worker = await createWorker(LANGUAGES.join('+'), OEM.LSTM_ONLY, {
          langPath,
          cacheMethod: 'none',
          gzip: true,
          errorHandler: () => undefined,
        });
        // Tesseract's diagnostics ("Estimating resolution as 220") would land in the worker's
        // stdout, among the JSON log lines.
        await worker.setParameters({ debug_file: '/dev/null' });
        return worker;
      } finally {
        // Read once at start: the worker keeps the models in its own memory.
        rmSync(langPath, { recursive: true, force: true });
      }
    })();
    return this.worker;
  }

  private async recognize(image: Buffer): Promise<OcrPage> {
    const worker = await this.start();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        // A page that runs away takes its worker with it; the next page starts a fresh one.
        void this.close();
        reject(
          new RejectionError(
            'analysis_failed',
            `OCR of a page took over ${this.limits.pageTimeoutMs} ms and was stopped`,
          ),
        );
      }, this.limits.pageTimeoutMs);
    });
    try {
      const result = await Promise.race([
        worker.recognize(image, { rotateAuto: true }, { blocks: true, text: false }),
        timeout,
      ]);
      return pageOf(result.data);
    } catch (error) {
      if (error instanceof RejectionError) throw error;
      // tesseract.js rejects with a string when its image library cannot decode the bytes.
      throw new RejectionError('analysis_failed', `OCR cannot read the image (${String(error)})`, {
        cause: error,
      });
    } finally {
      clearTimeout(timer);
    }
  }
}

interface TesseractWord {
  text: string;
  confidence: number;
  bbox: { x0: number; y0: number; x1: number; y1: number };
}

interface TesseractPage {
  blocks:
    | { paragraphs: { lines: { words: TesseractWord[]; bbox: { y0: number; y1: number } }[] }[] }[]
    | null;
}

/**
 * Tesseract's words as a PDF's placed text: y grows upwards, a word's font size is its line's
 * height, so the PDF's line builder (columns joined by a tab) reads both the same way.
 */
function pageOf(data: TesseractPage): OcrPage {
  const words: PlacedText[] = [];
  let confidence = 0;
  for (const block of data.blocks ?? []) {
    for (const paragraph of block.paragraphs) {
      for (const line of paragraph.lines) {
        const height = Math.max(1, line.bbox.y1 - line.bbox.y0);
        for (const word of line.words) {
          if (word.text.trim() === '') continue;
          words.push({
            str: word.text,
            x: word.bbox.x0,
            y: -word.bbox.y1,
            width: word.bbox.x1 - word.bbox.x0,
            fontSize: height,
          });
          confidence += word.confidence;
        }
      }
    }
  }
  return { words, confidence: words.length > 0 ? confidence / words.length : 0 };
}
