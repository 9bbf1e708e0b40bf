import { createPushVerifier } from '../src/adapters/push-auth';
import { PushAuthError } from '../src/core/errors';
import {
  createSigner,
  PUSH_AUDIENCE,
  PUSH_SERVICE_ACCOUNT,
  pushClaims,
  refusedTokens,
} from './reliability/support/oidc';

/*
 * createPushVerifier with the certificates injected: tokens are signed here with local RSA keys.
 * google-auth-library checks the signature, lifetime, issuer and audience against the real clock,
 * so the claims are built from it.
 */

const trusted = createSigner('push-key-1');
const stranger = createSigner('push-key-2');
const impostor = createSigner('push-key-3');
const nowSeconds = () => Math.floor(Date.now() / 1000);

function verifier() {
  return createPushVerifier({
    audience: PUSH_AUDIENCE,
    serviceAccount: PUSH_SERVICE_ACCOUNT,
    certificates: async () => ({ [trusted.kid]: trusted.publicPem }),
  });
}

async function refusal(authorization: string | undefined): Promise<PushAuthError> {
  try {
    await verifier()(authorization);
  } catch (error) {
    if (error instanceof PushAuthError) return error;
    throw error;
  }
  throw new Error('the token was accepted');
}

describe('createPushVerifier', () => {
  it('accepts a token for the audience, from the push service account, with a verified email', async () => {
    await expect(verifier()(`Bearer ${trusted.sign(pushClaims(nowSeconds()))}`)).resolves.toBeUndefined();
  });

  it('accepts the scheme in any case, as HTTP allows', async () => {
    await expect(verifier()(`bearer ${trusted.sign(pushClaims(nowSeconds()))}`)).resolves.toBeUndefined();
  });

  it('accepts the short issuer form Google also uses', async () => {
    const token = trusted.sign(pushClaims(nowSeconds(), { iss: 'accounts.google.com' }));
    await expect(verifier()(`Bearer ${token}`)).resolves.toBeUndefined();
  });

  describe.each(refusedTokens(trusted, stranger, impostor, nowSeconds()))('refuses $case', (c) => {
    it(`with ${c.http === 401 ? 'unauthenticated (401)' : 'forbidden (403)'}`, async () => {
      const error = await refusal(c.authorization);
      expect(error.code).toBe(c.http === 401 ? 'unauthenticated' : 'forbidden');
    });

    it('with a message that never repeats the token (it is logged and answered)', async () => {
      const error = await refusal(c.authorization);
      const token = c.authorization?.split(' ')[1];
      expect(error.message.length).toBeGreaterThan(10);
      if (token) expect(error.message).not.toContain(token);
      const signature = token?.split('.')[2];
      if (signature) expect(error.message).not.toContain(signature);
    });
  });

  it('refuses a token whose lifetime is longer than Google ever issues', async () => {
    const token = trusted.sign(pushClaims(nowSeconds(), { exp: nowSeconds() + 3 * 24 * 3600 }));
    expect((await refusal(`Bearer ${token}`)).code).toBe('forbidden');
  });

  it('asks for the certificates on every token, so a rotated key is picked up', async () => {
    let calls = 0;
    const verify = createPushVerifier({
      audience: PUSH_AUDIENCE,
      serviceAccount: PUSH_SERVICE_ACCOUNT,
      certificates: async () => {
        calls += 1;
        return calls === 1 ? { [trusted.kid]: trusted.publicPem } : { [stranger.kid]: stranger.publicPem };
      },
    });
    await verify(`Bearer ${trusted.sign(pushClaims(nowSeconds()))}`);
    await expect(verify(`Bearer ${stranger.sign(pushClaims(nowSeconds()))}`)).resolves.toBeUndefined();
    expect(calls).toBe(2);
  });
});
