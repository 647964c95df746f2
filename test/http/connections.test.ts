import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { openRawSocket, settlesWithin } from '../helpers/raw-socket.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse } from '../helpers/sse.ts';

/**
 * Attacks on connections, over real sockets, against a server whose limits are short: a whole
 * request within 400 ms, idle keep-alive connections closed after 300 ms. Each attack is a few
 * sockets, bounded in writes; what is checked is the outcome, never how long it took.
 */
const REQUEST_TIMEOUT_MS = 400;

let t: TestApp;
let alice: TestUser;
let agentId: string;

setUp(async (start) => {
  t = await start.app({ http: { requestTimeoutMs: REQUEST_TIMEOUT_MS, keepAliveTimeoutMs: 300 }, llm: { offlineTokenDelayMs: 5 } });
  alice = await t.createUser('alice');
  agentId = (await fixtures(t).agent(alice, { name: 'Muse' })).id;
});

const head = (method: string, path: string, headers: Record<string, string | number>) =>
  `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;

/** Headers promising a large JSON body, then a byte every 50 ms: far slower than the limit allows. */
async function slowBody(method: string, path: string, key: string | null) {
  const socket = await openRawSocket(t.url);
  socket.socket.write(
    head(method, path, { 'content-type': 'application/json', 'content-length': 1_000_000, ...(key ? { 'x-api-key': key } : {}) }),
  );
  socket.trickle('{', 50, 200);
  return socket;
}

describe('a request must arrive whole within the request timeout', () => {
  it.each([
    ['POST /graphql without a key', 'POST', '/graphql', false],
    ['POST /graphql with a key', 'POST', '/graphql', true],
    ['PATCH /v2/agents/:id with a key', 'PATCH', '/v2/agents/:id', true],
  ])('a body sent a byte at a time (%s) is cut with 408', async (_name, method, path, withKey) => {
    const socket = await slowBody(method, path.replace(':id', agentId), withKey ? alice.apiKey : null);
    const sent = await socket.closed;
    expect(sent).toMatch(/^HTTP\/1\.1 408 /);
    expect((await t.rest('GET', '/healthz')).status).toBe(200);
  });

  it('a REST body without a key is refused with 401 at once, and the connection closes without waiting for the body', async () => {
    const socket = await slowBody('PATCH', `/v2/agents/${agentId}`, null);
    const sent = await socket.closed;
    expect(sent).toMatch(/^HTTP\/1\.1 401 /);
    expect(sent).toMatch(/\r\nconnection: close\r\n/i);
    // No second answer: no status line of a 408 anywhere (a bare /408/ also matches a request id).
    expect(sent).not.toMatch(/(^|\r\n)HTTP\/1\.1 408 /);
  });

  it('headers that never end, and a connection that never sends anything, are cut too', async () => {
    const slowHeaders = await openRawSocket(t.url);
    slowHeaders.socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    slowHeaders.trickle('X-Padding: a\r\n', 50, 200);
    const silent = await openRawSocket(t.url);
    expect(await slowHeaders.closed).toMatch(/^HTTP\/1\.1 408 /);
    await silent.closed;
  });

  it('an idle keep-alive connection is closed after its timeout', async () => {
    const socket = await openRawSocket(t.url);
    socket.socket.write(head('GET', '/healthz', {}));
    const sent = await socket.closed;
    expect(sent).toMatch(/^HTTP\/1\.1 200 /);
  });
});

describe('responses that stay open are not requests: they outlive the timeout', () => {
  it('a REST event stream stays open and keeps delivering', async () => {
    const sessionId = (await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [agentId], title: 'Long watch' } }))
      .body.session_id;
    const stream = await openSse(`${t.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': alice.apiKey } });
    try {
      expect(stream.status).toBe(200);
      expect(await settlesWithin(stream.done, REQUEST_TIMEOUT_MS * 4)).toBe(false);
      await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: sessionId, content: 'Still there?' } });
      await stream.waitFor((f) => f.event === 'update' && f.data.data.type === 'end_prompt');
    } finally {
      stream.close();
    }
  });

  it('a GraphQL subscription over SSE stays open and keeps delivering', async () => {
    const sessionId = (await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [agentId], title: 'GraphQL watch' } }))
      .body.session_id;
    const controller = new AbortController();
    const response = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      signal: controller.signal,
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'x-api-key': alice.apiKey },
      body: JSON.stringify({ query: `subscription { sessionEvents(sessionId: "${sessionId}") { __typename } }` }),
    });
    try {
      expect(response.status).toBe(200);
      const reader = response.body!.getReader();
      let text = '';
      const readUntil = async (pattern: RegExp) => {
        while (!pattern.test(text)) {
          const { value, done } = await reader.read();
          if (done) throw new Error(`stream ended; got ${text}`);
          text += new TextDecoder().decode(value);
        }
      };
      await new Promise((r) => setTimeout(r, REQUEST_TIMEOUT_MS * 4));
      await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: sessionId, content: 'Still there?' } });
      await readUntil(/PromptEnded/);
    } finally {
      controller.abort();
    }
  });

  it('a WebSocket stays open', async () => {
    const ws = new WebSocket(`${t.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
    try {
      await new Promise((resolve, reject) => {
        ws.once('open', resolve);
        ws.once('error', reject);
      });
      const closed = new Promise((r) => ws.once('close', r));
      ws.send(JSON.stringify({ type: 'connection_init', payload: { 'X-Api-Key': alice.apiKey } }));
      expect(await settlesWithin(closed, REQUEST_TIMEOUT_MS * 4)).toBe(false);
      const pong = new Promise((r) => ws.once('message', r));
      ws.send(JSON.stringify({ type: 'ping' }));
      expect(JSON.parse(String(await pong)).type).toMatch(/connection_ack|pong/);
    } finally {
      ws.terminate();
    }
  });
});

describe('the connection cap', () => {
  let capped: TestApp;
  setUp(async (start) => {
    capped = await start.app({ http: { maxConnections: 4 } });
  });

  it('refuses connections past the cap instead of running out, and serves again once they go', async () => {
    // Each held connection is answered once first, so the server has taken it in before the
    // next arrives (a connection's place in the count is its turn to be accepted).
    const held = await Promise.all(
      Array.from({ length: 4 }, async () => {
        const s = await openRawSocket(capped.url);
        s.socket.write(head('GET', '/healthz', {}));
        await expect.poll(s.received, { timeout: 10_000 }).toMatch(/^HTTP\/1\.1 200 /);
        return s;
      }),
    );
    try {
      const refused = await openRawSocket(capped.url).catch(() => null);
      if (refused) expect(await refused.closed).toBe('');
    } finally {
      for (const s of held) s.destroy();
      await Promise.all(held.map((s) => s.closed));
    }
    await expect.poll(async () => (await fetch(`${capped.url}/healthz`).catch(() => null))?.status ?? 0, { timeout: 10_000 }).toBe(200);
  });
});
