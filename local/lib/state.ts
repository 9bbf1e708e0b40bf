import { readFile } from 'node:fs/promises';
import { dataDirLayout } from '../../worker/src/contract/data-dir';
import type { PipelineState } from './pipeline';

/** Reads the state `npm start` left for its companions, with a clear message when it is not running. */
export async function readState(dataDir = process.env.DOCLINE_DATA_DIR): Promise<PipelineState> {
  const file = dataDirLayout(dataDir).pipelineState;
  let state: PipelineState;
  try {
    state = JSON.parse(await readFile(file, 'utf8'));
  } catch {
    throw new Error(`no running pipeline found (${file} is missing): start one with \`npm start\` first.`);
  }
  try {
    await fetch(`${state.emulatorBaseUrl}/`, { signal: AbortSignal.timeout(2_000) });
  } catch {
    throw new Error(
      `the pipeline in ${state.dataDir} is not running (no emulator at ${state.emulatorBaseUrl}): start it with \`npm start\`.`,
    );
  }
  return state;
}
