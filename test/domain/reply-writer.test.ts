import { beforeAll, describe, expect, it } from 'vitest';
import { replyStore } from '../../src/domain/replies/index.ts';
import { createReplyWriter } from '../../src/domain/replies/writer.ts';
import { sessionTitles } from '../../src/domain/sessions/index.ts';
import { newSessionWriter } from '../../src/domain/sessions/prompt-store.ts';
import { domainDatabase, people } from '../helpers/domain-database.ts';

// The writer saves the replies that complete together in one statement. A row the database
// refuses must fail only its own reply, not every reply grouped with it, and a reply saved again
// must not be counted again. Over the replies' store on a migrated database, with no app.

const t = domainDatabase();
let sessionId: string;
let agentId: string;

beforeAll(async () => {
  const make = await people(t.db);
  const alice = await make.user('alice');
  const agent = await make.agent(alice, { name: 'Scribe', key: 'scribe' });
  agentId = agent.id;
  // A session as a first prompt makes it (its first reply left streaming: no engine runs here).
  const saved = await newSessionWriter(t.db)({
    userId: alice.id,
    instance: 'test-instance',
    prompt: { content: 'Hello there', attachments: [], responders: [agentId] },
    session: { create: { agents: [agent] } },
  });
  sessionId = saved.sessionId;
});

const streamingReply = () => t.db.message.create({ data: { sessionId, role: 'assistant', senderId: agentId, status: 'streaming' } });

describe('the reply writer', () => {
  it('saves the replies completed together, each alone when the database refuses one of them', async () => {
    const replies = await Promise.all(Array.from({ length: 5 }, streamingReply));
    const writer = createReplyWriter(replyStore(t.db, sessionTitles(t.db)), { error: () => {} });
    const before = await t.db.session.findUniqueOrThrow({ where: { id: sessionId }, select: { tokensSpent: true } });
    // PostgreSQL text cannot hold NUL: the third reply's row is refused.
    const saves = replies.map((r, i) =>
      writer.complete({
        sessionId,
        messageId: r.id,
        content: i === 2 ? 'bad\u0000row' : `reply ${i}`,
        thought: '',
        promptTokens: 1,
        completionTokens: 2,
      }),
    );
    const results = await Promise.allSettled(saves);

    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    for (const [i, r] of results.entries())
      if (r.status === 'fulfilled') expect(r.value).toMatchObject({ id: replies[i]!.id, status: 'complete', content: `reply ${i}` });
    const rows = await t.db.message.findMany({ where: { id: { in: replies.map((r) => r.id) } }, select: { id: true, status: true } });
    expect(rows.filter((r) => r.status === 'complete')).toHaveLength(4);
    expect(rows.find((r) => r.id === replies[2]!.id)!.status).toBe('streaming');
    // The session counts the tokens of the four saved, once each.
    const after = await t.db.session.findUniqueOrThrow({ where: { id: sessionId }, select: { tokensSpent: true } });
    expect(after.tokensSpent - before.tokensSpent).toBe(4 * 3);
  });

  it('hands a large group of saved replies back a few at a time, with other work let through in between', async () => {
    const replies = await Promise.all(Array.from({ length: 60 }, streamingReply));
    const writer = createReplyWriter(replyStore(t.db, sessionTitles(t.db)), { error: () => {} });
    // What each caller does with its saved reply (its last events, its memory and title calls)
    // runs as it is handed back. Other work due meanwhile, such as the next token of a reply still
    // streaming (here, a callback queued when the first save comes back), must not wait for all of them.
    const order: string[] = [];
    let queued = false;
    const saves = replies.map((r, i) =>
      writer
        .complete({ sessionId, messageId: r.id, content: `reply ${i}`, thought: '', promptTokens: 0, completionTokens: 1 })
        .then((view) => {
          if (!queued) setImmediate(() => order.push('other work'));
          queued = true;
          order.push(view!.status);
        }),
    );
    await Promise.all(saves);
    expect(order.filter((o) => o === 'complete')).toHaveLength(60);
    const otherAt = order.indexOf('other work');
    expect(otherAt).toBeGreaterThan(0);
    expect(otherAt).toBeLessThan(60);
  });

  it('counts a reply saved twice once, and the second save changes nothing', async () => {
    const reply = await streamingReply();
    const writer = createReplyWriter(replyStore(t.db, sessionTitles(t.db)), { error: () => {} });
    const before = await t.db.session.findUniqueOrThrow({ where: { id: sessionId }, select: { tokensSpent: true } });
    const save = (content: string) =>
      writer.complete({ sessionId, messageId: reply.id, content, thought: '', promptTokens: 5, completionTokens: 7 });
    expect(await save('the reply')).toMatchObject({ status: 'complete', content: 'the reply' });
    expect(await save('again')).toBeNull();
    const after = await t.db.session.findUniqueOrThrow({ where: { id: sessionId }, select: { tokensSpent: true } });
    expect(after.tokensSpent - before.tokensSpent).toBe(12);
    expect(await t.db.message.findUniqueOrThrow({ where: { id: reply.id }, select: { content: true } })).toEqual({ content: 'the reply' });
  });
});
