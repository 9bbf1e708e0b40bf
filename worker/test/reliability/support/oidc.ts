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

/** An unsigned token (`alg: none`), which no verifier may accept. */
export function unsignedToken(claims: Record<string, unknown>): string {
  return `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(claims)}.`;
}

/** The refused-token cases shared by the unit test and the process-level test. */
export function refusedTokens(
  trusted: TestSigner,
  stranger: TestSigner,
  impostor: TestSigner,
  nowSeconds: number,
): Array<{ case: string; authorization: string | undefined; http: 401 | 403 }> {
  const valid = (o: Record<string, unknown> = {}) => trusted.sign(pushClaims(nowSeconds, o));
  return [
    { case: 'no Authorization header', authorization: undefined, http: 401 },
    {
      case: 'not a Bearer scheme',
      authorization: `Basic ${Buffer.from('u:p').toString('base64')}`,
      http: 401,
    },
    { case: 'empty Bearer token', authorization: 'Bearer ', http: 401 },
    { case: 'not a JWT', authorization: 'Bearer not-a-jwt-at-all', http: 403 },
    {
      case: 'wrong audience',
      authorization: `Bearer ${valid({ aud: 'https://evil.example/push' })}`,
      http: 403,
    },
    { case: 'wrong issuer', authorization: `Bearer ${valid({ iss: 'https://evil.example' })}`, http: 403 },
    {
      case: 'signed by an unknown key',
      authorization: `Bearer ${stranger.sign(pushClaims(nowSeconds))}`,
      http: 403,
    },
    {
      case: 'forged signature under the trusted key id',
      authorization: `Bearer ${impostor.sign(pushClaims(nowSeconds), { kid: trusted.kid })}`,
      http: 403,
    },
    {
      case: 'unsigned (alg none)',
      authorization: `Bearer ${unsignedToken(pushClaims(nowSeconds))}`,
      http: 403,
    },
    {
      case: 'expired',
      authorization: `Bearer ${valid({ iat: nowSeconds - 7200, exp: nowSeconds - 3600 })}`,
      http: 403,
    },
    {
      case: 'issued in the future',
      authorization: `Bearer ${valid({ iat: nowSeconds + 3600, exp: nowSeconds + 7200 })}`,
      http: 403,
    },
    {
      case: 'another service account',
      authorization: `Bearer ${valid({ email: 'intruder@acme-dev.iam.gserviceaccount.com' })}`,
      http: 403,
    },
    { case: 'email not verified', authorization: `Bearer ${valid({ email_verified: false })}`, http: 403 },
    {
      case: 'email_verified missing',
      authorization: `Bearer ${valid({ email_verified: undefined })}`,
      http: 403,
    },
    {
      case: 'email_verified as text',
      authorization: `Bearer ${valid({ email_verified: 'true' })}`,
      http: 403,
    },
    { case: 'no email', authorization: `Bearer ${valid({ email: undefined })}`, http: 403 },
  ];
}
