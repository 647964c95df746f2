import { createHmac, randomBytes } from 'node:crypto';

/**
 * Signing by the Standard Webhooks specification: a secret is `whsec_` and base64 of its bytes;
 * a signature is `v1,` and base64 of HMAC-SHA256 over `id.timestamp.body` with those bytes.
 */
const PREFIX = 'whsec_';

/** A new signing secret: 32 random bytes (the specification asks for 24 to 64). */
export const newSecret = () => `${PREFIX}${randomBytes(32).toString('base64')}`;

export function signature(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.slice(PREFIX.length), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** The three headers of one try: several secrets (during a rotation) give signatures separated by spaces. */
export function signedHeaders(secrets: readonly string[], id: string, at: Date, body: string): Record<string, string> {
  const timestamp = Math.floor(at.getTime() / 1000);
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((s) => signature(s, id, timestamp, body)).join(' '),
  };
}
