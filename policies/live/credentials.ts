import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';

/** Whether the live check can reach Cloud Storage, and how (or why not). */
export type CredentialStatus =
  | { readonly available: true; readonly how: string }
  | { readonly available: false; readonly why: string };

/**
 * Finds credentials the way Application Default Credentials would, without a network call (probing
 * the metadata server from a laptop or CI runner would stall every preview for seconds).
 */
export function detectCredentials(
  env: NodeJS.ProcessEnv,
  apiEndpoint: string | undefined,
  fileExists: (file: string) => boolean = existsSync,
): CredentialStatus {
  if (apiEndpoint) return { available: true, how: `custom endpoint ${apiEndpoint} (no authentication)` };
  if (env.STORAGE_EMULATOR_HOST) {
    return { available: true, how: `STORAGE_EMULATOR_HOST=${env.STORAGE_EMULATOR_HOST} (no authentication)` };
  }
  const keyFile = env.GOOGLE_APPLICATION_CREDENTIALS;
  if (keyFile) {
    return fileExists(keyFile)
      ? { available: true, how: `GOOGLE_APPLICATION_CREDENTIALS=${keyFile}` }
      : {
          available: false,
          why: `GOOGLE_APPLICATION_CREDENTIALS points to ${keyFile}, which does not exist`,
        };
  }
  const configDir =
    env.CLOUDSDK_CONFIG ??
    (process.platform === 'win32' && env.APPDATA
      ? path.join(env.APPDATA, 'gcloud')
      : path.join(env.HOME ?? homedir(), '.config', 'gcloud'));
  const adcFile = path.join(configDir, 'application_default_credentials.json');
  if (fileExists(adcFile)) return { available: true, how: `application default credentials in ${adcFile}` };
  if (env.K_SERVICE || env.CLOUD_BUILD_ID || env.GCE_METADATA_HOST) {
    return { available: true, how: 'the metadata server of the Google Cloud runtime' };
  }
  return {
    available: false,
    why: `no Google Cloud credentials: GOOGLE_APPLICATION_CREDENTIALS is unset and ${adcFile} does not exist (run \`gcloud auth application-default login\`, or authenticate the CI job with google-github-actions/auth)`,
  };
}
