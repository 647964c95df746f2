import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { setUp } from '../helpers/set-up.ts';

const LIMIT = 4;
const FLOOD = 120;
let t: TestApp;
let pro: TestUser;
const sockets: WebSocket[] = [];

setUp(async (start) => {
  // Rate limits as in production for the pro tier: the flood fits in them, so only the in-flight cap stops it.
  t = await start.app({ work: { graphqlInFlightPerKey: LIMIT }, limits: { rate: { perTier: { pro: 1_200, free: 300 } } } });
  pro = await t.createUser('pro');
  await t.db.user.update({ where: { id: pro.id }, data: { subscriptionTier: 'pro' } });
});
afterEach(() => {
  for (const ws of sockets.splice(0)) ws.terminate();
});

/** A graphql-ws socket past connection_init that collects every message. */
async function socketFor(key: string) {
  const ws = new WebSocket(`${t.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
  sockets.push(ws);
  const messages: { id?: string; type: string; payload?: any }[] = [];
  ws.on('message', (data) => messages.push(JSON.parse(String(data))));
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  ws.send(JSON.stringify({ type: 'connection_init', payload: { 'X-Api-Key': key } }));
  for (let i = 0; i < 200 && !messages.some((m) => m.type === 'connection_ack'); i++) await new Promise((r) => setTimeout(r, 10));
  return { ws, messages };
}

/** Heavy for the CPU (introspection, run in one go) and for the database (awaited), with the caller's id to check. */
const heavy =
  '{ me { rawId username } __schema { types { name fields { name } } } sessions(first: 50) { edges { node { id title } } } sharedSessions(first: 50) { edges { node { id } } } deployments { id } triggers { id } }';

describe('one key flooding heavy operations', () => {
  it('has at most its share executing: the rest are refused with TOO_MANY_IN_FLIGHT, every one is answered, /healthz stays up', async () => {
    const { ws, messages } = await socketFor(pro.apiKey);
    for (let i = 0; i < FLOOD; i++) ws.send(JSON.stringify({ id: `q${i}`, type: 'subscribe', payload: { query: heavy } }));
    const health: number[] = [];
    const ended = () => messages.filter((m) => m.type === 'complete' || m.type === 'error');
    for (let i = 0; i < 400 && ended().length < FLOOD; i++) {
      health.push((await fetch(`${t.url}/healthz`)).status);
      await new Promise((r) => setTimeout(r, 10));
    }
    const results = messages.filter((m) => m.type === 'next');
    expect(ended()).toHaveLength(FLOOD);
    // Refused as they arrive, before they are parsed or run.
    const refused = messages.filter((m) => m.type === 'error' && m.payload[0]?.extensions?.code === 'TOO_MANY_IN_FLIGHT');
    const answered = results.filter((m) => m.payload.data?.me?.rawId === pro.id);
    // Past WS_MAX_OPERATIONS (100) unanswered on the socket, an operation is refused before it executes.
    const overSocket = messages.filter((m) => m.type === 'error' && m.payload[0]?.extensions?.code === 'TOO_MANY_OPERATIONS');
    expect(refused.length + answered.length + overSocket.length).toBe(FLOOD);
    expect(refused.length).toBeGreaterThan(0);
    expect(answered.length).toBeGreaterThanOrEqual(LIMIT);
    expect(refused[0]!.payload[0].message).toMatch(/at most 4/);
    expect(health.filter((s) => s !== 200)).toEqual([]);

    // Over HTTP, the same key is answered again once its operations are done; 429 while they run.
    const after = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': pro.apiKey },
      body: JSON.stringify({ query: '{ me { rawId } }' }),
    });
    expect(after.status).toBe(200);
    expect((await after.json()).data.me.rawId).toBe(pro.id);
  });

  it('counts HTTP and WebSocket operations of a key together, and other keys not at all', async () => {
    const other = await t.createUser('other');
    const { ws, messages } = await socketFor(pro.apiKey);
    for (let i = 0; i < 40; i++) ws.send(JSON.stringify({ id: `q${i}`, type: 'subscribe', payload: { query: heavy } }));
    const post = (key: string) =>
      fetch(`${t.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key },
        body: JSON.stringify({ query: heavy }),
      });
    const [mine, theirs] = await Promise.all([Promise.all(Array.from({ length: 20 }, () => post(pro.apiKey))), post(other.apiKey)]);
    expect(theirs.status).toBe(200);
    const statuses = mine.map((r) => r.status);
    expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
    for (let i = 0; i < 400 && messages.filter((m) => m.type === 'complete' || m.type === 'error').length < 40; i++)
      await new Promise((r) => setTimeout(r, 10));
    const wsRefused = messages.filter((m) => m.type === 'error' && m.payload[0]?.extensions?.code === 'TOO_MANY_IN_FLIGHT');
    // 60 operations of one key at once against a limit of 4: many were refused, on one transport or both.
    expect(statuses.filter((s) => s === 429).length + wsRefused.length).toBeGreaterThan(0);
    const body = await mine.find((r) => r.status === 429)?.json();
    if (body) expect(body.errors[0].extensions.code).toBe('TOO_MANY_IN_FLIGHT');
  });
});
