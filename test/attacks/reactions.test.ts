import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, updates } from '../helpers/sse.ts';

let t: TestApp;
let alice: TestUser;
let sessionId: string;
let replyId: string;
const editors: TestUser[] = [];

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
  const agent = await fixtures(t).agent(alice, { name: 'Echo', key: 'echo-react' });
  const res = await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [agent.id], content: 'hello' } });
  sessionId = res.body.session_id;
  replyId = (await settledSession(t, alice, sessionId)).messages.at(-1).id;
  for (let i = 0; i < 12; i++) {
    const u = await t.createUser(`editor${i}`);
    await t.rest('POST', `/v2/sessions/${sessionId}/users`, { key: alice.apiKey, body: { username: u.username, permission: 'editor' } });
    editors.push(u);
  }
});

const react = (user: TestUser, reaction: string) =>
  t.rest('POST', '/v2/sessions/react', { key: user.apiKey, body: { message_id: replyId, reaction } });
const ALLOWED = ['thumbs_up', 'pin', '🔥', '🎉', '❤️', '👀', '🚀', '💯', '✅', '⭐'];

describe('reactions', () => {
  it('are a closed set: names outside it are refused and change nothing', async () => {
    for (const reaction of ['x', 'lol', '<script>', '🦄', 'thumbs-up']) {
      const res = await react(alice, reaction);
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(/^reaction: must be one of thumbs_up thumbs_down pin /);
    }
    expect(await t.db.reaction.count({ where: { messageId: replyId } })).toBe(0);
  });

  it('at most 10 per user and message; one more is refused (422), a toggle off still works', async () => {
    for (const r of ALLOWED) expect((await react(alice, r)).status).toBe(200);
    const eleventh = await react(alice, '😊');
    expect(eleventh.status).toBe(422);
    expect(eleventh.body.message).toMatch(/at most 10 reactions per user on one message/);
    expect(await t.db.reaction.count({ where: { messageId: replyId, userId: alice.id } })).toBe(10);
    expect((await react(alice, 'pin')).status).toBe(200);
    expect(await t.db.reaction.count({ where: { messageId: replyId, userId: alice.id } })).toBe(9);
    // Ten at once cannot pass the cap either.
    const burst = await Promise.all(['pin', '😊', '🤔', '🙏', '👏'].map((r) => react(alice, r)));
    expect(burst.filter((r) => r.status === 200)).toHaveLength(1);
    expect(await t.db.reaction.count({ where: { messageId: replyId, userId: alice.id } })).toBe(10);
  });

  it("a watcher receives each change with the message's totals, never the whole map: traffic grows with the number of reactions, not its square", async () => {
    const watch = await openSse(`${t.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': alice.apiKey } });
    let requests = 0;
    // Twelve users give ten reactions each: 120 requests (before: each event carried every reaction so far).
    for (let round = 0; round < 1; round++) {
      await Promise.all(
        editors.map(async (u) => {
          for (const r of ALLOWED) {
            expect((await react(u, r)).status).toBe(200);
            requests++;
          }
        }),
      );
    }
    await watch.waitFor(() => updates(watch.frames).filter((e) => e.type === 'reaction').length >= requests);
    watch.close();
    const events = updates(watch.frames).filter((e) => e.type === 'reaction');
    expect(events).toHaveLength(requests);
    const sizes = watch.frames.filter((f) => f.data?.data?.type === 'reaction').map((f) => JSON.stringify(f.data).length);
    // The largest event holds at most one user's ten reactions and a total per reaction in the set.
    expect(Math.max(...sizes)).toBeLessThan(2_000);
    const last = events.at(-1);
    expect(Object.keys(last.reactions)).toEqual([last.user]);
    // Every editor has all ten, alice her own.
    const totals = Object.fromEntries(last.counts.map((c: { reaction: string; count: number }) => [c.reaction, c.count]));
    const mine = (await t.db.reaction.findMany({ where: { messageId: replyId, userId: alice.id } })).map((r) => r.reaction);
    for (const r of ALLOWED) expect(totals[r]).toBe(12 + (mine.includes(r) ? 1 : 0));
    const stored = await settledSession(t, alice, sessionId);
    expect(Object.keys(stored.messages.at(-1).reactions)).toHaveLength(13);
  });
});
