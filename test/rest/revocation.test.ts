import { afterAll, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { newSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, type SseClient, updates } from '../helpers/sse.ts';

/**
 * What an attacker tried: open event streams on a session at the very moment its owner removes
 * them (or deletes their key), then keep listening. On the CI lane with Redis, the watch takes
 * a slot and its position through Redis round trips, which is where the race was.
 */
let t: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;
let agentId: string;
const streams: SseClient[] = [];

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Noted', '.'] });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, limits: { maxSubscriptionsPerKey: 100 } });
  alice = await t.createUser('alice');
  agentId = (await fixtures(t).agent(alice, { name: 'Scribe', key: 'scribe' })).id;
});
afterAll(async () => {
  for (const s of streams.splice(0)) s.close();
});

const events = (userKey: string, sessionId: string) =>
  openSse(`${t.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': userKey } }).then((s) => {
    streams.push(s);
    return s;
  });

/** Streams of the session opened one every 3 ms: they start before, during and after what the test does next. */
const eventsOpening = (key: string, sessionId: string) =>
  Array.from({ length: 10 }, (_, i) => new Promise((r) => setTimeout(r, i * 3)).then(() => events(key, sessionId)));

/**
 * Posts `secret` to the session with `key` (still allowed to), then: every stream that opened
 * ends with ACCESS_REVOKED and never shows it.
 */
async function expectNothingAfter(opened: SseClient[], post: { sessionId: string; key: string; secret: string }) {
  const { sessionId, key, secret } = post;
  expect((await t.rest('POST', '/v2/sessions', { key, body: { session_id: sessionId, content: secret } })).status).toBe(200);
  for (const s of opened) {
    if (s.status !== 200) {
      expect([401, 403]).toContain(s.status);
      continue;
    }
    const frames = await s.done;
    expect(
      frames.some((f) => f.event === 'error' && f.data.data.code === 'ACCESS_REVOKED'),
      JSON.stringify(frames.slice(-2)),
    ).toBe(true);
    expect(JSON.stringify(updates(frames))).not.toContain(secret);
  }
}

describe('revocation while streams open', () => {
  it('a user removed while opening streams receives nothing posted after the removal, in every round', async () => {
    for (let round = 0; round < 4; round++) {
      const bob = await t.createUser(`bob${round}`);
      const sessionId = await newSession(t, alice, [agentId]);
      const added = await t.rest('POST', `/v2/sessions/${sessionId}/users`, {
        key: alice.apiKey,
        body: { username: bob.username, permission: 'editor' },
      });
      expect(added.status).toBe(200);
      const opening = eventsOpening(bob.apiKey, sessionId);
      const removed = await t.rest('DELETE', `/v2/sessions/${sessionId}/users/${bob.id}`, { key: alice.apiKey });
      expect(removed.status).toBe(200);
      const opened = await Promise.all(opening);
      expect((await t.rest('GET', `/v2/sessions/${sessionId}`, { key: bob.apiKey })).status).toBe(403);
      await expectNothingAfter(opened, { sessionId, key: alice.apiKey, secret: `posted after the removal, round ${round}` });
    }
  });

  it('a deleted key ends the streams opened with it, also those opened while it was being deleted', async () => {
    const carol = await t.createUser('carol');
    const sessionId = await newSession(t, carol, [agentId]);
    const spare = await t.services.apiKeys.create(carol.id);
    const opening = eventsOpening(carol.apiKey, sessionId);
    const deleted = await t.rest('DELETE', '/apikeys', { key: spare.apiKey, body: { apiKey: carol.apiKey } });
    expect(deleted.status).toBe(200);
    const opened = await Promise.all(opening);
    await expectNothingAfter(opened, { sessionId, key: spare.apiKey, secret: 'posted after the key was deleted' });
  });

  it('a watch that missed the removal signal is still ended by the next access check', async () => {
    const dave = await t.createUser('dave');
    const sessionId = await newSession(t, alice, [agentId]);
    await t.rest('POST', `/v2/sessions/${sessionId}/users`, { key: alice.apiKey, body: { username: dave.username, permission: 'editor' } });
    const stream = await events(dave.apiKey, sessionId);
    expect(stream.status).toBe(200);
    // Removed behind the service's back: no event says so, as when the bus lost the signal. The
    // periodic check ends the watch by itself, with nothing to deliver.
    await t.db.sessionUser.deleteMany({ where: { sessionId, userId: dave.id } });
    const frames = await stream.done;
    expect(frames.at(-2)).toMatchObject({ event: 'error', data: { data: { code: 'ACCESS_REVOKED' } } });
    expect(frames.at(-1)).toMatchObject({ event: 'done' });
  });

  it('a streamed prompt whose key is deleted after it was checked saves nothing, to a new session or an existing one', async () => {
    const erin = await t.createUser('erin');
    const existing = await newSession(t, erin, [agentId]);
    const doomed = await t.services.apiKeys.create(erin.id);
    // The request got past authentication; the key goes before its prompt is written.
    const viewer = await t.services.apiKeys.authenticate(doomed.apiKey);
    await t.db.apiKey.delete({ where: { id: viewer.keyId } });
    const sessionsBefore = await t.db.session.count({ where: { ownerId: erin.id } });
    const messagesBefore = await t.db.message.count({ where: { sessionId: existing } });
    for (const input of [
      { agentIds: [agentId], content: 'new' },
      { sessionId: existing, content: 'more' },
    ]) {
      await expect(t.services.sessions.sendAndWatch(viewer, input)).rejects.toMatchObject({
        code: 'UNAUTHENTICATED',
        message: 'The API key of this stream was deleted',
      });
    }
    expect(await t.db.session.count({ where: { ownerId: erin.id } })).toBe(sessionsBefore);
    expect(await t.db.message.count({ where: { sessionId: existing } })).toBe(messagesBefore);
  });
});
