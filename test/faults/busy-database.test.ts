import { afterAll, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, updates, type SseClient } from '../helpers/sse.ts';

/**
 * Load must make replies slower, never failed or silent. Here a few hundred replies stream at once
 * while every write to a reply's row is made deliberately slow (a trigger that burns CPU in the
 * database for each row), so their checkpoints and final saves pile up behind each other. Every
 * stream must still end with its reply complete and its `done` frame. Nothing here times anything.
 */
const REPLIES = 200;
const TOKENS = ['Slow', ' and', ' steady', '.'];

describe('a few hundred replies through a slow database', () => {
  let t: TestApp;
  let llm: FakeOpenAI;
  let user: TestUser;
  let agent: { id: string };
  const streams: SseClient[] = [];

  setUp(async (start) => {
    llm = await start.fakeOpenAI({ tokens: TOKENS, delayMs: 40 });
    t = await start.app({
      llm: { baseUrl: llm.baseUrl, checkpointMs: 50 },
      limits: { maxStreamsPerKey: REPLIES * 2, maxSubscriptionsPerKey: REPLIES * 2 },
    });
    user = await t.createUser('patience');
    agent = await fixtures(t).agent(user, { name: 'Steady', key: 'steady' });
    await t.db.$executeRawUnsafe(`
      CREATE FUNCTION slow_reply_write() RETURNS trigger AS $$
      BEGIN
        PERFORM sum(g) FROM generate_series(1, 5000) AS g;
        RETURN NEW;
      END $$ LANGUAGE plpgsql`);
    await t.db.$executeRawUnsafe(`
      CREATE TRIGGER slow_reply_write BEFORE UPDATE ON "Message"
      FOR EACH ROW WHEN (OLD."status" = 'streaming') EXECUTE FUNCTION slow_reply_write()`);
  });
  afterAll(async () => {
    for (const s of streams) s.close();
  });

  it('ends every stream with its complete reply and its done frame', async () => {
    const opened = await Promise.all(
      Array.from({ length: REPLIES }, async (_, i) => {
        const s = await openSse(`${t.url}/v2/sessions`, {
          method: 'POST',
          headers: { 'x-api-key': user.apiKey, 'content-type': 'application/json' },
          body: JSON.stringify({ stream: true, agent_ids: [agent.id], content: `question ${i}` }),
        });
        streams.push(s);
        return s;
      }),
    );
    expect(opened.map((s) => s.status)).toEqual(opened.map(() => 200));
    const ended = await Promise.all(opened.map((s) => s.done));

    const outcomes = ended.map((frames) => {
      const events = updates(frames);
      return {
        done: frames.at(-1)?.event === 'done',
        errors: events.filter((e) => e.type === 'error').map((e) => e.error),
        reply: events.find((e) => e.type === 'assistant_message')?.message,
        last: events.at(-1)?.type,
      };
    });
    expect(outcomes.filter((o) => !o.done)).toEqual([]);
    expect(outcomes.flatMap((o) => o.errors)).toEqual([]);
    expect(outcomes.filter((o) => o.reply?.status !== 'complete' || o.reply.content !== TOKENS.join(''))).toEqual([]);
    expect(outcomes.filter((o) => o.last !== 'end_prompt')).toEqual([]);

    // Saved as they were shown, with every session's tokens counted.
    const stillStreaming = await t.db.message.count({ where: { status: 'streaming' } });
    expect(stillStreaming).toBe(0);
    const saved = await t.db.message.count({ where: { role: 'assistant', status: 'complete', content: TOKENS.join('') } });
    expect(saved).toBe(REPLIES);
    const uncounted = await t.db.session.count({ where: { ownerId: user.id, tokensSpent: 0 } });
    expect(uncounted).toBe(0);
  });
});
