import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { type FakeOpenAI, isMemoryRequest } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';

let t: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['First', ' answer.'] });
  t = await start.app({ llm: { baseUrl: llm.baseUrl } });
  alice = await t.createUser('alice');
});

describe('a public share', () => {
  it('shows exactly what existed when it was made: not a reply still being written then, nor later reactions', async () => {
    const agent = await fixtures(t).agent(alice, { name: 'Echo', key: 'echo-share' });
    const first = await t.rest('POST', '/v2/sessions', {
      key: alice.apiKey,
      body: { agent_ids: [agent.id], content: 'hello', title: 'Shared' },
    });
    const sessionId = first.body.session_id as string;
    const before = await settledSession(t, alice, sessionId);
    const firstReply = before.messages.at(-1);
    await t.rest('POST', '/v2/sessions/react', { key: alice.apiKey, body: { message_id: firstReply.id, reaction: 'thumbs_up' } });

    // A second reply is being written when the session is shared.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    // Chosen by its prompt, not by the order of the calls: the two replies below start together,
    // and on a busy machine the second one's call can reach the model first.
    llm.choose((r) =>
      !isMemoryRequest(r) && r.body.messages.filter((m) => m.role === 'user').at(-1)?.content === 'and now?'
        ? { tokens: ['Written', ' after', ' sharing'], gate: (i) => (i === 1 ? held : undefined) }
        : undefined,
    );
    expect((await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: sessionId, content: 'and now?' } })).status).toBe(
      200,
    );
    // Meanwhile another prompt is answered in full: the share's last message comes after the held reply.
    expect(
      (await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: sessionId, content: 'quick one' } })).status,
    ).toBe(200);
    await expect
      .poll(async () => {
        const { messages } = (await t.rest('GET', `/v2/sessions/${sessionId}`, { key: alice.apiKey })).body;
        return messages.filter((m: { content: string; status: string }) => m.content === 'First answer.' && m.status === 'complete').length;
      })
      .toBe(2);
    const made = await t.rest('POST', `/v2/sessions/${sessionId}/share`, { key: alice.apiKey });
    expect(made.status).toBe(201);
    const shareId = made.body.share.share_id as string;
    const read = async () => (await t.rest('GET', `/v2/sessions/share/${shareId}`)).body.share;
    const atShare = await read();

    release();
    const after = await settledSession(t, alice, sessionId);
    expect(after.messages.find((m: { content: string }) => m.content === 'Written after sharing')).toMatchObject({ status: 'complete' });
    await t.rest('POST', '/v2/sessions/react', { key: alice.apiKey, body: { message_id: firstReply.id, reaction: '🔥' } });

    const later = await read();
    expect(later).toEqual(atShare);
    expect(later.messages.map((m: { content: string }) => m.content)).not.toContain('Written after sharing');
    expect(later.messages.map((m: { content: string }) => m.content)).toEqual([
      expect.stringMatching(/joined the session/),
      'hello',
      'First answer.',
      'and now?',
      'quick one',
      'First answer.',
    ]);
    expect(later.messages[2].reactions).toEqual([{ reaction: 'thumbs_up', count: 1 }]);
  });
});
