import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request a receiver got: its headers and body as they arrived. */
export interface Received {
  id: string;
  timestamp: string;
  signature: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** The sender closed the connection before an answer (it gave up waiting). */
  cut: boolean;
}

/** How the receiver answers the next request: a status, or holding it unanswered. */
export type Answer = { status: number; body?: string } | 'hang';

/**
 * A receiver on loopback, as an integration would run one: it keeps every request, and answers
 * what the test queued (200 once the queue is empty). `verify` checks a request with the
 * specification's own library, as a receiver would.
 */
export async function startReceiver(port = 0) {
  const received: Received[] = [];
  const answers: Answer[] = [];
  const sockets = new Set<Socket>();
  /** Requests under way (arrived, not yet answered or cut), and the most there were at once. */
  const load = { open: 0, most: 0 };
  let server: Server;
  const listen = (on: number) =>
    new Promise<number>((resolve, reject) => {
      server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        load.most = Math.max(load.most, ++load.open);
        res.on('close', () => load.open--);
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const request: Received = {
            id: String(req.headers['webhook-id']),
            timestamp: String(req.headers['webhook-timestamp']),
            signature: String(req.headers['webhook-signature']),
            headers: req.headers,
            body: Buffer.concat(chunks).toString('utf8'),
            cut: false,
          };
          received.push(request);
          const answer = answers.shift() ?? { status: 200, body: 'ok' };
          res.on('close', () => {
            if (!res.writableEnded) request.cut = true;
          });
          if (answer === 'hang') return;
          res.writeHead(answer.status, { 'content-type': 'text/plain' }).end(answer.body ?? '');
        });
      });
      server.on('connection', (s) => {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
      });
      server.once('error', reject);
      server.listen(on, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
    });
  const bound = await listen(port);
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
  return {
    url: `http://127.0.0.1:${bound}/hook`,
    port: bound,
    received,
    /** The most requests it held unanswered at once. */
    mostAtOnce: () => load.most,
    /** Answers queued for the next requests, in order. */
    answer: (...next: Answer[]) => answers.push(...next),
    /** The event the request carries, verified with `secret` (throws when the signature does not hold). */
    verify: (request: Received, secret: string) =>
      new Webhook(secret).verify(request.body, {
        'webhook-id': request.id,
        'webhook-timestamp': request.timestamp,
        'webhook-signature': request.signature,
      }) as { type: string; timestamp: string; data: Record<string, unknown> },
    /** Stops listening (connections refused) until `restart`. */
    stop,
    restart: () => listen(bound),
    close: stop,
  };
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/**
 * A safety-net sweep (`WEBHOOK_SWEEP_MS`) that does not come again within a test once the app has
 * started: every delivery a test sees was handed to the queue by the nudge after the commit that
 * recorded it, or by its previous try.
 */
export const SAFETY_NET_NEVER = 3_600_000;
