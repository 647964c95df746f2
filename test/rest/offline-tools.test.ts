import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { newSession, settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';

/** With nothing configured, asking an agent in so many words for a picture still makes one. */
let t: TestApp;
let alice: TestUser;
let painter: { id: string };

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
  await t.services.manna.grant('alice', '10', 'forever');
  painter = await fixtures(t).agent(alice, { name: 'Painter', key: 'painter', tools: { flux_schnell: true } });
});

describe('the offline responder with tools', () => {
  it('calls the agent’s image tool with the user’s words and links the result, honestly offline', async () => {
    const id = await newSession(t, alice, [painter.id], { content: 'Please draw a cat asleep on a stack of zines' });
    const reply = (await settledSession(t, alice, id)).messages.at(-1);
    expect(reply.tool_calls).toEqual([
      expect.objectContaining({
        tool: 'flux_schnell',
        status: 'completed',
        cost: 0.25,
        args: expect.objectContaining({ prompt: 'Please draw a cat asleep on a stack of zines' }),
      }),
    ]);
    const url = reply.tool_calls[0].result.images[0].url;
    expect(reply.content).toContain('answering offline');
    expect(reply.content).toContain(url);
    expect((await fetch(url)).headers.get('content-type')).toBe('image/png');
    expect((await t.rest('GET', '/v2/creators/me', { key: alice.apiKey })).body.balance).toBe(9.75);
  });

  it('answers from the profile when nobody asks for a picture', async () => {
    const id = await newSession(t, alice, [painter.id], { content: 'What do you think of riso printing?' });
    const reply = (await settledSession(t, alice, id)).messages.at(-1);
    expect(reply.tool_calls).toEqual([]);
    expect(reply.content).toMatch(/^I'm Painter, answering offline/);
  });
});
