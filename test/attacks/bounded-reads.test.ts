import { describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';

let t: TestApp;
let alice: TestUser;
let sessionId: string;
const PAGE_BYTES = 300_000;
const big = (i: number) => `${i}:`.padEnd(100_000, 'x');

setUp(async (start) => {
  t = await start.app({ work: { messagePageMaxBytes: PAGE_BYTES } });
  alice = await t.createUser('alice');
  const agent = await fixtures(t).agent(alice, { name: 'Echo', key: 'echo-pages' });
  const first = await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [agent.id], content: big(0) } });
  sessionId = first.body.session_id;
  await settledSession(t, alice, sessionId);
  for (let i = 1; i < 6; i++) {
    expect((await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: sessionId, content: big(i) } })).status).toBe(
      200,
    );
    await settledSession(t, alice, sessionId);
  }
});

describe('a page of messages', () => {
  it('stops before its byte budget whatever the limit asked for; the cursors walk every message, each whole', async () => {
    const res = await fetch(`${t.url}/v2/sessions/${sessionId}?limit=200`, { headers: { 'x-api-key': alice.apiKey } });
    const text = await res.text();
    expect(res.status).toBe(200);
    // Three 100,000-character prompts fit in 300,000 bytes with the short replies; six would not.
    // (The body carries the page twice: in the original's `session.messages` and in `messages`.)
    const textBytes = (messages: { content: string }[]) => messages.reduce((n, m) => n + Buffer.byteLength(m.content), 0);
    expect(textBytes(JSON.parse(text).messages)).toBeLessThanOrEqual(PAGE_BYTES);
    expect(text.length).toBeLessThan(2 * PAGE_BYTES + 50_000);
    const latest = JSON.parse(text);
    expect(latest.page.hasOlder).toBe(true);
    const seen: { role: string; content: string }[] = [...latest.messages];
    let cursor = latest.page.olderCursor;
    let page = latest.page;
    for (let reads = 0; page.hasOlder && reads < 20; reads++) {
      const older = await t.rest('GET', `/v2/sessions/${sessionId}?limit=200&before=${encodeURIComponent(cursor)}`, { key: alice.apiKey });
      expect(older.status).toBe(200);
      expect(textBytes(older.body.messages)).toBeLessThanOrEqual(PAGE_BYTES);
      seen.unshift(...older.body.messages);
      page = older.body.page;
      cursor = page.olderCursor;
    }
    expect(page.hasOlder).toBe(false);
    const prompts = seen.filter((m) => m.role === 'user').map((m) => m.content);
    expect(prompts).toEqual([0, 1, 2, 3, 4, 5].map(big));

    // Forwards too, over GraphQL-equivalent REST paging with `after`.
    const forwards = await t.rest(
      'GET',
      `/v2/sessions/${sessionId}?limit=200&after=${encodeURIComponent(cursor ?? latest.page.olderCursor)}`,
      {
        key: alice.apiKey,
      },
    );
    expect(forwards.status).toBe(200);
    expect(forwards.body.messages.length).toBeGreaterThan(0);
    expect(textBytes(forwards.body.messages)).toBeLessThanOrEqual(PAGE_BYTES);
    expect(forwards.body.page.hasNewer).toBe(true);
  });

  it('holds one message even when that one alone is over the budget', async () => {
    const small = await startTestApp({ work: { messagePageMaxBytes: 1_000 } });
    try {
      const bob = await small.createUser('bob');
      const agent = await fixtures(small).agent(bob, { name: 'Echo', key: 'echo-one' });
      const res = await small.rest('POST', '/v2/sessions', { key: bob.apiKey, body: { agent_ids: [agent.id], content: big(9) } });
      await settledSession(small, bob, res.body.session_id);
      // The latest page is the short reply alone: the prompt before it would pass the budget.
      const latest = await small.rest('GET', `/v2/sessions/${res.body.session_id}?limit=50`, { key: bob.apiKey });
      expect(latest.body.messages.map((m: { role: string }) => m.role)).toEqual(['assistant']);
      const before = encodeURIComponent(latest.body.page.olderCursor);
      const read = await small.rest('GET', `/v2/sessions/${res.body.session_id}?limit=50&before=${before}`, { key: bob.apiKey });
      expect(read.body.messages.map((m: { content: string }) => m.content)).toEqual([big(9)]);
      expect(read.body.page.hasOlder).toBe(true);
    } finally {
      await small.close();
    }
  });
});
