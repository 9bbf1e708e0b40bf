import { generateKeyPairSync, type KeyObject, sign } from 'node:crypto';

/**
 * Push tokens signed with a local RSA key, shaped like the OIDC tokens Pub/Sub attaches to push
 * requests (RS256, `kid` header, Google issuer, the push service account's email). The public key
 * (SPKI PEM, which google-auth-library's verifier accepts in place of a certificate) is injected
 * into the verifier; no network, no Google certificates.
 */

export const PUSH_AUDIENCE = 'https://docline-worker-abc123-ew.a.run.app/push';
export const PUSH_SERVICE_ACCOUNT = 'docline-push@acme-dev.iam.gserviceaccount.com';

export interface TestSigner {
  kid: string;
  /** SPKI PEM of the public key, for the verifier's certificates. */
  publicPem: string;
  /** A compact JWS of the claims; `header` overrides the protected header. */
  sign(claims: Record<string, unknown>, header?: Record<string, unknown>): string;
}

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

export function createSigner(kid: string): TestSigner {
  const { privateKey, publicKey }: { privateKey: KeyObject; publicKey: KeyObject } = generateKeyPairSync(
    'rsa',
    { modulusLength: 2048 },
  );
  return {
    kid,
    publicPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    sign(claims, header = {}) {
      const input = `${b64url({ alg: 'RS256', typ: 'JWT', kid, ...header })}.${b64url(claims)}`;
      return `${input}.${sign('sha256', Buffer.from(input), privateKey).toString('base64url')}`;
    },
  };
}

/** The claims of a valid push token at `nowSeconds`; override what the case is about. */
export function pushClaims(
  nowSeconds: number,
  overrides: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    iss: 'https://accounts.google.com',
    aud: PUSH_AUDIENCE,
    azp: '112233445566778899000',
    sub: '112233445566778899000',
    email: PUSH_SERVICE_ACCOUNT,
    email_verified: true,
    iat: nowSeconds,
    exp: nowSeconds + 3600,
    ...overrides,
  };
}

/** The refused-token cases shared by the unit test and the process-level test. */
export function refusedTokens(
  trusted: TestSigner,
  stranger: TestSigner,
  impostor: TestSigner,
  nowSeconds: number,
): Array<{ case: string; authorization: string | undefined; http: 401 | 403 }> {
  const valid = (o: Record<string, unknown> = {}) => trusted.sign(pushClaims(nowSeconds, o));
  const forbidden = (name: string, token: string) => ({
    case: name,
    authorization: `Bearer ${token}`,
    http: 403 as const,
  });
  return [
    { case: 'no Authorization header', authorization: undefined, http: 401 },
    {
      case: 'not a Bearer scheme',
      authorization: `Basic ${Buffer.from('u:p').toString('base64')}`,
      http: 401,
    },
    { case: 'empty Bearer token', authorization: 'Bearer ', http: 401 },
    forbidden('not a JWT', 'not-a-jwt-at-all'),
    forbidden('wrong audience', valid({ aud: 'https://evil.example/push' })),
    forbidden('wrong issuer', valid({ iss: 'https://evil.example' })),
    forbidden('signed by an unknown key', stranger.sign(pushClaims(nowSeconds))),
    forbidden(
      'forged signature under the trusted key id',
      impostor.sign(pushClaims(nowSeconds), { kid: trusted.kid }),
    ),
    forbidden(
      'unsigned (alg none)',
      `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(pushClaims(nowSeconds))}.`,
    ),
    forbidden('expired', valid({ iat: nowSeconds - 7200, exp: nowSeconds - 3600 })),
    forbidden('issued in the future', valid({ iat: nowSeconds + 3600, exp: nowSeconds + 7200 })),
    forbidden('another service account', valid({ email: 'intruder@acme-dev.iam.gserviceaccount.com' })),
    forbidden('email not verified', valid({ email_verified: false })),
    forbidden('email_verified missing', valid({ email_verified: undefined })),
    forbidden('email_verified as text', valid({ email_verified: 'true' })),
    forbidden('no email', valid({ email: undefined })),
  ];
}
