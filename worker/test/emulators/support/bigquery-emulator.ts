import { freePort } from '../../../../local/lib/emulator';
import { startToolProcess } from './tool-process';

/**
 * bigquery-emulator (github.com/goccy/bigquery-emulator), an independent implementation of the
 * BigQuery REST API whose SQL engine runs GoogleSQL, started in memory on loopback ports (REST,
 * and gRPC for the Storage API, which docline's tests do not use).
 */

export interface BigQueryEmulator {
  /** `http://127.0.0.1:PORT`: the `apiEndpoint` of @google-cloud/bigquery. */
  readonly url: string;
  stop(): Promise<void>;
}

/**
 * Starts bigquery-emulator for one project and resolves once its REST surface answers.
 * @param projectId must pass docline's table-id check (6–30 characters, lower case).
 */
export async function startBigQueryEmulator(projectId: string): Promise<BigQueryEmulator> {
  const [port, grpcPort] = [await freePort(), await freePort()];
  const url = `http://127.0.0.1:${port}`;
  const tool = await startToolProcess({
    name: 'bigquery-emulator',
    args: [
      `--project=${projectId}`,
      '--host=127.0.0.1',
      `--port=${port}`,
      `--grpc-port=${grpcPort}`,
      '--log-level=error',
    ],
    ready: async () =>
      (
        await fetch(`${url}/bigquery/v2/projects/${projectId}/datasets`, {
          signal: AbortSignal.timeout(1_000),
        })
      ).ok,
  });
  return { url, stop: () => tool.stop() };
}
