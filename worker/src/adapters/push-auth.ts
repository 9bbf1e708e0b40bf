import { type Certificates, OAuth2Client } from 'google-auth-library';
import { PushAuthError } from '../core/errors';

/**
 * In-app verification of the push subscription's OIDC token: signature (Google's certificates),
 * audience, issuer, and that the token was signed for the push service account with a verified
 * email. Signature and audience alone are not enough: any Google account can mint a token for any
 * audience. Used when Cloud Run IAM does not already check the token (or as a second lock).
 */

export interface PushVerifierOptions {
  audience: string;
  /** The push service account's email: the only identity allowed to push. */
  serviceAccount: string;
  /** Certificates to check signatures with; Google's, fetched and cached by the library, by default. */
  certificates?: () => Promise<Certificates>;
}

const ISSUERS = ['https://accounts.google.com', 'accounts.google.com'];

export function createPushVerifier(
  options: PushVerifierOptions,
): (authorization: string | undefined) => Promise<void> {
  const client = new OAuth2Client();
  const certificates =
    options.certificates ?? (async () => (await client.getFederatedSignonCertsAsync()).certs);
  return async (authorization) => {
    const token = authorization?.match(/^Bearer\s+(\S+)$/i)?.[1];
    if (!token) throw new PushAuthError('unauthenticated', 'the push request carries no Bearer token');
    let payload: Record<string, unknown> | undefined;
    try {
      const ticket = await client.verifySignedJwtWithCertsAsync(
        token,
        await certificates(),
        options.audience,
        ISSUERS,
      );
      payload = ticket.getPayload() as Record<string, unknown> | undefined;
    } catch (error) {
      // google-auth-library puts the whole token, or its payload, in some messages ("Invalid token
      // signature: <jwt>"): keep only the kind of failure, never the credential.
      const kind = ((error as Error).message ?? '').split(/[:,\n]/)[0]!.slice(0, 80);
      throw new PushAuthError('forbidden', `the push token is not valid: ${kind}`);
    }
    if (payload?.email !== options.serviceAccount || payload?.email_verified !== true) {
      throw new PushAuthError('forbidden', 'the push token was not issued to the push service account');
    }
  };
}
