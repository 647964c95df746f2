import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { OutboundConfig } from '../config.ts';
import type { WebhookRequest, WebhookResponse, WebhookSender } from '../domain/webhooks/index.ts';
import { checkAddress, pinnedLookup } from './address-guard.ts';

/** Reads at most `max` bytes of an answer, then lets the rest go with the connection. */
function readStart(response: IncomingMessage, max: number): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => resolve(Buffer.concat(chunks).subarray(0, max).toString('utf8'));
    response.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= max) {
        response.destroy();
        done();
      }
    });
    response.on('end', done);
    response.on('error', done);
    response.on('close', done);
  });
}

/** Why a call got no answer, in a few words for the delivery log (never the driver's whole text). */
function why(err: unknown, timedOut: boolean, timeoutMs: number): string {
  if (timedOut) return `no answer within ${timeoutMs} ms`;
  const code = (err as { code?: string } | null)?.code;
  if (code === 'ECONNREFUSED') return 'the connection was refused';
  if (code === 'ECONNRESET' || code === 'EPIPE') return 'the connection was closed before an answer';
  if (code === 'ABORT_ERR') return 'the try was stopped (the instance is shutting down)';
  if (code?.startsWith('ERR_TLS') || code?.includes('CERT')) return `the TLS handshake failed (${code})`;
  return code ? `the call failed (${code})` : 'the call failed';
}

/**
 * Posts a delivery: the URL is checked again here, and the connection goes to an address that
 * passed the check (a DNS answer that changed meanwhile cannot point it inside). No redirect is
 * followed (a 3xx is a failed try), at most `maxAnswerBytes` of the answer is read, and the whole
 * call is cut at `timeoutMs`.
 */
export const webhookSender = (config: OutboundConfig): WebhookSender => ({
  async post(call: WebhookRequest): Promise<WebhookResponse> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const checked = await checkAddress(call.url, config);
    if ('refusal' in checked) return { error: `the URL is refused: ${checked.refusal}`, durationMs: elapsed() };
    const lookup = pinnedLookup(checked);
    const abort = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      abort.abort();
    }, call.timeoutMs);
    const stop = () => abort.abort();
    call.signal?.addEventListener('abort', stop, { once: true });
    try {
      const request = checked.url.protocol === 'https:' ? httpsRequest : httpRequest;
      const response = await new Promise<IncomingMessage>((resolve, reject) => {
        const req = request(checked.url, {
          method: 'POST',
          headers: { ...call.headers, 'content-length': Buffer.byteLength(call.body) },
          lookup,
          agent: false,
          signal: abort.signal,
        });
        req.on('response', resolve);
        req.on('error', reject);
        req.end(call.body);
      });
      const answer = await readStart(response, call.maxAnswerBytes);
      response.destroy();
      if (timedOut) return { error: why(null, true, call.timeoutMs), durationMs: elapsed() };
      return { status: response.statusCode ?? 0, answer, durationMs: elapsed() };
    } catch (err) {
      return { error: why(err, timedOut, call.timeoutMs), durationMs: elapsed() };
    } finally {
      clearTimeout(timer);
      call.signal?.removeEventListener('abort', stop);
    }
  },
});
