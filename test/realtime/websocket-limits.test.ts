import { afterEach, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * What one hostile client can do over graphql-ws, done for real: raw sockets speaking the
 * protocol (or not), on loopback, against the real server with small limits.
 */
interface Raw {
  ws: WebSocket;
  messages: { id?: string; type: string; payload?: any }[];
  closed: Promise<{ code: number; reason: string }>;
  send(message: object | string): void;
  next(predicate: (m: { id?: string; type: string; payload?: any }) => boolean): Promise<{ id?: string; type: string; payload?: any }>;
}

let t: TestApp;
let alice: TestUser;
const sockets: WebSocket[] = [];

function raw(): Promise<Raw> {
  const ws = new WebSocket(`${t.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
  sockets.push(ws);
  const messages: Raw['messages'] = [];
  const waiters = new Set<{ predicate: (m: Raw['messages'][number]) => boolean; resolve: (m: Raw['messages'][number]) => void }>();
  ws.on('message', (data) => {
    const message = JSON.parse(String(data));
    messages.push(message);
    for (const w of [...waiters]) if (w.predicate(message)) waiters.delete(w), w.resolve(message);
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
  return new Promise((resolve, reject) => {
    ws.once('open', () =>
      resolve({
        ws,
        messages,
        closed,
        send: (m) => ws.send(typeof m === 'string' ? m : JSON.stringify(m)),
        next: (predicate) => {
          const found = messages.find(predicate);
          return found ? Promise.resolve(found) : new Promise((r) => waiters.add({ predicate, resolve: r }));
        },
      }),
    );
    ws.once('error', reject);
  });
}

/** A socket past `connection_init` with the given key. */
async function connected(key: string) {
  const socket = await raw();
  socket.send({ type: 'connection_init', payload: { 'X-Api-Key': key } });
  await socket.next((m) => m.type === 'connection_ack');
  return socket;
}

const introspection = '{ __schema { types { name fields { name type { name kind ofType { name kind } } } } } }';

setUp(async (start) => {
  // A socket whose output stays unread for 2 s is dropped (30 s in production).
  t = await start.app({
    websocket: { maxMessageBytes: 64 * 1024, maxOperations: 5, maxSocketsPerKey: 3 },
    events: { slowClientMs: 2000 },
  });
  alice = await t.createUser('alice');
});
afterEach(() => {
  for (const ws of sockets.splice(0)) ws.terminate();
});

describe('graphql-ws limits', () => {
  it('closes a socket whose connection_init has no key (4401) or a bad one (4403), before any operation', async () => {
    const none = await raw();
    none.send({ type: 'connection_init' });
    expect(await none.closed).toEqual({ code: 4401, reason: 'Missing API key: send it in connectionParams as X-Api-Key' });

    const bad = await raw();
    bad.send({ type: 'connection_init', payload: { 'X-Api-Key': 'pk_0000000000000000_0000000000000000000000000000000000000000000' } });
    expect(await bad.closed).toEqual({ code: 4403, reason: 'Invalid API key' });

    const early = await raw();
    early.send({ id: '1', type: 'subscribe', payload: { query: introspection } });
    expect(await early.closed).toEqual({ code: 4401, reason: 'Unauthorized' });
    for (const s of [none, bad, early]) expect(s.messages).toEqual([]);
  });

  it('closes a socket that sends a message over the size limit (1009)', async () => {
    const socket = await connected(alice.apiKey);
    socket.send({ id: '1', type: 'subscribe', payload: { query: `{ me { username } } # ${'x'.repeat(80 * 1024)}` } });
    expect((await socket.closed).code).toBe(1009);
  });

  it('caps the operations in flight on one socket: the extra one gets an error, the socket stays open', async () => {
    const session = (await t.services.sessions.send({ id: alice.id }, { agentIds: [(await fixtures(t).agent(alice)).id] })).sessionId;
    const socket = await connected(alice.apiKey);
    for (let i = 1; i <= 6; i++)
      socket.send({
        id: String(i),
        type: 'subscribe',
        payload: { query: `subscription { sessionEvents(sessionId: "${session}") { seq } }` },
      });
    const refused = await socket.next((m) => m.type === 'error');
    expect(refused).toEqual({
      id: '6',
      type: 'error',
      payload: [
        expect.objectContaining({
          message: 'Too many operations in flight on this connection (at most 5)',
          extensions: { code: 'TOO_MANY_OPERATIONS' },
        }),
      ],
    });
    await expect.poll(() => t.services.bus.subscriberCount()).toBe(5);
    socket.send({ id: '2', type: 'complete' });
    await expect.poll(() => t.services.bus.subscriberCount()).toBe(4);
    socket.send({ id: '7', type: 'subscribe', payload: { query: '{ me { username } }' } });
    expect(await socket.next((m) => m.id === '7' && m.type === 'next')).toMatchObject({ payload: { data: { me: { username: 'alice' } } } });
  });

  it('caps the sockets one key may hold open (4429)', async () => {
    const bob = await t.createUser('bob');
    const open = [await connected(bob.apiKey), await connected(bob.apiKey), await connected(bob.apiKey)];
    const fourth = await raw();
    fourth.send({ type: 'connection_init', payload: { 'X-Api-Key': bob.apiKey } });
    expect(await fourth.closed).toEqual({ code: 4429, reason: 'Too many open connections for this API key (at most 3)' });
    open[0]!.ws.close();
    await open[0]!.closed;
    await expect
      .poll(async () => {
        const again = await raw();
        again.send({ type: 'connection_init', payload: { 'X-Api-Key': bob.apiKey } });
        return (await again.next((m) => m.type === 'connection_ack')).type;
      })
      .toBe('connection_ack');
  });

  it('answers an operation over a limit (depth, tokens, syntax) with an error for that id, keeps the socket open and logs no stack', async () => {
    const printed = vi.spyOn(console, 'error');
    try {
      const socket = await connected(alice.apiKey);
      const deep = `{ me { ${'agents(first: 1) { edges { node { owner { '.repeat(4)}username${' } } } }'.repeat(4)} } }`;
      socket.send({ id: 'deep', type: 'subscribe', payload: { query: deep } });
      socket.send({ id: 'long', type: 'subscribe', payload: { query: `{ me { ${'username '.repeat(6000)} } }` } });
      socket.send({ id: 'broken', type: 'subscribe', payload: { query: '{ me { ' } });
      for (const id of ['deep', 'long', 'broken']) {
        const message = await socket.next((m) => m.id === id);
        expect(message.type).toBe('error');
        expect(JSON.stringify(message.payload)).not.toMatch(/\bat \S+:\d+|node_modules|stack/);
      }
      socket.send({ id: 'fine', type: 'subscribe', payload: { query: '{ me { username } }' } });
      expect(await socket.next((m) => m.id === 'fine' && m.type === 'next')).toMatchObject({
        payload: { data: { me: { username: 'alice' } } },
      });
      expect(socket.ws.readyState).toBe(WebSocket.OPEN);
      expect(printed).not.toHaveBeenCalled();
    } finally {
      printed.mockRestore();
    }
  });

  it('drops a client that floods operations without reading, holding only a bounded amount for it; others are served meanwhile', async () => {
    const printed = vi.spyOn(console, 'error');
    try {
      const flooder = await connected(alice.apiKey);
      // Stop reading: replies pile up in the kernel, then in this process, until the server drops it.
      (flooder.ws as unknown as { _socket: { pause(): void } })._socket.pause();
      const collectGarbage = (globalThis as { gc?: () => void }).gc!;
      collectGarbage();
      const before = process.memoryUsage().heapUsed;
      // Up to 3,000 introspections (tens of MB of answers): far more than socket buffers hide.
      for (let sent = 0; sent < 3000 && flooder.ws.readyState === WebSocket.OPEN && t.app.websocket.stats().droppedAsSlow === 0; ) {
        for (let i = 0; i < 20; i++) flooder.send({ id: `q${sent++}`, type: 'subscribe', payload: { query: introspection } });
        await new Promise((r) => setTimeout(r, 5));
      }
      await expect.poll(() => t.app.websocket.stats().droppedAsSlow, { timeout: 20_000 }).toBeGreaterThan(0);
      collectGarbage();
      const grown = process.memoryUsage().heapUsed - before;
      expect(grown).toBeLessThan(64 * 1024 * 1024);
      const health = await fetch(`${t.url}/healthz`);
      expect(health.status).toBe(200);
      const other = await connected(alice.apiKey);
      other.send({ id: '1', type: 'subscribe', payload: { query: '{ me { username } }' } });
      expect(await other.next((m) => m.id === '1' && m.type === 'next')).toMatchObject({
        payload: { data: { me: { username: 'alice' } } },
      });
      (flooder.ws as unknown as { _socket: { resume(): void } })._socket.resume();
      expect(await flooder.closed).toMatchObject({ code: 1013 });
      expect(printed).not.toHaveBeenCalled();
    } finally {
      printed.mockRestore();
    }
  });
});
