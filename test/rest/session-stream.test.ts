import { spawn } from 'node:child_process';
import { Agent, request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import type { LlmConfig } from '../../src/config.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { trackChild } from '../helpers/process.ts';
import { newSession, settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, updates, type SseClient } from '../helpers/sse.ts';

const slowReader = fileURLToPath(new URL('../helpers/clients/slow-reader.py', import.meta.url));

const deferred = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
};

let t: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;
let bob: TestUser;
let muse: { id: string };
let remy: { id: string };
const streams: SseClient[] = [];

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Hel', 'lo', ' wor', 'ld'] });
  // A client that leaves 1 MiB unread for 3 s is cut off (30 s in production), so the slow
  // consumer test need not wait long.
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, events: { heartbeatMs: 40, slowClientMs: 3000 } });
  [alice, bob] = [await t.createUser('alice'), await t.createUser('bob')];
  muse = await fixtures(t).agent(alice, { name: 'Muse', key: 'muse', persona: 'You are Muse.' });
  remy = await fixtures(t).agent(bob, { name: 'Remy', key: 'remy', persona: 'You are Remy.' });
});
beforeEach(() => llm.reset());
afterAll(async () => {
  for (const s of streams.splice(0)) s.close();
});

/** POST /v2/sessions with stream: true, as an SSE client. */
async function prompt(user: TestUser, body: Record<string, unknown>) {
  const s = await openSse(`${t.url}/v2/sessions`, {
    method: 'POST',
    headers: { 'x-api-key': user.apiKey, 'content-type': 'application/json' },
    body: JSON.stringify({ stream: true, ...body }),
  });
  streams.push(s);
  return s;
}

async function watch(user: TestUser, sessionId: string, lastEventId?: number) {
  const s = await openSse(`${t.url}/v2/sessions/${sessionId}/events`, {
    headers: { 'x-api-key': user.apiKey, ...(lastEventId !== undefined ? { 'last-event-id': String(lastEventId) } : {}) },
  });
  streams.push(s);
  return s;
}

const tokenText = (events: any[], messageId?: string) =>
  events
    .filter((e) => e.type === 'assistant_token' && (!messageId || e.message_id === messageId))
    .map((e) => e.text)
    .join('');

describe('POST /v2/sessions with stream: true', () => {
  it('streams the reply as the original frames, ending with done; ids grow; the text is what gets saved', async () => {
    const s = await prompt(alice, { agent_ids: [muse.id], content: 'Say hello' });
    expect(s.status).toBe(200);
    expect(s.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(s.headers.get('cache-control')).toBe('no-cache, no-transform');
    expect(s.headers.get('x-accel-buffering')).toBe('no');
    const frames = await s.done;

    expect(frames.at(-1)).toEqual({ id: undefined, event: 'done', data: { event: 'done', data: '' } });
    const events = updates(frames);
    expect(events.map((e) => e.type)).toEqual([
      'start_prompt',
      'assistant_token',
      'assistant_token',
      'assistant_token',
      'assistant_token',
      'assistant_message',
      'end_prompt',
    ]);
    const ids = frames.filter((f) => f.event === 'update').map((f) => f.id!);
    for (let i = 1; i < ids.length; i++) expect(ids[i]).toBe(ids[i - 1]! + 1);

    const [start] = events;
    const sessionId = start.session_id;
    expect(start).toMatchObject({
      type: 'start_prompt',
      prompt_id: start.message.id,
      agent_ids: [muse.id],
      reply_ids: [expect.any(String)],
    });
    expect(start.message).toMatchObject({
      role: 'user',
      content: 'Say hello',
      sender_id: alice.id,
      // Populated, as the original's clients read it.
      sender: { _id: alice.id, username: 'alice', type: 'user' },
      session: sessionId,
    });
    for (const e of events) expect(e.session_id).toBe(sessionId);
    const done = events.find((e) => e.type === 'assistant_message');
    expect(done.message).toMatchObject({
      id: start.reply_ids[0],
      role: 'assistant',
      status: 'complete',
      content: 'Hello world',
      sender_id: muse.id,
      sender: { _id: muse.id, username: 'muse', type: 'agent' },
    });
    expect(done).toMatchObject({ agent: muse.id, content: 'Hello world', tool_calls: [] });
    expect(tokenText(events, done.message.id)).toBe('Hello world');

    const saved = await settledSession(t, alice, sessionId);
    expect(saved.messages.at(-1)).toEqual(done.message);
  });

  it('takes a streamed prompt to a new session in with three statements before its first token, and no transaction', async () => {
    // A process's first prompt also fills its cache of the users who write (shown on each
    // message): what is counted is a prompt's own work, as every prompt after the first does it.
    await (await prompt(alice, { agent_ids: [muse.id], content: 'Warm the caches' })).done;
    const held = deferred();
    llm.enqueue({ tokens: ['first', ' rest'], gate: (i) => (i === 1 ? held.promise : undefined) });
    // Earlier sessions are named after their reply has ended: those writes must not fall in the count.
    await expect.poll(() => t.db.session.count({ where: { title: null, messages: { some: { role: 'user' } } } })).toBe(0);
    const before = t.queries.length;
    const s = await prompt(alice, { agent_ids: [muse.id], content: 'Count my statements' });
    await s.waitFor((f) => f.data?.data?.type === 'assistant_token');
    // Timers of the service's own run beside the prompt and can fall inside the window on a busy
    // machine; their statements are not this prompt's: open watches' access re-checked every
    // second (reads of keys and members), the trigger scheduler's look for runs due, and the
    // webhooks' sweep for deliveries due.
    const background = [
      /^SELECT "t0"."id" FROM "public"."ApiKey" AS "t0" WHERE "t0"."id" IN/,
      /FROM "public"."SessionUser"/,
      /^\s*SELECT \* FROM "Trigger" WHERE "nextRun" IS NOT NULL/,
      /^\s*UPDATE "WebhookDelivery" SET "queuedAt"/,
    ];
    const taken = t.queries.slice(before).filter((sql) => !background.some((r) => r.test(sql)));
    held.resolve();
    await s.done;
    // The key; the agents with what they remember of the user; the session with its messages
    // (written only if the key still exists).
    expect(taken, taken.join('\n\n')).toEqual([
      expect.stringMatching(/FROM "ApiKey" AS k JOIN "User"/),
      expect.stringMatching(/FROM "public"."Agent" .*"public"."Memory"/s),
      expect.stringMatching(/INSERT INTO "Session".*FROM "ApiKey"/s),
    ]);
  });

  it('keeps the connection for the next request once the stream has ended, as a browser or SDK expects', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const stream = (content: string) =>
      new Promise<{ body: string; reused: boolean }>((resolve, reject) => {
        const req = request(`${t.url}/v2/sessions`, {
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'x-api-key': alice.apiKey },
        });
        req.on('response', (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (d) => (body += d));
          res.on('end', () => resolve({ body, reused: req.reusedSocket }));
        });
        req.on('error', reject);
        req.end(JSON.stringify({ agent_ids: [muse.id], content, stream: true }));
      });
    try {
      const first = await stream('first over this connection');
      const second = await stream('second over this connection');
      for (const s of [first, second]) expect(s.body).toMatch(/"event":"done"/);
      expect([first.reused, second.reused]).toEqual([false, true]);
    } finally {
      agent.destroy();
    }
  });

  it('streams and saves a reply whose model wrote NUL characters, which PostgreSQL text cannot hold, without them', async () => {
    llm.enqueue({ tokens: ['nul\u0000', '\u0000', 'l'], reasoning: ['th\u0000ink'] });
    const s = await prompt(alice, { agent_ids: [muse.id], content: 'Say nul', thinking: true });
    const events = updates(await s.done);
    const done = events.find((e) => e.type === 'assistant_message');
    expect(done.message).toMatchObject({ status: 'complete', content: 'null', thought: 'think' });
    expect(tokenText(events, done.message.id)).toBe('null');
    const saved = await settledSession(t, alice, events[0].session_id);
    expect(saved.messages.at(-1)).toEqual(done.message);
  });

  it('ends the stream with an error frame when the database refuses to save the reply, never in silence', async () => {
    const sessionId = await newSession(t, alice, [muse.id]);
    await settledSession(t, alice, sessionId);
    // The session's token counter is an int: this reply's tokens would take it past the largest one.
    await t.db.session.update({ where: { id: sessionId }, data: { tokensSpent: 2 ** 31 - 10 } });
    llm.enqueue({ tokens: ['too', ' many'], usage: { prompt_tokens: 50, completion_tokens: 2 } });
    const s = await prompt(alice, { session_id: sessionId, content: 'Count on' });
    const frames = await s.done;
    expect(frames.at(-1)!.event).toBe('done');
    const events = updates(frames);
    expect(events.map((e) => e.type)).toEqual(['start_prompt', 'assistant_token', 'assistant_token', 'error', 'end_prompt']);
    expect(events[3].message).toMatchObject({ status: 'failed', content: 'too many' });
  });

  it('sends heartbeat comments while the model is slow', async () => {
    llm.enqueue({ tokens: ['slow', ' answer'], delayMs: 150 });
    const s = await prompt(alice, { agent_ids: [muse.id], content: 'take your time' });
    await s.done;
    expect(s.comments).toBeGreaterThan(0);
  });

  it('two agents answer in parallel, each in its own message', async () => {
    // Muse's second token waits until Remy has started: sequential replies would never finish.
    const remyStarted = deferred();
    llm.choose((r) => {
      const system = r.body.messages[0]!.content!;
      if (system.includes('You are Remy')) return { tokens: ['Bon', 'jour'], gate: () => remyStarted.resolve() };
      return { tokens: ['Hi', ' there'], gate: (i) => (i === 1 ? remyStarted.promise : undefined) };
    });
    const s = await prompt(alice, { agent_ids: [muse.id, remy.id], content: 'Hello both' });
    const events = updates(await s.done);
    const start = events[0];
    expect(start.agent_ids).toEqual([muse.id, remy.id]);
    const messages = events.filter((e) => e.type === 'assistant_message').map((e) => e.message);
    expect(messages.map((m) => [m.sender_id, m.content]).sort()).toEqual(
      [
        [muse.id, 'Hi there'],
        [remy.id, 'Bonjour'],
      ].sort(),
    );
    expect(new Set(messages.map((m) => m.id))).toEqual(new Set(start.reply_ids));
    for (const m of messages) expect(tokenText(events, m.id)).toBe(m.content);
    expect(events.at(-1).type).toBe('end_prompt');
  });

  it('keeps writing the reply when the client goes away, and saves it', async () => {
    const release = deferred();
    llm.enqueue({ tokens: ['one', ' two', ' three'], gate: (i) => (i === 1 ? release.promise : undefined) });
    const s = await prompt(alice, { agent_ids: [muse.id], content: 'count' });
    const first = await s.waitFor((f) => f.data?.data?.type === 'assistant_token');
    s.close();
    release.resolve();
    const saved = await settledSession(t, alice, first.data.data.session_id);
    expect(saved.messages.at(-1)).toMatchObject({ status: 'complete', content: 'one two three' });
  });

  it('shows the reasoning with thinking: true and keeps it as the thought; without it, no thought', async () => {
    llm.enqueue({ reasoning: ['Let me ', 'think.'], tokens: ['Answer'] });
    const thinking = updates(await (await prompt(alice, { agent_ids: [muse.id], content: 'think', thinking: true })).done);
    expect(
      thinking
        .filter((e) => e.type === 'assistant_thinking')
        .map((e) => e.text)
        .join(''),
    ).toBe('Let me think.');
    expect(thinking.find((e) => e.type === 'assistant_message').message).toMatchObject({ thought: 'Let me think.', content: 'Answer' });
    expect(llm.replyRequests()[0]!.body.reasoning_effort).toBe('medium');

    llm.reset();
    llm.enqueue({ reasoning: ['hidden'], tokens: ['Answer'] });
    const plain = updates(await (await prompt(alice, { agent_ids: [muse.id], content: 'no thinking' })).done);
    expect(plain.some((e) => e.type === 'assistant_thinking')).toBe(false);
    expect(plain.find((e) => e.type === 'assistant_message').message.thought).toBeNull();
    expect(llm.replyRequests()[0]!.body).not.toHaveProperty('reasoning_effort');
  });

  it('answers errors before the stream starts as JSON, not as a stream', async () => {
    const res = await fetch(`${t.url}/v2/sessions`, {
      method: 'POST',
      headers: { 'x-api-key': alice.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ stream: true, content: 'no agents' }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ message: 'agent_ids must be provided when creating a new session' });
  });
});

describe('GET /v2/sessions/:id/events', () => {
  it('a client that reconnects with Last-Event-ID mid-reply gets every event it missed, in order, once, then the live ones', async () => {
    const id = await newSession(t, alice, [muse.id], { content: 'warm up' });
    await settledSession(t, alice, id);
    const release = deferred();
    llm.enqueue({ tokens: ['a', 'b', 'c', 'd', 'e', 'f'], gate: (i) => (i === 4 ? release.promise : undefined) });

    const first = await watch(alice, id);
    await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: id, content: 'letters please' } });
    await first.waitFor((f) => f.data?.data?.text === 'b');
    first.close();
    const seen = first.frames.filter((f) => f.event === 'update');
    const lastId = seen.at(-1)!.id!;

    const second = await watch(alice, id, lastId);
    release.resolve();
    await second.waitFor((f) => f.data?.data?.type === 'end_prompt');
    second.close();
    const all = [...seen, ...second.frames.filter((f) => f.event === 'update')];
    const ids = all.map((f) => f.id!);
    expect(new Set(ids).size).toBe(ids.length);
    for (let i = 1; i < ids.length; i++) expect(ids[i]).toBe(ids[i - 1]! + 1);
    const events = all.map((f) => f.data.data);
    expect(tokenText(events)).toBe('abcdef');
    // The last: the warm-up's own may arrive after its reply was saved, once the watch is open.
    expect(events.findLast((e) => e.type === 'assistant_message').message.content).toBe('abcdef');
  });

  it('replays a finished reply to a client that comes back after it ended', async () => {
    const sessionId = (await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [muse.id] } })).body.session_id;
    const watcher = await watch(alice, sessionId);
    await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: sessionId, content: 'first' } });
    const firstEnd = await watcher.waitFor((f) => f.data?.data?.type === 'end_prompt');
    watcher.close();
    await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: sessionId, content: 'again' } });
    await settledSession(t, alice, sessionId);

    const late = await watch(alice, sessionId, firstEnd.id);
    const end = await late.waitFor((f) => f.data?.data?.type === 'end_prompt');
    late.close();
    const events = updates(late.frames.slice(0, late.frames.indexOf(end) + 1)).filter((e) => e.prompt_id === end.data.data.prompt_id);
    expect(events.map((e) => e.type)).toEqual([
      'start_prompt',
      'assistant_token',
      'assistant_token',
      'assistant_token',
      'assistant_token',
      'assistant_message',
      'end_prompt',
    ]);
    expect(events[0].message.content).toBe('again');
    expect(late.frames[0]!.id).toBe(firstEnd.id! + 1);
  });

  it('says when the events asked for are gone (an id it never issued), and refuses a malformed Last-Event-ID', async () => {
    const id = await newSession(t, alice, [muse.id]);
    await settledSession(t, alice, id);
    const s = await watch(alice, id, 1);
    const frames = await s.done;
    expect(frames.map((f) => f.data)).toEqual([
      { event: 'error', data: { error: expect.stringContaining('no longer available'), code: 'EVENTS_EXPIRED', last_event_id: 1 } },
      { event: 'done', data: '' },
    ]);
    const bad = await fetch(`${t.url}/v2/sessions/${id}/events`, { headers: { 'x-api-key': alice.apiKey, 'last-event-id': 'yesterday' } });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ message: 'Last-Event-ID (or after) must be the id of an event from this stream' });
  });

  it('a stranger cannot watch (403), and an unknown session is 404', async () => {
    const id = await newSession(t, alice, [muse.id]);
    const stranger = await fetch(`${t.url}/v2/sessions/${id}/events`, { headers: { 'x-api-key': bob.apiKey } });
    expect(stranger.status).toBe(403);
    expect(await stranger.json()).toEqual({ message: 'You do not have access to this session' });
    const unknown = await fetch(`${t.url}/v2/sessions/nope/events`, { headers: { 'x-api-key': alice.apiKey } });
    expect(unknown.status).toBe(404);
  });

  it('ends watchers with a reason when the session is deleted, when they are removed, and when their key is deleted', async () => {
    const id = await newSession(t, alice, [muse.id]);
    await t.rest('POST', `/v2/sessions/${id}/users`, { key: alice.apiKey, body: { username: bob.username, permission: 'editor' } });
    const bobKey2 = (await t.services.apiKeys.create(bob.id)).apiKey;
    const bobs = await watch(bob, id);
    const bobs2 = await watch({ ...bob, apiKey: bobKey2 }, id);
    const alices = await watch(alice, id);

    expect((await t.rest('DELETE', '/apikeys', { key: bob.apiKey, body: { apiKey: bobKey2 } })).status).toBe(200);
    expect((await bobs2.done).slice(-2).map((f) => f.data)).toEqual([
      { event: 'error', data: { error: 'The API key of this stream was deleted', code: 'ACCESS_REVOKED', last_event_id: null } },
      { event: 'done', data: '' },
    ]);

    expect((await t.rest('DELETE', `/v2/sessions/${id}/users/${bob.id}`, { key: alice.apiKey })).status).toBe(200);
    expect((await bobs.done).slice(-2).map((f) => f.data)).toEqual([
      { event: 'error', data: { error: 'You were removed from this session', code: 'ACCESS_REVOKED', last_event_id: expect.any(Number) } },
      { event: 'done', data: '' },
    ]);

    expect((await t.rest('DELETE', `/v2/sessions/${id}`, { key: alice.apiKey })).status).toBe(200);
    const frames = await alices.done;
    expect(frames.at(-2)!.data).toEqual({
      event: 'error',
      data: { error: 'This session was deleted', code: 'SESSION_DELETED', last_event_id: expect.any(Number) },
    });
    expect(frames.at(-1)!.data).toEqual({ event: 'done', data: '' });
    expect(updates(frames).map((e) => e.type)).toContain('user_removed');
  });

  it('cuts off a client that stops reading, with the reason and the id to resume from, and it resumes', async () => {
    const id = await newSession(t, alice, [muse.id]);
    await settledSession(t, alice, id);
    // About 8 MB of reply: more than the socket buffers hide, and over the 1 MiB this process
    // keeps for a client, yet fewer events than the replay log keeps.
    const big = 'x'.repeat(20 * 1024);
    const count = 400;
    llm.enqueue({ tokens: Array.from({ length: count }, (_, i) => `${String(i).padStart(4, '0')}${big}`) });

    // A client that sends the request and then reads nothing, over a socket with a small
    // receive buffer (see the script); it reads everything once the reply has been written.
    const { port } = new URL(t.url);
    const request = `GET /v2/sessions/${id}/events HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\nx-api-key: ${alice.apiKey}\\r\\n\\r\\n`;
    const reader = trackChild(spawn('python3', [slowReader, '127.0.0.1', port, request]));
    const received: Buffer[] = [];
    reader.stdout.on('data', (d: Buffer) => received.push(d));
    const watching = t.services.bus.subscriberCount();
    await new Promise((resolve) => reader.stderr.once('data', resolve));
    await expect.poll(() => t.services.bus.subscriberCount()).toBe(watching + 1);
    await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: id, content: 'a lot please' } });
    await settledSession(t, alice, id);
    // The server gives up on it (slowClientMs later) and lets its subscription go.
    await expect.poll(() => t.services.bus.subscriberCount(), { timeout: 20_000 }).toBe(watching);
    reader.stdin.write('read now\n');
    await new Promise((resolve) => reader.once('close', resolve));

    const text = Buffer.concat(received).toString('utf8');
    const frames = [...text.matchAll(/(?:id: (\d+)\n)?data: (.*)\n\n/g)].map((m) => ({
      id: m[1] ? Number(m[1]) : undefined,
      data: JSON.parse(m[2]!),
    }));
    const end = frames.find((f) => f.data.event === 'error')!;
    expect(end.data.data).toMatchObject({ code: 'SLOW_CONSUMER', error: expect.stringContaining('Last-Event-ID') });
    const lastId = frames.filter((f) => f.id !== undefined).at(-1)!.id!;
    expect(end.data.data.last_event_id).toBe(lastId);
    const tokensBefore = frames.filter((f) => f.data.data?.type === 'assistant_token').length;
    expect(tokensBefore).toBeLessThan(count);

    const resumed = await watch(alice, id, lastId);
    await resumed.waitFor((f) => f.data?.data?.type === 'end_prompt');
    resumed.close();
    const rest = updates(resumed.frames).filter((e) => e.type === 'assistant_token');
    expect(tokensBefore + rest.length).toBe(count);
    expect(rest[0].text.slice(0, 4)).toBe(String(tokensBefore).padStart(4, '0'));
  });
});

/**
 * An app of its own on a fake provider (replying "fine" unless told otherwise), with one user
 * and their agent; `run` posts a streamed prompt and returns its events.
 */
function providerScenario(username: string, agent: { name: string; key: string }, llm: Omit<Partial<LlmConfig>, 'baseUrl'>) {
  const p = {} as { app: TestApp; llm: FakeOpenAI; user: TestUser; agent: { id: string } };
  setUp(async (start) => {
    p.llm = await start.fakeOpenAI({ tokens: ['fine'] });
    p.app = await start.app({ llm: { baseUrl: p.llm.baseUrl, ...llm } });
    p.user = await p.app.createUser(username);
    p.agent = await fixtures(p.app).agent(p.user, agent);
  });
  beforeEach(() => p.llm.reset());
  async function run(body: Record<string, unknown>) {
    const s = await openSse(`${p.app.url}/v2/sessions`, {
      method: 'POST',
      headers: { 'x-api-key': p.user.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ stream: true, agent_ids: [p.agent.id], ...body }),
    });
    streams.push(s);
    return updates(await s.done);
  }
  return { p, run };
}

describe('when the model provider fails', () => {
  // Short provider timeouts here only: a stall must end the reply within the test.
  const { p, run } = providerScenario('frank', { name: 'Flaky', key: 'flaky' }, { firstTokenTimeoutMs: 1500, idleTimeoutMs: 300 });

  it('retries once when the call fails before its first token', async () => {
    p.llm.enqueue({ status: 503 }, { tokens: ['second', ' try'] });
    const events = await run({ content: 'hello' });
    expect(events.find((e) => e.type === 'assistant_message').message).toMatchObject({ status: 'complete', content: 'second try' });
    expect(p.llm.replyRequests()).toHaveLength(2);
  });

  it('lets a reply that keeps streaming run past the idle timeout, which each chunk restarts', async () => {
    // 8 chunks 100 ms apart: 0.7 s in all, more than twice the 300 ms idle timeout.
    const tokens = ['one', ' two', ' three', ' four', ' five', ' six', ' seven', ' eight'];
    p.llm.enqueue({ tokens, delayMs: 100 });
    const events = await run({ content: 'hello' });
    expect(events.find((e) => e.type === 'assistant_message').message).toMatchObject({ status: 'complete', content: tokens.join('') });
  });

  it.each([
    ['an HTTP error twice', [{ status: 500 }, { status: 500 }], '', /HTTP 500/, 2],
    [
      'a dropped connection mid-reply',
      [{ tokens: ['par', 'tial', ' text'], dropAfter: 2 }],
      'partial',
      /closed in the middle|Could not reach/,
      1,
    ],
    ['a stall mid-reply', [{ tokens: ['so', ' far', ' never'], stallAfter: 2 }], 'so far', /stopped sending/, 1],
    ['a malformed chunk', [{ tokens: ['ok', ' then', ' junk'], malformedAfter: 2 }], 'ok then', /malformed/, 1],
    [
      'a chunk whose choices are not a list',
      [{ tokens: ['so', ' far', ' more'], raw: { after: 2, data: '{"choices":"nope"}' } }],
      'so far',
      /unexpected shape \(choices: .*expected array/,
      1,
    ],
    [
      'a chunk whose content is a number',
      [{ tokens: ['so', ' far', ' more'], raw: { after: 2, data: '{"choices":[{"index":0,"delta":{"content":42}}]}' } }],
      'so far',
      /unexpected shape \(choices\.0\.delta\.content: .*expected string/,
      1,
    ],
    [
      'an error reported mid-stream (a 500 after the headers)',
      [
        {
          tokens: ['so', ' far', ' more'],
          raw: { after: 2, data: '{"error":{"message":"upstream overloaded","type":"server_error","code":500}}' },
        },
      ],
      'so far',
      /reported an error: upstream overloaded/,
      1,
    ],
    [
      'a chunk over 1 MiB',
      [
        {
          tokens: ['so', ' far', ' more'],
          raw: { after: 2, data: JSON.stringify({ choices: [{ index: 0, delta: { content: 'x'.repeat(2 * 1024 * 1024) } }] }) },
        },
      ],
      'so far',
      /chunk longer than 1048576 characters/,
      1,
    ],
    [
      'a stream that ends without finishing or [DONE]',
      [{ tokens: ['so', ' far', ' never'], endAfter: 2 }],
      'so far',
      /closed in the middle/,
      1,
    ],
  ] as const)(
    'ends the reply with an error event and keeps the partial text after %s; the session stays usable',
    async (_name, scripts, partial, error, calls) => {
      p.llm.enqueue(...scripts);
      const events = await run({ content: 'go' });
      const failed = events.find((e) => e.type === 'error');
      expect(failed).toMatchObject({ error: expect.stringMatching(error), agent: p.agent.id });
      expect(failed.message).toMatchObject({ status: 'failed', content: partial, error: failed.error });
      expect(events.at(-1).type).toBe('end_prompt');
      expect(events.some((e) => e.type === 'assistant_message')).toBe(false);
      expect(p.llm.replyRequests()).toHaveLength(calls);

      const sessionId = events[0].session_id;
      const saved = await settledSession(p.app, p.user, sessionId);
      expect(saved.messages.at(-1)).toEqual(failed.message);
      const again = await run({ session_id: sessionId, content: 'try again' });
      expect(again.find((e) => e.type === 'assistant_message').message.content).toBe('fine');
    },
  );

  it('takes a stream that finished but ended without [DONE] as complete', async () => {
    p.llm.enqueue({ tokens: ['all', ' there'], omitDone: true });
    const events = await run({ content: 'go' });
    expect(events.find((e) => e.type === 'assistant_message').message).toMatchObject({ status: 'complete', content: 'all there' });
    expect(events.some((e) => e.type === 'error')).toBe(false);
  });
});

// Each limit with its own app: with both, 1,024 tokens streamed on a busy machine could take
// longer than the time limit and be cut off by the wrong one.
describe('when the model provider does not stop: the completion limit', () => {
  const { p, run } = providerScenario('nora', { name: 'Endless', key: 'endless' }, { maxCompletionTokens: 1024 });

  it('cuts a reply off at the completion limit it asked for (3,000 tokens streamed against 1,024), saved with what it had and why', async () => {
    const tokens = Array.from({ length: 3000 }, (_, i) => `w${i} `);
    p.llm.enqueue({ tokens });
    const events = await run({ content: 'go on forever' });
    expect(p.llm.replyRequests()[0]!.body.max_tokens).toBe(1024);
    const failed = events.find((e) => e.type === 'error');
    expect(failed.error).toBe('The reply was cut off at its limit of 1024 tokens');
    expect(failed.message).toMatchObject({ status: 'failed', content: tokens.slice(0, 1024).join('') });
    // What it streamed until the cut is charged: an estimate, as no usage came.
    expect(failed.message.usage.completion_tokens).toBeGreaterThan(0);
    expect(events.filter((e) => e.type === 'assistant_token')).toHaveLength(1024);
    expect(events.at(-1).type).toBe('end_prompt');
    const saved = await settledSession(p.app, p.user, events[0].session_id);
    expect(saved.messages.at(-1)).toEqual(failed.message);
  });
});

describe('when the model provider does not stop: the time limit', () => {
  const { p, run } = providerScenario('otto', { name: 'Slow', key: 'slow' }, { maxCallMs: 2000 });

  it('cuts a reply off when one model call streams past its time limit, however steadily', async () => {
    const tokens = Array.from({ length: 200 }, (_, i) => `w${i} `);
    p.llm.enqueue({ tokens, delayMs: 50 });
    const events = await run({ content: 'take your time' });
    const failed = events.find((e) => e.type === 'error');
    expect(failed.error).toBe('The model call ran past its limit of 2 s');
    expect(failed.message.status).toBe('failed');
    expect(tokens.join('').startsWith(failed.message.content)).toBe(true);
    expect(failed.message.content.length).toBeLessThan(tokens.join('').length);
    expect(events.at(-1).type).toBe('end_prompt');
    const again = await run({ session_id: events[0].session_id, content: 'short please' });
    expect(again.find((e) => e.type === 'assistant_message').message.content).toBe('fine');
  });
});
