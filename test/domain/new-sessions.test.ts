import { beforeAll, describe, expect, it } from 'vitest';
import { newSessionWriter } from '../../src/domain/sessions/prompt-store.ts';
import { domainDatabase, people } from '../helpers/domain-database.ts';

// New sessions that arrive together are written by one statement; one that cannot be written
// fails alone. Against the real database (no app), through the writer the sessions service uses.

const t = domainDatabase();
let alice: { id: string };
let agents: { id: string; name: string }[];

beforeAll(async () => {
  const make = await people(t.db);
  alice = await make.user('alice');
  agents = await Promise.all(['Ada', 'Bo'].map((name) => make.agent(alice, { name, key: name.toLowerCase() })));
});

const prompt = (content: string, agentList: { id: string; name: string }[], extra: Record<string, unknown> = {}) => ({
  userId: alice.id,
  instance: 'test-instance',
  prompt: { content, attachments: [`https://example.com/${content}.png`], responders: agentList.map((a) => a.id) },
  session: { create: { agents: agentList, ...extra } },
});

describe('new sessions written together', () => {
  it('takes several in one statement, each with its own settings, agents and messages in order', async () => {
    const save = newSessionWriter(t.db);
    const before = t.queries.length;
    const saved = await Promise.all([
      save(prompt('one', [agents[0]!], { title: 'First', turnBudget: 5 })),
      save(prompt('two', agents, { scenario: 'A harbour', mannaBudget: 2.5 })),
      save(prompt('three', [agents[1]!], {})),
    ]);
    expect(t.queries.slice(before).filter((q) => q.includes('INSERT INTO "Session"'))).toHaveLength(1);

    const rows = await t.db.session.findMany({
      where: { id: { in: saved.map((s) => s.sessionId) } },
      include: { agents: { orderBy: { position: 'asc' } }, users: true, messages: { orderBy: { ordinal: 'asc' } } },
    });
    const byId = new Map(rows.map((r) => [r.id, r]));
    const [one, two, three] = saved.map((s) => byId.get(s.sessionId)!);
    expect([one!.title, one!.turnBudget, one!.turnsSpent]).toEqual(['First', 5, 1]);
    expect([two!.scenario, Number(two!.mannaBudget), two!.turnsSpent]).toEqual(['A harbour', 2.5, 2]);
    expect(two!.agents.map((a) => [a.agentId, a.position])).toEqual([
      [agents[0]!.id, 0],
      [agents[1]!.id, 1],
    ]);
    for (const [s, content] of [
      [one!, 'one'],
      [two!, 'two'],
      [three!, 'three'],
    ] as const) {
      expect(s.users).toEqual([expect.objectContaining({ userId: alice.id, permission: 'owner' })]);
      expect(s.messages.map((m) => m.role)).toEqual(['eden', 'user', ...s.agents.map(() => 'assistant')]);
      expect(s.messages[1]).toMatchObject({ content, attachments: [`https://example.com/${content}.png`], senderId: alice.id });
      expect(s.messages.slice(2).map((m) => [m.status, m.instance, m.promptId])).toEqual(
        s.agents.map(() => ['streaming', 'test-instance', s.messages[1]!.id]),
      );
    }
    // What each caller got back is its own session's prompt and replies.
    for (const [i, s] of saved.entries()) {
      expect(s.prompt!.sessionId).toBe(s.sessionId);
      expect(s.replies.map((r) => r.agentId)).toEqual([one, two, three][i]!.agents.map((a) => a.agentId));
    }
  });

  it('writes the others when one of them cannot be written, and fails only that one', async () => {
    const save = newSessionWriter(t.db);
    const ghost = { id: '0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000', name: 'Nobody' };
    const outcomes = await Promise.allSettled([
      save(prompt('kept 1', [agents[0]!])),
      save(prompt('doomed', [ghost])),
      save(prompt('kept 2', [agents[1]!])),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const written = await t.db.message.findMany({ where: { content: { in: ['kept 1', 'doomed', 'kept 2'] } } });
    expect(written.map((m) => m.content).sort()).toEqual(['kept 1', 'kept 2']);
  });
});
